"""One reporter protocol: its methods are named once, both bases define each of them, every reporter and wrapper
in the package derives from one of the bases, and every wrapper passes every method on."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import threading
from typing import Any

import firstlight
from firstlight.api import _Tracker
from firstlight.report.base import REPORTER_METHODS, ForwardingReporter, QuietReporter, Reporter, Reporters
from firstlight.result import RunResult
from firstlight.runner.guard import GuardedReporter, guard_reporter
from firstlight.runner.restarts import HeldReporter


class Calls(QuietReporter):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        if name in REPORTER_METHODS:
            return lambda *args: object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)


def _call_all(r: Any) -> None:
    for name in REPORTER_METHODS:
        n = len(inspect.signature(getattr(QuietReporter, name)).parameters) - 1
        getattr(r, name)(*([None] * n))


def test_the_methods_are_the_protocols_and_both_bases_define_each():
    members = {n for n, v in vars(Reporter).items() if inspect.isfunction(v) and not n.startswith("_")}
    assert set(REPORTER_METHODS) == members
    for base in (QuietReporter, ForwardingReporter):
        assert all(name in vars(base) for name in REPORTER_METHODS), base


def test_every_reporter_class_in_the_package_derives_from_a_base():
    """A class with a reporter's methods (verdict, server_line) is a QuietReporter or a ForwardingReporter, so a
    method added to the protocol reaches it (a no-op, or passed on) instead of being missing."""
    found = []
    for info in pkgutil.walk_packages(firstlight.__path__, "firstlight."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == module.__name__ \
                    and all(inspect.isfunction(getattr(cls, m, None)) for m in ("verdict", "server_line")) \
                    and cls not in (Reporter, QuietReporter, ForwardingReporter):
                found.append(cls)
                assert issubclass(cls, QuietReporter | ForwardingReporter), cls
    names = {c.__name__ for c in found}
    assert {"ConsoleReporter", "DashboardReporter", "JsonLinesReporter", "Reporters", "GuardedReporter",
            "HeldReporter", "_Tracker", "PrometheusExporter", "SystemdNotifier", "ReadinessServer"} <= names, names


def test_the_wrappers_pass_every_method_on():
    inner = Calls()
    _call_all(Reporters(inner, inner))
    assert inner.calls == [n for n in REPORTER_METHODS for _ in (0, 1)]
    inner = Calls()
    _call_all(guard_reporter(inner))
    assert inner.calls == list(REPORTER_METHODS)
    inner = Calls()
    _call_all(HeldReporter(inner))  # attempts (a unit's, a container's) hold back the verdict and summary
    assert inner.calls == [n for n in REPORTER_METHODS if n not in ("verdict", "summary", "close")]
    inner = Calls()
    tracker = _Tracker(inner, threading.Event())  # the Python API's: it also keeps the serving result
    ready = RunResult(verdict="ready", phase="ready", started_at=1.0, ended_at=2.0, engine="sim",
                      url="http://127.0.0.1:1", ready_at=2.0)
    for name in REPORTER_METHODS:
        if name == "summary":
            tracker.summary(ready)
        else:
            n = len(inspect.signature(getattr(QuietReporter, name)).parameters) - 1
            getattr(tracker, name)(*([None] * n))
    assert inner.calls == list(REPORTER_METHODS) and tracker.serving_result is ready and tracker.ready.is_set()


def test_a_guarded_reporter_whose_output_broke_is_silenced_alone():
    class Broken(QuietReporter):
        def message(self, text: str) -> None:
            raise BrokenPipeError("gone")

    good = Calls()
    fan = guard_reporter(Reporters(Broken(), good))
    fan.message("a")
    fan.message("b")
    broken = fan.reporters[0]
    assert isinstance(broken, GuardedReporter) and broken.lost == "BrokenPipeError: gone"
    assert good.calls == ["message", "message"]
