"""The anatomy's rules one at a time (firstlight.anatomy), each at its boundary and with its exact evidence.

test_anatomy.py tells whole starts apart (live, through the judge); this module pins each rule the bounds are made
of, so that a changed comparison, window edge or evidence field fails a named test (scripts/mutation.sh anatomy).
Times are binary fractions on top of T0 so that differences are exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from firstlight.anatomy import (
    IDLE_CPU,
    IDLE_READ_BPS,
    Signals,
    _covered,
    _log_runs,
    _mbps,
    _moved,
    _moving_s,
    anatomy,
    compare,
)
from firstlight.report.anatomy_text import human_lines
from firstlight.timeline import LogLine, ProcessSample, WeightsTotal

T0 = 1_000_000.0
GB = 1_000_000_000


def pt(dt: float, read: int = 0, cpu: float = 0.0, top: float | None = None, name: str = "",
       state: str = "S") -> tuple[float, int, float, float | None, str, str]:
    return (T0 + dt, read, cpu, top, name, state)


def one(name: str, points: list[Any], seconds: float, logs: tuple[float, ...] = (), end: float | None = None,
        **kw: Any) -> dict[str, Any]:
    """The entry of phase ``name`` from T0 to T0 + ``seconds`` (a second phase starts there), with the anatomy."""
    sig = kw.pop("sig", None) or Signals(points=points, log_times=[T0 + t for t in logs])
    phases = [{"name": name, "start": T0}, {"name": "after", "start": T0 + seconds}]
    anat = anatomy(phases, sig, T0 + (end if end is not None else seconds + 1.0), **kw)
    return {**anat["phases"][0], "anatomy": anat}


# -- a sample gap: moved, and for how long -------------------------------------------------------------------
def test_reads_or_cpu_at_their_threshold_rate_moved_and_just_under_did_not():
    assert _moved(pt(0), pt(1.0, read=IDLE_READ_BPS))
    assert not _moved(pt(0), pt(1.0, read=IDLE_READ_BPS - 1))
    assert _moved(pt(0), pt(0.5, read=IDLE_READ_BPS // 2))  # a rate, not an amount
    assert not _moved(pt(0), pt(2.0, read=IDLE_READ_BPS))
    assert _moved(pt(0), pt(1.0, cpu=IDLE_CPU))
    assert not _moved(pt(0), pt(1.0, cpu=IDLE_CPU / 2))
    assert _moved(pt(0, cpu=1.0), pt(0.5, cpu=1.03125))  # CPU as a rate: 1/32 s in 0.5 s, not in 1 s
    assert not _moved(pt(0, cpu=1.0), pt(1.0, cpu=1.03125))
    assert not _moved(pt(1.0, read=5), pt(1.0, read=GB))  # two samples at one time: no rate at all


def test_a_gap_as_long_as_the_next_one_or_up_to_one_and_a_half_times_it_counts_whole():
    a, b = pt(0), pt(0.75, read=GB)
    assert _moving_s(a, b, None) == 0.75  # nothing after it
    assert _moving_s(a, b, pt(0.75, read=GB)) == 0.75  # the next sample at the same time
    assert _moving_s(a, b, pt(1.25, read=GB + 1)) == 0.75  # 0.75 = 1.5 x the next 0.5 s gap: not backed off
    assert _moving_s(a, pt(0.75, cpu=0.5), pt(1.25, cpu=0.5)) == 0.75


def test_a_backed_off_gap_is_timed_at_the_rate_the_next_gap_saw_at_least_that_gap_at_most_its_own():
    a = pt(0)
    # 1 MB, then 4 MB in the next 0.25 s (16 MB/s): 1/16 s of reading, but at least the next gap
    assert _moving_s(a, pt(1.5, read=1 << 20), pt(1.75, read=5 << 20)) == 0.25
    # 2 MB, then 1 MB in 0.25 s (4 MB/s): half a second
    assert _moving_s(a, pt(1.5, read=2 << 20), pt(1.75, read=3 << 20)) == 0.5
    # read all along at the rate that follows: the whole gap, never more
    assert _moving_s(a, pt(1.5, read=6 << 20), pt(1.75, read=7 << 20)) == 1.5
    # CPU: 0.5 s of it, then 0.25 cores: 2 s at that rate, capped at the gap's 1.5 s; 0.125 s at 1 core: 0.25 s
    assert _moving_s(a, pt(1.5, cpu=0.5), pt(1.75, cpu=0.5625)) == 1.5
    assert _moving_s(a, pt(1.5, cpu=0.125), pt(1.75, cpu=0.375)) == 0.25
    # the longer of the two signals' times: reads 0.25 s, CPU 1 s
    assert _moving_s(a, pt(1.5, read=1 << 20, cpu=0.25), pt(1.75, read=5 << 20, cpu=0.3125)) == 1.0
    # a signal that stopped within the gap (a burst) has no rate to time it by: the next gap's length
    assert _moving_s(a, pt(1.5, read=1 << 20, cpu=0.5), pt(1.75, read=1 << 20, cpu=0.5)) == 0.25
    assert _moving_s(a, pt(1.5, read=GB), pt(1.75, read=GB, cpu=1.0)) == 0.25


def test_lines_less_than_2_s_apart_are_one_run_and_exactly_2_s_apart_two():
    assert _log_runs([]) == []
    assert _log_runs([T0]) == [(T0, T0)]
    assert _log_runs([T0, T0 + 1.5, T0 + 3.0]) == [(T0, T0 + 3.0)]
    assert _log_runs([T0, T0 + 2.0]) == [(T0, T0), (T0 + 2.0, T0 + 2.0)]
    assert _log_runs([T0, T0 + 1.0, T0 + 3.5, T0 + 4.0]) == [(T0, T0 + 1.0), (T0 + 3.5, T0 + 4.0)]


def test_covered_is_the_union_of_the_spans():
    assert _covered([]) == 0.0
    assert _covered([(1.0, 3.0), (2.0, 4.0), (0.0, 0.5), (3.5, 3.75), (5.0, 5.0)]) == 3.5
    assert _covered([(2.0, 4.0), (1.0, 3.0)]) == 3.0  # in any order


# -- one phase's window ------------------------------------------------------------------------------------------
def test_a_window_counts_from_the_last_sample_before_it_to_its_last_sample():
    points = [pt(-1.0, read=GB, cpu=10.0), pt(-0.5, read=2 * GB, cpu=11.0),
              pt(0.5, read=2 * GB + (1 << 20), cpu=11.25), pt(1.5, read=2 * GB + (3 << 20), cpu=11.75),
              pt(2.5, read=3 * GB, cpu=20.0)]
    e = one("warmup", points, 2.0)
    assert e["cpu_cores"] == 0.38  # 0.75 CPU s from -0.5 to 1.5, over the phase's 2 s
    assert e["bound"] == "reads" and e["evidence"][0]["value"] == "read 3.1 MB at 1.6 MB/s", e
    w = one("weights_loading", points, 2.0)
    assert (w["read_bytes"], w["read_rate"]) == (3 << 20, (3 << 20) / 2), w


def test_a_window_with_two_samples_is_measured_and_with_one_or_two_at_one_time_is_not():
    two = one("warmup", [pt(-0.5, cpu=1.0), pt(1.0, cpu=2.0)], 2.0)
    assert two["cpu_cores"] == 0.5 and two["bound"] == "cpu", two
    single = one("warmup", [pt(1.0, cpu=2.0)], 2.0)
    same = one("warmup", [pt(1.0, cpu=2.0), pt(1.0, cpu=2.0)], 2.0)
    for e in (single, same):
        assert e["cpu_cores"] is None and e["bound"] == "unmeasured", e
        assert e["evidence"] == [{"signal": "log", "value": "0 log lines; shorter than a sample (2.00s)",
                                  "since": T0}], e
    # two samples at the phase's start, then more: measured from the first
    three = one("warmup", [pt(0, cpu=1.0), pt(0, cpu=1.0), pt(1.0, cpu=1.5), pt(2.0, cpu=2.0)], 2.0)
    assert three["cpu_cores"] == 0.5, three
    # a first sample that has read more bytes than the clock has seconds is still a sample (bytes are not times)
    big = one("warmup", [pt(-0.5, read=5 * 10**12), pt(1.0, read=5 * 10**12, cpu=1.0)], 2.0)
    assert big["cpu_cores"] == 0.5, big


def test_a_short_window_rates_over_its_own_seconds():
    w = one("weights_loading", [pt(-0.25), pt(0.5, read=1 << 20)], 0.5)
    assert w["read_rate"] == 2 << 20 and w["read_bytes"] == 1 << 20, w


def test_a_window_that_read_nothing_and_used_no_cpu_says_zero_not_one():
    w = one("weights_loading", [pt(-0.5, read=GB, cpu=5.0), pt(1.0, read=GB, cpu=5.0)], 2.0, logs=(0.5,))
    assert (w["read_bytes"], w["read_rate"], w["cpu_cores"]) == (0, 0, 0.0), w
    assert w["bound"] == "idle", w  # one line is a moment: 2 s with nothing moving


def test_the_busiest_thread_is_the_median_tick_and_runnable_is_the_share_of_ticks_busy_and_r():
    ticks = [pt(0.25 * i, cpu=0.25 * i, top=top, name=name, state=state) for i, (top, name, state) in enumerate(
        [(0.0, "", "S"),  # the last sample before the window: not a tick of it
         (0.1, "loader", "R"), (0.9, "loader", "R"), (0.5, "main", "R"), (0.0, "idle", "R"), (0.7, "loader", "S"),
         (0.3, "main", "R"), (0.2, "loader", "R"), (0.4, "main", "R")])]
    ticks[0] = pt(-0.25, top=5.0, name="before", state="R")
    e = one("warmup", ticks, 2.0)
    # 8 ticks: tops sorted 0.0 .1 .2 .3 .4 .5 .7 .9, the median (index 4) is 0.4
    assert e["thread_top"] == 0.4, e
    # busy and runnable: loader x3 (0.1, 0.9, 0.2), main x3: 6 of 8; a runnable thread at 0.0 is not busy
    assert e["thread_runnable"] == 0.75, e
    # loader and main were each busy 3 times: the first one busy is named, whatever the hash order of names
    assert e["bound"] == "cpu" and e["evidence"][0]["value"] == \
        "1.00 cores on average; busiest thread loader runnable in 75% of samples", e
    # the name most often busy: main, once one of loader's ticks is main's
    ticks[7] = pt(1.5, cpu=1.5, top=0.2, name="main", state="R")
    assert "busiest thread main runnable in 75%" in one("warmup", ticks, 2.0)["evidence"][0]["value"]


def test_without_thread_figures_there_is_no_busiest_thread():
    e = one("warmup", [pt(-0.5), pt(1.0, cpu=1.0)], 2.0)
    assert (e["thread_top"], e["thread_runnable"]) == (None, None), e


# -- silent stretches ---------------------------------------------------------------------------------------------
def _stretches(e: dict[str, Any]) -> list[tuple[float, float]]:
    return [(x["start"] - T0, x["seconds"]) for x in e["anatomy"]["idle"]]


def test_a_silent_stretch_ends_where_reads_start_where_a_line_is_written_or_at_the_last_sample():
    still = [pt(0), pt(0.5), pt(1.0), pt(1.5), pt(2.0), pt(2.5)]
    moving = [pt(3.0, read=GB), pt(3.5, read=2 * GB)]
    # reads from 2.5: the stretch is 0 to 2.5
    assert _stretches(one("warmup", [*still, *moving], 4.0)) == [(0.0, 2.5)]
    # exactly 2 s before the reads is a stretch; 1.75 s is not
    assert _stretches(one("warmup", [pt(0), pt(0.5), pt(1.0), pt(1.5), pt(2.0), pt(2.5, read=GB)], 4.0)) == \
        [(0.0, 2.0)]
    assert _stretches(one("warmup", [pt(0.25), pt(0.5), pt(1.0), pt(1.5), pt(2.0), pt(2.5, read=GB)], 4.0)) == []
    # a line at 2.0 ends one exactly 2 s long and starts the next; a line at 1.75 ends a shorter one
    assert _stretches(one("warmup", [*still, pt(3.0), pt(3.5), pt(4.0), pt(4.5)], 5.0, logs=(2.0,))) == \
        [(0.0, 2.0), (2.0, 2.5)]
    assert _stretches(one("warmup", [*still, pt(3.0)], 5.0, logs=(1.75,))) == []
    # the last sample ends it: 0 to 2.5 with nothing after, though the phase runs to 4.0
    assert _stretches(one("warmup", still, 4.0)) == [(0.0, 2.5)]
    assert _stretches(one("warmup", still[:-1], 4.0)) == [(0.0, 2.0)]
    assert _stretches(one("warmup", [pt(0.25), *still[1:-1]], 4.0)) == []


def test_a_phase_is_idle_when_at_least_2_s_and_at_least_half_of_it_had_nothing_move():
    def bound(seconds: float, busy_until: float) -> str:
        """Two cores from the phase's start until ``busy_until``, then nothing; sampled every 0.25 s."""
        points = [pt(0.25 * k, cpu=2 * min(0.25 * k, busy_until)) for k in range(-1, 40)]
        return str(one("warmup", points, seconds)["bound"])

    assert bound(3.25, 1.25) == "idle"  # exactly 2 s still, and busy under half
    assert bound(3.0, 1.25) == "cpu"  # 1.75 s still
    assert bound(4.0, 2.0) == "cpu"  # busy exactly half: not idle
    assert bound(4.25, 2.0) == "idle"


