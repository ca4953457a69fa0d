"""How pytest-xdist hands the suite's tests to its workers (``tests/conftest.py``'s scheduler hook).

Every test is its own unit of work, except the modules named together, each one unit on one worker (their tests
share one costly module-scoped fixture). xdist's ``LoadScopeScheduling`` does the grouping; this subclass also
makes a worker that dies mid-run (a test that ends its own process: a signal whose default action kills,
``os._exit``, a native crash) cost one failed test instead of the whole run. pytest-xdist 3.8.0 deadlocks there:
``remove_node`` puts the dead worker's whole workload back on the queue, finished units included, which are then
sent as empty batches that never complete (pytest-dev/pytest-xdist#1378); it re-runs the test that crashed the
worker (#1371); a replacement worker is given one test, which a worker never starts until it holds a second one
or is told to shut down (#1327), or tests before it has collected them (#1189). The run then waits until CI's
limit and prints no failure at all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from xdist.scheduler import LoadScopeScheduling


class TogetherScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``LoadScopeScheduling`` with a unit per test except ``together``'s modules, and a worker's death survived."""

    def __init__(self, config: Any, log: Any = None, together: Sequence[str] = ()) -> None:
        super().__init__(config, log)
        self.together = tuple(together)

    def _split_scope(self, nodeid: str) -> str:
        return next((m for m in self.together if nodeid.startswith(m + "::")), nodeid)

    def remove_node(self, node: Any) -> str | None:
        """A worker gone: at its end (nothing pending: ``None``) or dead, when the test it was running is marked
        done (xdist reports it failed) and only its unfinished units go back, to the front of the queue."""
        workload: dict[str, dict[str, bool]] = self.assigned_work.pop(node)
        if not self._pending_of(workload):
            return None
        crashed = next(nodeid for unit in workload.values() for nodeid, done in unit.items() if not done)
        self.workqueue = OrderedDict(
            [(scope, unit) for scope, unit in workload.items() if not all(unit[n] or n == crashed for n in unit)]
            + list(self.workqueue.items()))
        for unit in self.workqueue.values():
            if crashed in unit:
                unit[crashed] = True
        for other in self.nodes:
            self._reschedule(other)
        return crashed

    def _reschedule(self, node: Any) -> None:
        """Keep the worker holding more than two tests while there are any (a worker runs a test only once it
        knows the next one, or that there is none), then tell it the queue is empty. A replacement worker that
        has not finished collecting is left alone: its collection's end schedules it (#1189)."""
        if node.shutting_down or node not in self.registered_collections:
            return
        while self.workqueue and self._pending_of(self.assigned_work[node]) <= 2:
            self._assign_work_unit(node)
        if not self.workqueue:
            node.shutdown()
