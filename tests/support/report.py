"""Helpers shared by tests/e2e/report/test_html.py, tests/e2e/report/test_history.py,
tests/unit/report/test_dashboard.py, tests/unit/report/test_html.py, tests/unit/report/test_trace.py."""

from __future__ import annotations

from firstlight.timeline import Level, LogLine, Probe, ProcessSample, ProcInfo, Started

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(2)> &amp; </pre><b>bold</b>"


# -- pieces, from hand-made timelines -----------------------------------------------------------------------

T0 = 1_800_000_000.0


def proc(t: float, read: int, cpu: float, n: int = 1) -> ProcessSample:
    procs = tuple(ProcInfo(100 + i, "srv", "running", cpu, 1 << 30, T0) for i in range(n))
    return ProcessSample(T0 + t, True, None, cpu, 1 << 30, read, 4, procs, "running")


def ready_timeline() -> list:
    return [Started(T0, 100, "http://x", "sglang", True), proc(0.5, 0, 0.1),
            LogLine(T0 + 1, "Load weight begin. avail mem=78.50 GB", "stdout", 1), proc(1.5, 50 << 20, 1.0, 3),
            LogLine(T0 + 2, "Load weight end. type=X", "stdout", 2), proc(2.5, 100 << 20, 2.0, 3),
            LogLine(T0 + 3, HOSTILE, "stdout", 3),
            Probe(T0 + 3.5, Level.HEALTH, True, "GET /health -> 200"),
            Probe(T0 + 4, Level.GENERATION, True, "ok", 200, 0.05, " Paris")]