# -- each bound's evidence ------------------------------------------------------------------------------------------
def _weights(resident: int | None = 0, fstype: str = "ext4", size: int = 4 * GB) -> WeightsTotal:
    return WeightsTotal(T0 - 1, size, 2, "/models/m", resident, fstype)


def _sig(points: list[Any], logs: tuple[float, ...] = (), weights: WeightsTotal | None = None,
         downloads: tuple[float, ...] = ()) -> Signals:
    return Signals(points=points, log_times=[T0 + t for t in logs], weights=weights,
                   downloads=[T0 + t for t in downloads])


READING = [pt(-0.5), pt(0.5, read=100_000_000, cpu=0.5, top=0.2, name="loader", state="D"),
           pt(1.5, read=200_000_000, cpu=1.0, top=0.2, name="loader", state="D")]


@pytest.mark.parametrize(("kw", "bound", "evidence"), [
    ({"sig": _sig(READING, downloads=(-1.0, 0.0, 1.0))}, "download",
     {"signal": "log", "value": "2 download progress lines"}),
    ({"sig": _sig(READING, weights=_weights(fstype="nfs4"))}, "network_fs",
     {"signal": "disk", "value": "weights on a nfs4 mount, read 100 MB/s"}),
    ({"sig": _sig(READING, weights=_weights(resident=int(3.6 * GB)))}, "page_cache",
     {"signal": "disk", "value": "90% of the weights resident in the page cache at start, read 100 MB/s"}),
    ({"sig": _sig(READING, weights=_weights(resident=int(3.6 * GB) - 1))}, "disk",
     {"signal": "disk", "value": "read 200 MB at 100 MB/s (device rate not measured: firstlight preflight --disk); "
                                 "90% resident at start"}),
    ({"sig": _sig([], logs=(0.5,))}, "unmeasured",
     {"signal": "log", "value": "no process samples (a log replay): the bound is not known"}),
    ({"sig": _sig([pt(-5.0)], logs=(0.5,), weights=_weights(resident=int(3.48 * GB)))}, "unmeasured",
     {"signal": "log", "value": "shorter than a sample (2.00s): the bound is not known; 87% of the weights resident "
                                "in the page cache at start"}),
    ({"sig": _sig(READING), "device_rate": 400e6}, "disk",
     {"signal": "disk", "value": "read 200 MB at 100 MB/s, 25% of the device's measured 400 MB/s"}),
    ({"sig": _sig([pt(-0.5), pt(0.5, cpu=0.5), pt(1.5, cpu=1.0)])}, "cpu",
     {"signal": "cpu", "value": "0.50 cores on average"}),
    ({"sig": _sig([pt(-0.5), pt(0.5), pt(1.5)], logs=(0.5, 1.5))}, "log",
     {"signal": "log", "value": "2 log lines; CPU 0.00 cores"}),
])
def test_each_weights_bound_gives_its_signal_value_and_since(kw: dict[str, Any], bound: str,
                                                              evidence: dict[str, Any]):
    e = one("weights_loading", [], 2.0, **kw)
    assert e["bound"] == bound and e["evidence"] == [{**evidence, "since": T0}], e


