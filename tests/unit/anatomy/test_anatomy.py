"""The anatomy of a start (firstlight.anatomy): each phase's time and bound, with its numbers.

Pure cases feed a Judge the observations a start would produce (the same path as live and replay); the live cases
run `firstlight up` against the simulated server with injected phase durations and a reader throttled to a known
rate (a fixture: the real engines' cases are in test_anatomy_llama.py and test_vllm_server.py).

The in-process tests of this subject; the others: ``tests/e2e/anatomy/test_anatomy.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from firstlight.anatomy import anatomy, compare
from firstlight.config import JudgeConfig
from firstlight.engines import get_profile
from firstlight.judge import Judge
from firstlight.report.anatomy_text import human_lines
from firstlight.report.html import render_html
from firstlight.report.series import build_view
from firstlight.result import RunFacts, RunResult
from firstlight.timeline import LogLine, ProcessSample, Started, WeightsTotal
from tests.support.anatomy import (
    _phase,
    weights,  # noqa: F401 (a fixture)
)

T0 = 1_000_000.0


GB = 1_000_000_000


VLLM = "INFO 12-01 10:00:00 [x.py:1] "


def _start(resident: int | None = 0, fstype: str = "ext4", weights: int = 4 * GB) -> tuple[Judge, float]:  # noqa: F811
    j = Judge(JudgeConfig(), get_profile("vllm"), T0)
    j.feed(Started(T0, pid=1, launched=True))
    j.feed(WeightsTotal(T0 + 0.1, weights, 2, "/models/m", resident, fstype))
    j.feed(LogLine(T0 + 0.2, VLLM + "vLLM API server version 0.11.0"))
    return j, T0 + 0.2


def _samples(j: Judge, t0: float, t1: float, read0: int, cpu0: float, read_rate: float, cores: float,
             thread: tuple[float, str] = (0.0, "S"), step: float = 0.5) -> tuple[int, float]:
    t, read, cpu = t0, read0, cpu0
    while t < t1 - 1e-9:
        t = min(t + step, t1)
        read, cpu = read0 + int(read_rate * (t - t0)), cpu0 + cores * (t - t0)
        j.feed(ProcessSample(t, alive=True, cpu_seconds=cpu, read_bytes=read, thread_top=thread[0],
                             thread_top_name="python/loader", thread_top_state=thread[1]))
    return read, cpu


def _weights_start(read_rate: float, thread: tuple[float, str], resident: int | None = 0,
                   fstype: str = "ext4", disk: dict[str, Any] | None = None) -> dict[str, Any]:
    """3 s silent, 20 s of weights at ``read_rate``, 5 s of compile (a miss), ready."""
    j, t = _start(resident, fstype)
    j.feed(ProcessSample(t, alive=True, cpu_seconds=0.0, read_bytes=0, thread_top=0.0))
    read, cpu = _samples(j, t, t + 3.0, 0, 0.0, 0.0, 0.0)
    t += 3.0
    j.feed(LogLine(t, VLLM + "Starting to load model /models/m..."))
    read, cpu = _samples(j, t, t + 20.0, read, cpu, read_rate, 1.0, thread)
    t += 20.0
    j.feed(LogLine(t, VLLM + "Loading weights took 20.00 seconds"))
    j.feed(LogLine(t + 0.1, VLLM + "Compiling a graph for dynamic shape takes 4.20 s"))
    _samples(j, t, t + 5.0, read, cpu, 0.0, 1.0, (1.0, "R"))
    j.feed(LogLine(t + 5.0, VLLM + "torch.compile takes 4.90 s in total"))
    j.feed(LogLine(t + 5.1, VLLM + "Available KV cache memory: 1.00 GiB"))
    a = j.assess(t + 6.0)
    facts = RunFacts(started_at=T0, engine="vllm", url="http://x", disk=disk)
    result = RunResult.from_judge(j, a, facts)
    assert result.anatomy is not None
    return result.anatomy


def test_weights_read_near_the_device_rate_are_disk_bound_with_the_numbers():
    anat = _weights_start(180e6, (0.3, "D"), disk={"rate": 200e6, "cache_rate": 4e9})
    w = _phase(anat, "weights_loading")
    assert w["bound"] == "disk" and w["seconds"] == pytest.approx(20.0)
    assert "180 MB/s" in w["evidence"][0]["value"] and "90% of the device's measured 200 MB/s" in \
        w["evidence"][0]["value"]
    cut = next(c for c in anat["cuts"] if c["cut"] == "warm_page_cache")
    # 3.6 GB at 180 MB/s = 20 s from disk, 0.9 s from the page cache at 4 GB/s
    assert cut["saving_s"] == pytest.approx(20.0 - 3.6e9 / 4e9, abs=0.2)


def test_reads_below_the_device_rate_with_a_cpu_bound_thread_are_loader_cpu():
    anat = _weights_start(40e6, (0.2, "R"), disk={"rate": 2e9})
    w = _phase(anat, "weights_loading")
    assert w["bound"] == "loader_cpu", w
    assert "python/loader CPU-bound" in w["evidence"][0]["value"]
    assert any(c["cut"] == "device_rate" and c["saving_s"] > 15 for c in anat["cuts"])


def test_the_same_slow_reads_without_a_busy_thread_are_not_loader_cpu():
    anat = _weights_start(40e6, (0.2, "S"), disk={"rate": 2e9})
    assert _phase(anat, "weights_loading")["bound"] == "disk"


def test_weights_resident_at_start_are_page_cache_and_network_mounts_are_named():
    warm = _weights_start(2e9, (0.0, "S"), resident=4 * GB)
    assert _phase(warm, "weights_loading")["bound"] == "page_cache"
    assert warm["cache"]["page_cache_resident"] == 1.0
    assert not any(c["cut"] == "warm_page_cache" for c in warm["cuts"])
    nfs = _weights_start(100e6, (0.0, "S"), fstype="nfs4")
    assert _phase(nfs, "weights_loading")["bound"] == "network_fs"


def test_a_stretch_where_nothing_moved_is_idle_and_compile_misses_are_the_engines_word():
    anat = _weights_start(180e6, (0.0, "S"))
    d = _phase(anat, "process_start")
    assert d["bound"] == "idle" and anat["idle_s"] >= 2.4  # from the first sample after its line
    c = _phase(anat, "compile")
    assert c["bound"] == "compile" and c["compile"]["cache"] == "miss" and c["compile"]["engine_seconds"] == 4.9
    assert anat["cache"]["compile_cache"] == "miss"
    assert any(x["cut"] == "compile_cache" for x in anat["cuts"])


def test_a_line_in_a_backed_off_sample_gap_does_not_make_an_idle_phase_busy():
    """The CI shape: the startup's reads land just inside the phase, the sampler backs off while nothing moves
    (0.2, 0.4, 0.8, 1.6 s), and a line written just before the phase ends falls in the last 1.6 s gap. The line is
    a moment: it ends the silent stretch where it was written, but the phase stays idle, not ``reads``."""
    j, t = _start()
    j.feed(ProcessSample(t - 0.1, alive=True, cpu_seconds=0.0, read_bytes=0, thread_top=0.0))
    for dt, read in ((0.02, 2_600_000), (0.22, 2_600_000), (0.62, 2_600_000), (1.42, 2_600_000)):
        j.feed(ProcessSample(t + dt, alive=True, cpu_seconds=0.01, read_bytes=read, thread_top=0.0))
    j.feed(LogLine(t + 2.90, VLLM + "Using the nccl backend"))
    j.feed(ProcessSample(t + 2.95, alive=True, cpu_seconds=0.01, read_bytes=2_600_000, thread_top=0.0))
    j.feed(LogLine(t + 3.0, VLLM + "Starting to load model /models/m..."))
    anat = anatomy(j.phases.dicts(), j.signals, t + 3.5)
    d = _phase(anat, "process_start")
    assert d["bound"] == "idle", d
    assert "no measured signal moved for 3.1s of 3.2s" in d["evidence"][0]["value"], d
    assert [(round(x["start"] - t, 2), x["seconds"]) for x in anat["idle"]] == [(0.02, pytest.approx(2.88))]


def _backed_off_then(reads_in_gap: int, read_rate_after: float) -> dict[str, Any]:
    """A still 3 s phase sampled as the sampler backs off (0.2, 0.4, 0.8, then a 1.6 s gap ending just before the
    next phase's line), then the base rate again (0.2 s) while the process reads at ``read_rate_after``."""
    from firstlight.anatomy import Signals

    ts = [T0 - 0.1, T0 + 0.2, T0 + 0.6, T0 + 1.4, T0 + 2.998, T0 + 3.198, T0 + 3.398]
    reads = [0, 0, 0, 0, reads_in_gap, reads_in_gap + int(0.2 * read_rate_after),
             reads_in_gap + int(0.4 * read_rate_after)]
    sig = Signals(points=[(t, r, 0.01, None, "", "S") for t, r in zip(ts, reads, strict=True)], log_times=[T0])
    phases = [{"name": "distributed_init", "start": T0}, {"name": "weights_loading", "start": T0 + 3.004}]
    return _phase(anatomy(phases, sig, T0 + 3.4), "distributed_init")


def test_a_backed_off_gap_holding_the_next_phases_first_reads_leaves_the_phase_idle():
    """The CI shape: the next phase's line is read 6 ms after the sample that already holds its first 1 MB. The
    gap is timed at the rate that follows (47 MB/s: 0.02 s, at least the next gap's 0.2 s), not counted whole."""
    d = _backed_off_then(1_050_000, 47e6)
    assert d["bound"] == "idle", d
    assert "no measured signal moved for 2.8s of 3.0s" in d["evidence"][0]["value"], d


def test_a_start_in_a_backed_off_gap_is_timed_at_the_rate_that_follows():
    """The same gap holding reads at the rate that follows them (600 kB/s for the whole 1.6 s) was busy all
    along: the phase is ``reads``, not idle."""
    d = _backed_off_then(960_000, 600e3)
    assert d["bound"] == "reads", d


@pytest.mark.parametrize("sample_gap", [0.2, 0.5, 1.6])
def test_lines_make_a_still_phase_busy_when_they_come_within_2_s_of_each_other_however_it_was_sampled(
        sample_gap: float):
    """A still process writing a line every 1.5 s is busy with its log (``log``); every 2.5 s it is ``idle`` with
    silent stretches between the lines. The sampler's gap (its back-off) changes neither."""
    from firstlight.anatomy import Signals

    def phase(line_every: float) -> dict[str, Any]:
        n = int(8.0 / sample_gap) + 1
        points = [(T0 + i * sample_gap, 1000, 0.01, None, "", "S") for i in range(n)]
        lines = [T0 + 0.1 + i * line_every for i in range(int(7.9 / line_every) + 1)]
        anat = anatomy([{"name": "warmup", "start": T0}], Signals(points=points, log_times=lines), T0 + 8.0)
        return {**_phase(anat, "warmup"), "stretches": [x["seconds"] for x in anat["idle"]]}

    busy = phase(1.5)
    assert busy["bound"] == "log" and busy["stretches"] == [], busy
    still = phase(2.5)
    assert still["bound"] == "idle", still
    assert still["stretches"][:2] == [pytest.approx(2.5), pytest.approx(2.5)], still


def test_a_compile_cache_hit_is_a_hit():
    j, t = _start()
    j.feed(LogLine(t + 1, VLLM + "Directly load the compiled graph(s) for dynamic shape from the cache, took 0.4 s"))
    j.feed(LogLine(t + 2, VLLM + "Available KV cache memory: 1.00 GiB"))
    anat = anatomy(j.phases.dicts(), j.signals, t + 3)
    assert _phase(anat, "compile")["compile"]["cache"] == "hit"


def test_a_replayed_log_without_process_samples_never_says_idle():
    j, t = _start(resident=None)
    j.feed(LogLine(t + 30, VLLM + "Starting to load model /models/m..."))
    j.feed(LogLine(t + 60, VLLM + "Loading weights took 30.00 seconds"))
    anat = anatomy(j.phases.dicts(), j.signals, t + 61)
    assert "idle" not in {p["bound"] for p in anat["phases"]} and anat["idle_s"] == 0
    assert _phase(anat, "weights_loading")["bound"] == "unmeasured"


def test_against_the_baseline_the_largest_phase_difference_comes_first_with_its_cache_states():
    cold = _weights_start(180e6, (0.0, "D"))
    warm = _weights_start(2e9, (0.0, "S"), resident=4 * GB)
    warm["phases"] = [{**p, "seconds": 2.0} if p["name"] == "weights_loading" else p for p in warm["phases"]]
    warm["total_s"] -= 18.0
    vs = compare(cold, warm, 7)
    assert vs is not None and vs["run"] == 7 and vs["delta_s"] == pytest.approx(18.0)
    assert vs["phases"][0]["phase"] == "weights_loading" and vs["phases"][0]["delta_s"] == pytest.approx(18.0)
    assert "0% of the weights resident at start vs 100%" in vs["message"]
    assert vs["message"].startswith("slower by 18.0s: weights_loading +18.0s")
    assert any("vs baseline run 7" in line for line in human_lines({**cold, "vs_baseline": vs}))


def test_the_html_report_draws_this_start_beside_the_baselines_as_stacked_bars():
    obs: list[Any] = [Started(T0, pid=1, launched=True), WeightsTotal(T0 + 0.1, 4 * GB, 2, "/m", 0, "ext4"),
                      LogLine(T0 + 0.2, VLLM + "vLLM API server version 0.11.0")]
    for i in range(1, 41):
        t = T0 + 0.2 + i * 0.5
        if i == 6:
            obs.append(LogLine(t - 0.01, VLLM + "Starting to load model /models/m..."))
        obs.append(ProcessSample(t, alive=True, cpu_seconds=0.1 * i, read_bytes=0 if i <= 6 else (i - 6) * 10**8,
                                 thread_top=0.0))
    obs.append(LogLine(T0 + 20.3, VLLM + "Loading weights took 17.00 seconds"))
    base = {"name": "weights_loading", "start": 0.0, "seconds": 1.0, "bound": "page_cache", "evidence": []}
    baseline = {"started_at": T0, "ready_at": T0 + 10, "phases": [], "anatomy": {"total_s": 10.0, "phases": [
        {**base, "name": "process_start", "seconds": 9.0, "bound": "idle"}, base]}}
    view = build_view(obs, None, JudgeConfig(), baseline, 3)
    page = render_html(view)
    assert 'id="anatomy"' in page and page.count('class="anatomy-row"') == 2
    w = next(p for p in view.anatomy["phases"] if p["name"] == "weights_loading")  # type: ignore[index]
    assert w["bound"] == "disk"
    scale = view.anatomy["total_s"]  # type: ignore[index]
    assert 'data-phase="weights_loading" title="weights_loading: ' in page
    assert f"width:{100 * w['seconds'] / scale:.3f}%" in page  # this start's bar, to scale
    assert f"width:{100 * 1.0 / scale:.3f}%" in page  # the baseline's weights, on the same scale


def test_a_sleeping_process_small_reads_are_neither_reads_nor_work_and_a_real_read_is():
    """A phase busy with log lines while its process read() 2 KB/s (a pipe, a poll) is bound by `log`, not `reads`
    ("0.0 MB at 0 MB/s"); the same phase reading 1 MB/s is `reads` (the threshold: IDLE_READ_BPS, 64 KiB/s)."""
    from firstlight.anatomy import Signals

    def phase_bound(bytes_per_s: float, logs: bool = True) -> str:
        ts = [T0 + i * 0.5 for i in range(13)]
        sig = Signals(points=[(t, int(i * 0.5 * bytes_per_s), i * 0.005, None, "", "S") for i, t in enumerate(ts)],
                      log_times=ts[1:] if logs else [])
        return str(_phase(anatomy([{"name": "warmup", "start": T0}], sig, T0 + 6.0), "warmup")["bound"])

    assert phase_bound(2_000) == "log"
    assert phase_bound(1_000_000) == "reads"
    assert phase_bound(333_000) == "reads"
    assert phase_bound(2_000, logs=False) == "idle"  # nothing else moved: the small reads leave it idle


def test_a_slow_read_rate_is_quoted_with_its_decimal_and_a_fast_one_whole():
    """Evidence a person can check: 0.33 MB/s reads "0.3 MB/s", never "0 MB/s"; 9.9 MB/s keeps its decimal and
    49.4 MB/s reads "49 MB/s"."""
    from firstlight.anatomy import Signals

    def evidence(bytes_per_s: float) -> str:
        ts = [T0 + i * 0.5 for i in range(13)]
        sig = Signals(points=[(t, int(i * 0.5 * bytes_per_s), i * 0.005, None, "", "S") for i, t in enumerate(ts)],
                      log_times=ts[1:])
        return str(_phase(anatomy([{"name": "warmup", "start": T0}], sig, T0 + 6.0), "warmup")["evidence"][0]["value"])

    assert evidence(333_000).endswith("at 0.3 MB/s")
    assert evidence(9_900_000).endswith("at 9.9 MB/s")
    assert evidence(49_400_000).endswith("at 49 MB/s")
