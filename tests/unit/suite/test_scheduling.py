"""The suite's scheduler (tests/support/scheduling.py) on workers that only record what they are sent: what a dead
worker's tests become, and that a replacement is given nothing before it has collected."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.support.scheduling import TogetherScheduling

# as tests/conftest.py sorts the suite: the module run together (the real vLLM's) first
TESTS = ["v.py::t1", "v.py::t2", "v.py::t3", "a.py::t1", "a.py::t2", "a.py::t3", "b.py::t1", "b.py::t2"]


class Worker:
    """A worker as the scheduler sees one: the indexes it was sent, and whether it was told to shut down."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True

    def __repr__(self) -> str:
        return self.gateway.id


def _scheduler(workers: list[Worker]) -> TogetherScheduling:
    config: Any = SimpleNamespace(getvalue=lambda name: [f"{len(workers)}*popen"],
                                  option=SimpleNamespace(loadscopereorder=False))
    s = TogetherScheduling(config, SimpleNamespace(loadscopesched=lambda *a: None), together=("v.py",))
    for w in workers:
        s.add_node(w)
        s.add_node_collection(w, TESTS)
    s.schedule()
    return s


def _done(s: TogetherScheduling, w: Worker, nodeid: str) -> None:
    s.mark_test_complete(w, TESTS.index(nodeid))


def test_together_modules_are_one_unit_and_the_rest_a_unit_per_test():
    s = _scheduler([Worker("gw0"), Worker("gw1")])
    scopes = {scope for work in s.assigned_work.values() for scope in work} | set(s.workqueue)
    assert scopes == {"a.py::t1", "a.py::t2", "a.py::t3", "b.py::t1", "b.py::t2", "v.py"}


def _sent(w: Worker) -> list[str]:
    return [TESTS[i] for i in w.sent]


def test_every_worker_starts_holding_more_than_two_tests():
    gw0, gw1 = Worker("gw0"), Worker("gw1")
    _scheduler([gw0, gw1])
    assert _sent(gw0) == ["v.py::t1", "v.py::t2", "v.py::t3"]
    assert _sent(gw1) == ["a.py::t1", "a.py::t2", "a.py::t3"]


def test_a_dead_worker_gives_back_only_what_it_did_not_run_and_not_the_test_it_died_on():
    gw0, gw1 = Worker("gw0"), Worker("gw1")
    s = _scheduler([gw0, gw1])
    _done(s, gw0, "v.py::t1")  # v.py::t2 kills the worker: the scheduler learns it from its death alone
    assert s.remove_node(gw0) == "v.py::t2"
    # what is left of the unit goes before the rest, without the test that killed the worker
    assert next(iter(s.workqueue.items())) == ("v.py", {"v.py::t1": True, "v.py::t2": True, "v.py::t3": False})


def test_a_dead_worker_s_finished_units_are_not_given_out_again():
    gw0, gw1 = Worker("gw0"), Worker("gw1")
    s = _scheduler([gw0, gw1])
    for t in ("a.py::t1", "a.py::t2"):
        _done(s, gw1, t)  # and gw1 is given b.py::t1 and b.py::t2, to hold more than two again
    assert _sent(gw1)[3:] == ["b.py::t1", "b.py::t2"]
    assert s.remove_node(gw1) == "a.py::t3"
    assert list(s.workqueue) == ["b.py::t1", "b.py::t2"]


def test_a_replacement_is_given_nothing_before_its_collection_then_more_than_two_tests():
    gw0, gw1 = Worker("gw0"), Worker("gw1")
    s = _scheduler([gw0, gw1])
    gw2 = Worker("gw2")
    s.add_node(gw2)  # started, still collecting
    s.remove_node(gw1)  # died on a.py::t1
    assert gw2.sent == []
    s.add_node_collection(gw2, TESTS)
    s.schedule()
    assert _sent(gw2) == ["a.py::t2", "a.py::t3", "b.py::t1"]


def test_a_worker_is_told_to_shut_down_once_the_queue_is_empty():
    gw0, gw1 = Worker("gw0"), Worker("gw1")
    s = _scheduler([gw0, gw1])
    for w in (gw0, gw1):
        for i in list(w.sent):
            _done(s, w, TESTS[i])
    assert not s.workqueue and gw0.shutting_down and gw1.shutting_down
    assert sorted(gw0.sent + gw1.sent) == list(range(len(TESTS)))  # each test sent once