def test_a_cpu_bound_loader_below_half_the_device_rate_is_loader_cpu_and_at_half_it_is_disk():
    def hot(rate_mb: int, device_rate: float | None, runnable: int = 4, name: str = "loader") -> dict[str, Any]:
        points = [pt(-0.5), *(pt(0.5 * k, read=int(rate_mb * 1e6 * 0.5 * k), cpu=0.5 * k, top=0.75,
                                 name=name if k <= runnable else "x", state="R" if k <= runnable else "S")
                              for k in range(1, 6))]
        return one("weights_loading", [], 2.5, sig=_sig(points), device_rate=device_rate)

    e = hot(40, 200e6)
    assert e["bound"] == "loader_cpu", e
    assert e["evidence"] == [{"signal": "cpu", "value": "thread loader CPU-bound (runnable in 80% of samples, "
                                                        "0.75 cores on this machine) while reading 40 MB/s vs the "
                                                        "device's 200 MB/s", "since": T0}], e
    assert hot(40, None)["evidence"][0]["value"].endswith("while reading 40 MB/s"), "no device rate: no 'vs'"
    assert hot(100, 200e6)["bound"] == "disk"  # 100 MB/s is half of 200: the disk
    assert hot(99, 200e6)["bound"] == "loader_cpu"
    assert hot(40, 200e6, runnable=3)["bound"] == "disk"  # 60 % of samples runnable: not a CPU-bound thread
    assert "thread ? CPU-bound" in hot(40, None, name="")["evidence"][0]["value"]


def test_a_download_line_before_the_phase_does_not_make_it_a_download():
    e = one("weights_loading", [], 2.0, sig=_sig(READING, downloads=(-0.5,)))
    assert e["bound"] == "disk", e
    e = one("weights_loading", [], 2.0, sig=_sig(READING, downloads=(0.0,)))
    assert e["bound"] == "download" and e["evidence"][0]["value"] == "1 download progress lines", e


def test_each_other_bound_gives_its_signal_value_and_since():
    idle = one("warmup", [pt(-0.5), pt(0.5), pt(1.5), pt(2.5), pt(3.5)], 4.0, logs=(0.0,))
    assert idle["bound"] == "idle" and idle["evidence"] == [
        {"signal": "watch", "value": "no measured signal moved for 4.0s of 4.0s (CPU 0.00 cores, 0 B read, 1 lines)",
         "since": T0}], idle
    reads = one("warmup", [pt(-0.5), *(pt(0.5 * k, read=k * 100_000) for k in range(1, 9))], 4.0)
    assert reads["bound"] == "reads" and reads["evidence"] == [
        {"signal": "disk", "value": "read 0.8 MB at 0.2 MB/s", "since": T0}], reads
    # a phase reading just under 64 KiB/s is not "reads": the sleeping process's small reads
    slow = one("warmup", [pt(-0.5), *(pt(0.5 * k, read=k * 32_000, cpu=0.03 * k) for k in range(1, 9))], 4.0)
    assert slow["bound"] == "log" and slow["evidence"][0]["value"] == "0 log lines; CPU 0.06 cores", slow
    log = one("warmup", [pt(-0.5), *(pt(0.5 * k, read=k * 16_000) for k in range(1, 9))], 4.0,
              logs=(0.0, 1.0, 2.0, 3.0))
    assert log["bound"] == "log" and log["evidence"] == [
        {"signal": "log", "value": "4 log lines; CPU 0.00 cores", "since": T0}], log
    replay = one("warmup", [], 4.0, logs=(0.0, 1.0))
    assert replay["bound"] == "log" and replay["evidence"] == [
        {"signal": "log", "value": "2 log lines; no process samples", "since": T0}], replay
    assert one("warmup", [], 4.0)["bound"] == "unmeasured"


def test_cpu_at_half_a_core_or_a_hot_thread_is_cpu():
    def bound(cores: float, state: str = "S") -> str:
        points = [pt(-0.5), *(pt(0.5 * k, cpu=cores * 0.5 * k, top=0.1, name="t", state=state)
                              for k in range(1, 9))]
        return str(one("warmup", points, 4.0)["bound"])

    assert bound(0.5) == "cpu"
    assert bound(0.25) == "log"  # busy all along, under half a core, nothing read, no line
    assert bound(0.25, state="R") == "cpu"  # a thread always runnable: CPU-bound however loaded


# -- compile, cuts, totals ---------------------------------------------------------------------------------------
def test_compile_info_takes_the_lines_of_its_phase_and_the_engines_largest_total():
    sig = _sig([pt(-0.5), pt(1.0, cpu=1.0), pt(3.0, cpu=3.0)])
    sig.compile_line(T0 - 0.5, "hit", None, "before")
    for k, (state, s) in enumerate([("miss", 4.2), ("total", 5.0), ("hit", None), ("total", None), ("miss", 1.0)]):
        sig.compile_line(T0 + 0.5 * k, state, s, f"line {k}")
    sig.compile_line(T0 + 2.0, "total", 9.0, "at the end")  # at the phase's end: still its own
    sig.compile_line(T0 + 2.1, "total", 8.0, "after")
    sig.compiler_ran(1.234)
    sig.compiler_ran(1.0)
    e = one("compile", [], 2.0, sig=sig)
    assert e["compile"] == {"cache": "miss", "engine_seconds": 9.0, "lines": ["line 0", "line 1", "line 2", "line 3"],
                            "compiler_runs": 2, "compiler_cpu_s": 2.23}, e
    assert e["evidence"] == [{"signal": "log", "value": "compile cache miss; the engine says 9s; 2 compiler runs, "
                                                        "2.23 CPU s", "since": T0}], e
    hit = _sig([])
    hit.compile_line(T0 + 0.5, "hit", 0.4, "hit")
    hit.compile_line(T0 + 1.0, "total", None, "total")
    h = one("compile", [], 2.0, sig=hit)
    assert h["compile"]["cache"] == "hit" and h["compile"]["engine_seconds"] is None, h
    assert h["evidence"][0]["value"] == "compile cache hit; 0 compiler runs, 0 CPU s", h
    assert one("compile", [], 2.0, sig=_sig([]))["compile"]["cache"] is None
    vllm = _sig([])  # vLLM 0.32: torch.compile's total, then the profiling run's own figure
    vllm.compile_line(T0 + 0.5, "total", 66.71, "torch.compile takes 66.71 s in total")
    vllm.compile_line(T0 + 1.5, "total", 0.83, "Initial profiling/warmup run took 0.83 s")
    assert one("compile", [], 2.0, sig=vllm)["compile"]["engine_seconds"] == 66.71


def test_signals_keep_only_alive_samples_and_final_lines_within_their_bounds():
    sig = Signals()
    sig.feed(ProcessSample(T0, alive=True, cpu_seconds=1.0, read_bytes=2, thread_top=0.5, thread_top_name="a",
                           thread_top_state="R"))
    sig.feed(ProcessSample(T0 + 1, alive=False, exit_code=1))
    sig.feed(LogLine(T0 + 2, "x"))
    assert sig.points == [(T0, 2, 1.0, 0.5, "a", "R")] and sig.log_times == [T0 + 2]
    for _ in range(70):
        sig.compile_line(T0, "miss", None, "y" * 300)
    assert len(sig.compile_lines) == 64 and len(sig.compile_lines[0][3]) == 200


def test_signals_stop_at_their_point_limit(monkeypatch: pytest.MonkeyPatch):
    import firstlight.anatomy as anatomy_module

    monkeypatch.setattr(anatomy_module, "MAX_POINTS", 2)
    sig = Signals()
    for k in range(3):
        sig.feed(ProcessSample(T0 + k, alive=True, cpu_seconds=0.0, read_bytes=0))
        sig.feed(LogLine(T0 + k, "x"))
    assert len(sig.points) == 2 and len(sig.log_times) == 2


def test_mbps_keeps_a_decimal_below_9_95_mb_s():
    assert (_mbps(None), _mbps(330_000), _mbps(9_949_999), _mbps(9_950_000), _mbps(49_400_000)) == \
        ("?", "0.3 MB/s", "9.9 MB/s", "10 MB/s", "49 MB/s")
    assert _mbps(1_000_000) == "1.0 MB/s" and _mbps(100_000_000) == "100 MB/s"


# -- the whole anatomy: totals, cache states, cuts -------------------------------------------------------------
def _start_of_3_phases(resident: int | None = 1 * GB, fstype: str = "ext4", rate: int = 500_000_000,
                       state: str = "D") -> tuple[list[dict[str, Any]], Signals]:
    """3 s of nothing (process_start), 4 s of weights (2 GB), 2 s of compile at one core, then ready."""
    # sample k at 0.5 k - 0.5 s: reading at ``rate`` from 3 s (k = 7) until 2 GB, one core from 7 s to 9 s
    points = [pt(0.5 * k - 0.5, read=min(rate * max(k - 7, 0) // 2, 2 * GB), cpu=max(0.0, min(0.5 * k - 7.5, 2.0)),
                 top=0.5 if 8 <= k <= 15 else None, name="loader", state=state) for k in range(21)]
    sig = Signals(points=points, log_times=[T0, T0 + 3.0, T0 + 7.0, T0 + 9.0],
                  weights=WeightsTotal(T0, 3 * GB, 2, "/m", resident, fstype))
    sig.compile_line(T0 + 7.5, "miss", None, "Compiling a graph")
    sig.compile_line(T0 + 8.5, "total", 1.5, "torch.compile takes 1.5 s in total")
    phases = [{"name": "process_start", "start": T0}, {"name": "weights_loading", "start": T0 + 3.0},
              {"name": "compile", "start": T0 + 7.0}, {"name": "ready", "start": T0 + 9.0}]
    return phases, sig


def test_the_anatomy_of_a_whole_start_with_its_totals_cache_states_and_cuts():
    phases, sig = _start_of_3_phases()
    a = anatomy(phases, sig, T0 + 9.5, first_generation_s=0.25, device_rate=1e9, cache_rate=4e9)
    assert [(p["name"], p["seconds"], p["bound"]) for p in a["phases"]] == [
        ("process_start", 3.0, "idle"), ("weights_loading", 4.0, "disk"), ("compile", 2.0, "compile")]
    w = a["phases"][1]
    assert (w["read_bytes"], w["read_rate"], w["cpu_cores"], w["thread_top"], w["thread_runnable"]) == \
        (2 * GB, 5e8, 0.0, 0.5, 0.0), w
    assert w["evidence"][0]["value"] == \
        "read 2000 MB at 500 MB/s, 50% of the device's measured 1000 MB/s; 33% resident at start"
    assert a["phases"][2]["cpu_cores"] == 1.0
    assert {k: a[k] for k in ("total_s", "reached", "measured", "idle", "idle_s", "first_generation_s")} == {
        "total_s": 9.5, "reached": "ready", "measured": True,
        "idle": [{"phase": "process_start", "start": T0, "seconds": 3.0}], "idle_s": 3.0, "first_generation_s": 0.25}
    assert a["cache"] == {"page_cache_resident": 0.333, "weights_bytes": 3 * GB, "fstype": "ext4",
                          "compile_cache": "miss", "compile_key": None, "device_rate": 1e9,
                          "weights_read_rate": 5e8}
    # 2 GB not resident: 4 s from the disk at 500 MB/s against 0.5 s from the page cache at 4 GB/s
    assert a["cuts"] == [
        {"cut": "warm_page_cache", "saving_s": 3.5,
         "how": "pre-warm the weights into the page cache (vmtouch -t /m or cat them to /dev/null) or keep them "
                "resident: 2000 MB read at 500 MB/s",
         "from": "this start's read rate and the page cache's 4000 MB/s"},
        {"cut": "compile_cache", "saving_s": None,
         "how": "keep the engine's compile cache on a persistent volume (vLLM: VLLM_CACHE_ROOT, "
                "~/.cache/vllm/torch_compile_cache); the saving is known once a warm start is in the history",
         "from": "the engine's compile lines"}]
    assert human_lines(a) == [
        "anatomy: 9.5s",
        "  process_start         3.0s  idle        no measured signal moved for 3.0s of 3.0s (CPU 0.00 cores, "
        "0 B read, 1 lines)",
        "  weights_loading       4.0s  disk        read 2000 MB at 500 MB/s, 50% of the device's measured 1000 MB/s; "
        "33% resident at start",
        "  compile               2.0s  compile     compile cache miss; the engine says 1.5s; 0 compiler runs, 0 CPU s",
        "  idle: 3.0s with no measured signal moving",
        "  cut: warm_page_cache would save ~3.5s: pre-warm the weights into the page cache (vmtouch -t /m or cat "
        "them to /dev/null) or keep them resident: 2000 MB read at 500 MB/s",
        "  cut: compile_cache saving unknown: keep the engine's compile cache on a persistent volume (vLLM: "
        "VLLM_CACHE_ROOT, ~/.cache/vllm/torch_compile_cache); the saving is known once a warm start is in the "
        "history"]


def test_a_warm_page_cache_saves_only_the_disk_time_and_without_a_cache_rate_all_of_it():
    phases, sig = _start_of_3_phases(resident=None)
    a = anatomy(phases, sig, T0 + 9.5)
    cut = a["cuts"][0]
    # resident not known: all 3 GB counted, 6 s at 500 MB/s, but no more than the phase's 4 s
    assert cut["saving_s"] == 4.0 and cut["from"] == "this start's read rate", cut
    assert "3000 MB read at 500 MB/s" in cut["how"] and a["cache"]["page_cache_resident"] is None
    phases, sig = _start_of_3_phases(resident=3 * GB)  # all resident: page_cache, nothing to cut
    assert [c["cut"] for c in anatomy(phases, sig, T0 + 9.5)["cuts"]] == ["compile_cache"]
    phases, sig = _start_of_3_phases(resident=1 * GB)
    sig.weights = WeightsTotal(T0, 0, 0, "/m", 0, "ext4")  # no weight bytes known: no saving to compute
    assert [c["cut"] for c in anatomy(phases, sig, T0 + 9.5)["cuts"]] == ["compile_cache"]


def test_a_slow_loader_or_mount_is_cut_to_the_devices_rate_with_its_own_remedy():
    phases, sig = _start_of_3_phases(rate=100_000_000, state="R", resident=0)
    a = anatomy(phases, sig, T0 + 9.5, device_rate=1e9)
    assert a["phases"][1]["bound"] == "loader_cpu"
    # 400 MB in 4 s at 100 MB/s; the 3 GB at the device's 1000 MB/s take 3 s: 1 s saved
    assert a["cuts"][0] == {"cut": "device_rate", "saving_s": 1.0,
                            "how": "a faster loader (more loader threads, fastsafetensors): read at the device's "
                                   "1000 MB/s instead of 100 MB/s", "from": "preflight --disk"}
    phases, sig = _start_of_3_phases(rate=100_000_000, fstype="nfs4", resident=0)
    nfs = anatomy(phases, sig, T0 + 9.5, device_rate=1e9)
    assert [c["cut"] for c in nfs["cuts"]] == ["warm_page_cache", "device_rate", "compile_cache"]
    assert nfs["cuts"][1]["how"].startswith("--safetensors-load-strategy eager (or copy the weights to local disk)")
    phases, sig = _start_of_3_phases(rate=500_000_000, state="R", resident=0)  # half the device's rate: the disk
    assert [c["cut"] for c in anatomy(phases, sig, T0 + 9.5, device_rate=1e9)["cuts"]] == \
        ["warm_page_cache", "compile_cache"]
    phases, sig = _start_of_3_phases(rate=100_000_000, state="R", resident=0)
    assert [c["cut"] for c in anatomy(phases, sig, T0 + 9.5)["cuts"]] == ["compile_cache"]  # no device rate


def test_lines_before_the_first_timestamp_start_where_the_clock_does_and_a_phase_may_say_its_end():
    sig = Signals(points=[pt(0.5 * k, cpu=0.5 * k) for k in range(9)])
    phases = [{"name": "process_start", "start": 5.0},  # a replayed line without a clock of its own
              {"name": "warmup", "start": T0 + 1.0, "end": T0 + 2.0}, {"name": "ready", "start": T0 + 3.0}]
    a = anatomy(phases, sig, T0 + 4.0, reached="warmup")
    assert [(p["name"], p["start"], p["seconds"]) for p in a["phases"]] == [
        ("process_start", T0 + 1.0, 0.0), ("warmup", T0 + 1.0, 1.0)]
    assert (a["total_s"], a["reached"], a["measured"]) == (3.0, "warmup", True)
    assert anatomy([], Signals(), T0)["total_s"] == 0.0
    assert anatomy([], Signals(), T0)["reached"] is None and anatomy([], Signals(), T0)["measured"] is False


# -- against the baseline, and the human block ------------------------------------------------------------------
def _ph(name: str, seconds: float, **kw: Any) -> dict[str, Any]:
    return {"name": name, "seconds": seconds, **kw}


def test_compare_lists_every_shared_phase_largest_difference_first_with_the_cache_states():
    cur = {"total_s": 30.0, "cache": {"page_cache_resident": 0.0},
           "phases": [_ph("process_start", 1.0), _ph("weights_loading", 20.0, read_rate=2e8),
                      _ph("compile", 6.0, compile={"cache": "miss"}), _ph("warmup", 3.05), _ph("new", 1.0)]}
    base = {"total_s": 12.0, "cache": {"page_cache_resident": 1.0},
            "phases": [_ph("process_start", 1.0), _ph("weights_loading", 4.0, read_rate=1e9),
                       _ph("compile", 1.0, compile={"cache": "hit"}), _ph("warmup", 3.0)]}
    vs = compare(cur, base, 7)
    assert vs == {"run": 7, "delta_s": 18.0, "message": "slower by 18.0s: weights_loading +16.0s (read 200 MB/s vs "
                                                        "1000 MB/s; 0% of the weights resident at start vs 100%), "
                                                        "compile +5.0s (compile cache miss vs hit)",
                  "phases": [
                      {"phase": "weights_loading", "delta_s": 16.0, "seconds": 20.0, "baseline_s": 4.0,
                       "why": "read 200 MB/s vs 1000 MB/s; 0% of the weights resident at start vs 100%"},
                      {"phase": "compile", "delta_s": 5.0, "seconds": 6.0, "baseline_s": 1.0,
                       "why": "compile cache miss vs hit"},
                      {"phase": "warmup", "delta_s": 0.05, "seconds": 3.05, "baseline_s": 3.0, "why": ""},
                      {"phase": "process_start", "delta_s": 0.0, "seconds": 1.0, "baseline_s": 1.0, "why": ""}]}
    faster = compare(base, cur)
    assert faster is not None and faster["run"] is None and faster["delta_s"] == -18.0
    assert faster["message"].startswith("faster by 18.0s: weights_loading -16.0s (read 1000 MB/s vs 200 MB/s; "
                                        "100% of the weights resident at start vs 0%), compile -5.0s")


def test_compare_names_at_most_three_phases_of_a_tenth_of_a_second_or_more():
    cur = {"total_s": 10.0, "phases": [_ph(n, s) for n, s in (("a", 5.0), ("b", 4.0), ("c", 3.0), ("d", 2.0),
                                                               ("e", 1.1))]}
    base = {"total_s": 10.0, "phases": [_ph(n, 1.0) for n in "abcde"]}
    vs = compare(cur, base)
    assert vs is not None and vs["message"] == "slower by 0.0s: a +4.0s, b +3.0s, c +2.0s", vs
    assert compare({"total_s": 5.0, "phases": [_ph("a", 1.05)]}, {"total_s": 5.0, "phases": [_ph("a", 1.0)]}) \
        == {"run": None, "delta_s": 0.0, "message": "slower by 0.0s",
            "phases": [{"phase": "a", "delta_s": 0.05, "seconds": 1.05, "baseline_s": 1.0, "why": ""}]}
    w = compare({"total_s": 5.0, "phases": [_ph("weights_loading", 2.0)]},
                {"total_s": 4.0, "cache": {"page_cache_resident": 0.5}, "phases": [_ph("weights_loading", 1.0)]})
    assert w is not None and w["phases"][0]["why"] == "read ? vs ?", w  # resident known on one side only
    assert compare({}, base) is None and compare(cur, {}) is None and compare(cur, {"phases": []}) is None


def test_the_human_block_of_a_start_that_did_not_get_ready_says_how_far_it_got():
    anat = {"total_s": 12.34, "reached": "weights_loading", "idle_s": 0,
            "phases": [{"name": "weights_loading", "seconds": 12.34, "bound": "disk", "evidence": []}],
            "vs_baseline": {"run": None, "message": "slower by 1.0s"}}
    assert human_lines(anat, verdict="hung") == [
        "anatomy (reached weights_loading; how far each phase got): 12.3s",
        "  weights_loading      12.3s  disk        ",
        "  vs baseline: slower by 1.0s"]
    anat["vs_baseline"] = {"run": 3, "message": "faster by 2.0s"}
    assert human_lines(anat)[-1] == "  vs baseline run 3: faster by 2.0s"
    assert human_lines({}) == [] and human_lines({"phases": []}) == []


# -- edges the tests above leave open (scripts/mutation.sh anatomy: each of these was a surviving mutant) ----------
def test_a_sample_right_at_the_phases_start_is_where_its_window_counts_from():
    points = [pt(-0.5), pt(0, read=GB, cpu=4.0), pt(1.0, read=GB + (1 << 20), cpu=4.5), pt(2.0, read=GB + (2 << 20),
                                                                                         cpu=5.0)]
    w = one("weights_loading", points, 2.0)
    # from the sample at 0, not from the one before: the gigabyte and 4 CPU s read before the phase are not its own
    assert (w["read_bytes"], w["cpu_cores"]) == (2 << 20, 0.5), w


def test_the_next_sample_that_times_a_gap_is_the_next_one_in_the_window_or_the_first_after_it():
    # a backed-off gap (1.75 to 3.75, 1 MB) followed inside the window by a quick one (16 MB/s): 0.25 s of reading
    inner = [pt(-0.25), pt(0.25), pt(0.75), pt(1.75), pt(3.75, read=1 << 20), pt(4.0, read=5 << 20)]
    e = one("warmup", inner, 4.0, end=4.0)
    assert e["bound"] == "idle" and e["evidence"][0]["value"].startswith("no measured signal moved for 3.5s of 4.0s")
    # the gap ends right at the phase's end: the first sample after it times it
    edge = [pt(-0.25), pt(0.25), pt(0.75), pt(2.0), pt(4.0, read=1 << 20), pt(4.25, read=5 << 20)]
    e = one("warmup", edge, 4.0)
    assert e["bound"] == "idle" and e["evidence"][0]["value"].startswith("no measured signal moved for 3.8s of 4.0s")


def test_a_gap_is_timed_by_what_moved_in_it_not_by_the_counters_totals():
    # the same 1 MB and 1/8 CPU s as before, on counters that already stood at 1 GB and 10 CPU s
    assert _moving_s(pt(0, read=GB), pt(1.5, read=GB + (1 << 20)), pt(1.75, read=GB + (5 << 20))) == 0.25
    assert _moving_s(pt(0, cpu=10.0), pt(1.5, cpu=10.125), pt(1.75, cpu=10.375)) == 0.25


def test_one_byte_read_by_the_weights_phase_is_a_read_and_a_replay_reads_zero():
    e = one("weights_loading", [pt(-0.5), pt(1.0, read=1), pt(2.0, read=1)], 2.0, logs=(0.5, 1.0, 1.5))
    assert e["bound"] == "disk" and e["read_bytes"] == 1, e
    replay = one("weights_loading", [], 2.0, logs=(0.5,))
    assert (replay["read_bytes"], replay["read_rate"], replay["cpu_cores"]) == (0, None, None), replay


def test_megabytes_are_a_million_bytes_rounded_at_the_half():
    assert (_mbps(1_050_000), _mbps(20_500_001)) == ("1.1 MB/s", "21 MB/s")
    disk = one("weights_loading", [pt(-0.5), pt(1.5, read=20_500_001)], 2.0, logs=(0.5, 1.0))
    assert disk["evidence"][0]["value"].startswith("read 21 MB at 10 MB/s"), disk
    reads = one("warmup", [pt(-0.5), pt(1.5, read=1_050_000)], 2.0, logs=(0.5, 1.0))
    assert reads["evidence"][0]["value"] == "read 1.1 MB at 0.5 MB/s", reads


def test_a_thread_runnable_in_exactly_80_percent_of_samples_is_cpu_however_few_cores_and_64_kib_s_is_reads():
    points = [pt(-0.5), *(pt(0.5 * k, cpu=0.05 * k, top=0.1, name="t", state="R" if k != 3 else "S")
                          for k in range(1, 6))]
    e = one("warmup", points, 2.5)
    assert e["thread_runnable"] == 0.8 and e["bound"] == "cpu", e
    reads = one("warmup", [pt(0), pt(1.0, read=IDLE_READ_BPS), pt(2.0, read=2 * IDLE_READ_BPS)], 2.0)
    assert reads["bound"] == "reads", reads


def test_the_engines_total_is_its_last_total_with_a_figure():
    sig = _sig([])
    sig.compile_line(T0 + 0.25, "total", 5.0, "total 5")
    sig.compile_line(T0 + 0.5, "total", None, "total, no figure")
    sig.compile_line(T0 + 0.75, "miss", 4.0, "a graph took 4 s")
    sig.compile_line(T0 + 2.0 + 1e-6, "miss", None, "within a microsecond of the end")
    e = one("compile", [], 2.0, sig=sig)
    assert e["compile"]["engine_seconds"] == 5.0 and len(e["compile"]["lines"]) == 4, e
    none = one("compile", [], 2.0, sig=_sig([]))
    assert none["evidence"][0]["value"] == "compile cache not reported; 0 compiler runs, 0 CPU s", none


def test_figures_are_rounded_to_their_stated_places():
    points = [pt(-0.5), *(pt(0.4 * k, read=int(1234.5678 * 0.4 * k), top=0.123, name="t",
                             state="R" if k == 3 else "S") for k in range(1, 5))]
    sig = Signals(points=points, weights=WeightsTotal(T0, 3 * GB, 2, "/m", 0, "ext4"))
    phases = [{"name": "weights_loading", "start": T0}, {"name": "after", "start": T0 + 1.23456}]
    a = anatomy(phases, sig, T0 + 2.34567, device_rate=1e9 + 0.6)
    w = a["phases"][0]
    assert (w["seconds"], w["thread_top"], w["thread_runnable"]) == (1.235, 0.12, 0.33), w
    assert w["read_rate"] == round(w["read_bytes"] / 1.23456) and w["read_rate"] % 1 == 0, w
    assert a["total_s"] == 2.346 and a["cache"]["device_rate"] == 1000000001.0
    assert a["cache"]["weights_read_rate"] == w["read_rate"]
    still = anatomy([{"name": "warmup", "start": T0}], Signals(points=[pt(0), pt(2.12345)]), T0 + 3.0)
    assert still["idle"] == [{"phase": "warmup", "start": T0, "seconds": 2.123}] and still["idle_s"] == 2.123


def test_a_start_without_weights_or_compile_has_no_cache_states_and_phases_after_ready_still_count():
    phases = [{"name": "warmup", "start": T0}, {"name": "ready", "start": T0 + 1.0},
              {"name": "serving", "start": T0 + 2.0}]
    a = anatomy(phases, Signals(points=[pt(0.5 * k) for k in range(8)]), T0 + 3.0)
    assert [p["name"] for p in a["phases"]] == ["warmup", "serving"]
    assert a["cache"] == {"page_cache_resident": None, "weights_bytes": None, "fstype": None, "compile_cache": None,
                          "compile_key": None,
                          "device_rate": None, "weights_read_rate": None}


def test_phases_without_any_clock_start_where_they_say_and_1000_s_is_no_clock():
    a = anatomy([{"name": "process_start", "start": 0.0}, {"name": "warmup", "start": 2.0}], Signals(), 5.0)
    assert [(p["start"], p["seconds"]) for p in a["phases"]] == [(0.0, 2.0), (2.0, 3.0)] and a["total_s"] == 5.0
    b = anatomy([{"name": "process_start", "start": 1000.0}, {"name": "warmup", "start": 1005.0}], Signals(), 1010.0)
    assert [(p["start"], p["seconds"]) for p in b["phases"]] == [(1005.0, 0.0), (1005.0, 5.0)]


def test_cuts_at_their_edges():
    def cuts(rate: int, resident: int, fstype: str = "ext4", size: int = 3 * GB, cache_rate: float | None = 4e9,
             device_rate: float | None = None) -> list[dict[str, Any]]:
        phases, sig = _start_of_3_phases(rate=rate, resident=resident, fstype=fstype)
        sig.weights = WeightsTotal(T0, size, 2, "/m", resident, fstype)
        return [c for c in anatomy(phases, sig, T0 + 9.5, cache_rate=cache_rate, device_rate=device_rate)["cuts"]
                if c["cut"] != "compile_cache"]

    # 1 GB not resident at 500 MB/s: 2 s of the phase's 4 from the disk, 0.25 s from the page cache
    assert cuts(500_000_000, 2 * GB)[0]["saving_s"] == 1.75
    # 200 MB of 1 GB at 500 MB/s: 0.4 s from the disk, 0.05 s from memory: under a second is still what it is
    assert cuts(500_000_000, 800_000_000, size=GB)[0]["saving_s"] == 0.35
    assert cuts(500_000_000, 800_000_000, size=GB, cache_rate=3e9)[0]["saving_s"] == 0.33
    assert "keep them resident: 2 MB read at 500 MB/s" in cuts(500_000_000, 0, size=1_500_000)[0]["how"]
    # all of it resident on a network mount: nothing to warm, and the mount is no slower than half the device
    assert cuts(500_000_000, 3 * GB, fstype="nfs4") == []
    assert cuts(500_000_000, 3 * GB - 1, fstype="nfs4")[0]["cut"] == "warm_page_cache"
    assert [c["cut"] for c in cuts(500_000_000, 0, fstype="nfs4", device_rate=1e9)] == ["warm_page_cache"]
    # a mount just under half the device's 1000 MB/s: the 3 GB take 3 s at the device's rate, the phase took 4 s
    slow = cuts(499_000_000, 0, fstype="nfs4", device_rate=1e9)
    assert slow[1] == {"cut": "device_rate", "saving_s": 1.0, "how": "--safetensors-load-strategy eager (or copy the "
                       "weights to local disk): read at the device's 1000 MB/s instead of 499 MB/s",
                       "from": "preflight --disk"}, slow
    # a device at 600 MB/s takes 5 s for the 3 GB: more than the phase's 4 s saves nothing, never a negative
    assert cuts(299_000_000, 0, fstype="nfs4", device_rate=6e8)[1]["saving_s"] == 0.0
    assert cuts(299_000_000, 0, fstype="nfs4", device_rate=3e9 / 3.4567)[1]["saving_s"] == 0.54  # 4 - 3.4567


def test_compare_tolerates_missing_totals_caches_and_compile_details_and_skips_phases_the_baseline_lacks():
    cur = {"phases": [_ph("new", 9.0), _ph("weights_loading", 2.0), _ph("compile", 1.23456)]}
    base = {"total_s": 2.0, "phases": [_ph("weights_loading", 1.0), _ph("compile", 1.0)]}
    vs = compare(cur, base)
    assert vs is not None and vs["delta_s"] == -2.0 and vs["message"].startswith("faster by 2.0s: weights_loading "
                                                                                  "+1.0s (read ? vs ?), compile +0.2s "
                                                                                  "(compile cache None vs None)"), vs
    assert [x["phase"] for x in vs["phases"]] == ["weights_loading", "compile"]
    assert vs["phases"][1]["delta_s"] == 0.235
    back = compare({"total_s": 3.12345, "phases": [_ph("a", 1.1)]}, {"phases": [_ph("a", 1.0)]})
    assert back is not None and back["delta_s"] == 3.123 and back["message"] == "slower by 3.1s: a +0.1s", back
    half = compare({"total_s": 1.5, "phases": [_ph("a", 1.5)]}, {"total_s": 1.0, "phases": [_ph("a", 1.0)]})
    assert half is not None and half["message"] == "slower by 0.5s: a +0.5s"
    assert compare({"total_s": 1.0}, base) == {"run": None, "delta_s": -1.0, "phases": [], "message": "faster by 1.0s"}
    # this start's cache state known, the baseline's not recorded: no comparison of it, no error
    known = compare({"total_s": 3.0, "cache": {"page_cache_resident": 1.0}, "phases": [_ph("weights_loading", 2.0)]},
                    base)
    assert known is not None and known["phases"][0]["why"] == "read ? vs ?", known
