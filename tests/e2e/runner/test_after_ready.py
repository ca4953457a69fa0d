"""Once READY holds (``firstlight.runner.after_ready``), in process: how many GPUs the deployment sees (its key in
the history), the history opened or said unavailable, and the checks that run only when asked for. The real
servers behind the warm-up, the benchmark and the history: ``tests/e2e/runner/test_after_ready_live.py``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from firstlight.config import Config, HistoryConfig, ProbeConfig
from firstlight.engines import get_profile
from firstlight.history.store import DeploymentKey, History
from firstlight.redact import Redactor
from firstlight.result import RunResult
from firstlight.runner import after_ready
from firstlight.samplers import nvml as nvml_module
from firstlight.sim.fixtures import free_port
from tests.support.bench import running_sim
from tests.support.common import FIXTURES


class Nvml:
    def __init__(self, count: int | Exception) -> None:
        self.count = count

    def nvmlInit(self) -> None:
        if isinstance(self.count, Exception):
            raise self.count

    def nvmlDeviceGetCount(self) -> int:
        assert isinstance(self.count, int)
        return self.count


@pytest.mark.parametrize(("visible", "count"), [("0,1", 2), ("0, ,2", 2), ("-1", 0), ("0,-1", 1), ("", 0),
                                                  ("GPU-5e3c,GPU-77a1", 2)])
def test_the_visible_gpus_are_counted_from_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch, visible: str,
                                                                count: int) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(nvml_module, "load", lambda: pytest.fail("NVML asked although the variable is set"))
    assert after_ready.visible_gpu_count() == count


@pytest.mark.parametrize(("nvml", "count"), [(Nvml(8), 8), (Nvml(RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")), None),
                                             (None, None)])
def test_without_the_variable_nvml_counts_or_nobody_knows(monkeypatch: pytest.MonkeyPatch, nvml: Any,
                                                         count: int | None) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml_module, "load", lambda: (nvml, None if nvml else "nvidia-ml-py is not installed"))
    assert after_ready.visible_gpu_count() == count


def test_no_history_when_turned_off_and_a_warning_when_it_cannot_be_opened(tmp_path: Path) -> None:
    warned: list[str] = []
    off = Config(history=HistoryConfig(enabled=False, path=tmp_path / "h.db"))
    assert after_ready.open_history(off, Redactor(), warned.append) is None and warned == []
    assert not (tmp_path / "h.db").exists()
    on = Config(history=HistoryConfig(path=tmp_path / "h.db"))
    history = after_ready.open_history(on, Redactor(), warned.append)
    assert history is not None and warned == []
    assert history.busy_timeout == after_ready.HISTORY_BUSY_S  # another writer's lock waited out 1 s, not 30
    history.close()
    (tmp_path / "corrupt.db").write_bytes(b"SQLite format 3\x00" + b"\x01" * 4000)  # a damaged SQLite file
    moved = after_ready.open_history(Config(history=HistoryConfig(path=tmp_path / "corrupt.db")), Redactor(),
                                     warned.append)
    assert moved is not None and len(warned) == 1 and "is corrupt" in warned[0]  # said where the run says things
    moved.close()
    warned.clear()
    bad = Config(history=HistoryConfig(path=tmp_path))  # a directory, not a database file
    assert after_ready.open_history(bad, Redactor(), warned.append) is None
    assert len(warned) == 1 and warned[0].startswith("history unavailable, not recorded: ")
    assert after_ready.HISTORY_BUSY_S == 1.0


def test_nothing_runs_after_ready_unless_asked() -> None:
    said: list[str] = []
    assert after_ready.post_ready_checks(Config(), get_profile("vllm"), "m", said.append) == {} and said == []


def test_an_engine_without_startup_endpoints_is_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_connection(*a: Any, **kw: Any) -> Any:
        raise AssertionError("a connection was opened for an engine with no startup endpoints")

    monkeypatch.setattr(after_ready, "Wire", no_connection)
    assert not get_profile("vllm").clock_endpoints and get_profile("sglang").clock_endpoints
    assert after_ready.engine_clock_endpoints(Config(), get_profile("vllm"), lambda: 0.0) == []
    with pytest.raises(AssertionError, match="a connection was opened"):
        after_ready.engine_clock_endpoints(Config(), get_profile("sglang"), lambda: 0.0)  # this one is asked
    assert after_ready.CLOCK_READ_TIMEOUT_S == 3.0


def test_the_deployment_key_takes_the_model_on_disk_else_the_command_s_else_the_probe_s(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    vllm = get_profile("vllm")
    on_disk = after_ready.deployment_key(Config(model_path=tmp_path), vllm, ["vllm", "serve", "org/m"], Redactor())
    named = after_ready.deployment_key(Config(), vllm, ["vllm", "serve", "org/m"], Redactor())
    probed = after_ready.deployment_key(Config(), vllm, [], Redactor())
    assert on_disk.model == str(tmp_path) and named.model == "org/m" and probed.model is None
    assert named.gpu_count == 2 and named.engine == "vllm" and len({on_disk.hash, named.hash, probed.hash}) == 3


# -- the warm-up and the benchmark, wired: what they are asked and what is said of them ------------------------------
class Dist:
    def __init__(self, median: float | None) -> None:
        self.median = median


class BenchResult:
    completed, sent, errors, timeouts, output_throughput = 30, 32, 1, 1, 812.25
    ttft_ms, tpot_ms = Dist(41.6), Dist(7.25)

    def to_dict(self) -> dict[str, Any]:
        return {"output_throughput": self.output_throughput}


class Warmup:
    def __init__(self, first_s: float | None, steady_s: float | None, steady_index: int | None) -> None:
        self.first_s, self.steady_s, self.steady_index, self.errors = first_s, steady_s, steady_index, 0

    def to_dict(self) -> dict[str, Any]:
        return {"first_s": self.first_s}


def _asked(monkeypatch: pytest.MonkeyPatch, warmup: Any = None, bench_error: Exception | None = None
           ) -> list[tuple[str, Any, Any]]:
    asked: list[tuple[str, Any, Any]] = []

    def run_warmup(cfg: Any, n: int) -> Any:
        asked.append(("warmup", cfg, n))
        return warmup or Warmup(2.0, 0.5, 3)

    def bench_with_spec(cfg: Any, profile: Any, command: list[str]) -> Any:
        asked.append(("bench", cfg, (profile.name, command)))
        if bench_error is not None:
            raise bench_error
        return BenchResult(), {"status": "not_enabled", "message": "no draft model in the command"}

    monkeypatch.setattr(after_ready, "run_warmup", run_warmup)
    monkeypatch.setattr(after_ready, "bench_with_spec", bench_with_spec)
    return asked


def _cfg(**after: Any) -> Config:
    from firstlight.config import AfterReadyConfig, ProbeConfig

    probe = ProbeConfig(url="http://127.0.0.1:8123", api="chat", api_key="k3y", generation_timeout=33.0,
                        connect_timeout=0.25, max_tokens=5)
    return Config(probe=probe, after=AfterReadyConfig(**after), command=["vllm", "serve", "m"])


def test_the_warm_up_sends_its_requests_one_by_one_and_says_first_against_steady(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(monkeypatch)
    said: list[str] = []
    out = after_ready.post_ready_checks(_cfg(warmup=6), get_profile("vllm"), "served-m", said.append)
    ((what, cfg, n),) = asked
    assert (what, n) == ("warmup", 6)
    assert (cfg.url, cfg.api, cfg.model, cfg.api_key, cfg.request_timeout, cfg.connect_timeout) == (
        "http://127.0.0.1:8123", "chat", "served-m", "k3y", 33.0, 1.0)  # connect: a second at least
    assert (cfg.prompt_len, cfg.output_len, cfg.num_requests) == (16, 5, 6)
    assert out == {"warmup": {"first_s": 2.0}}
    assert said == ["warm-up: first request 2.00s, steady state 0.50s (4.0x), steady from request 4, 0 errors"]


@pytest.mark.parametrize(("warmup", "line"), [
    (Warmup(2.0, 0.5, None), "warm-up: first request 2.00s, steady state 0.50s (4.0x), never settled, 0 errors"),
    (Warmup(None, 0.5, 1), None),  # no first latency: nothing to say
    (Warmup(2.0, 0.0, 1), None),  # no steady latency either
])
def test_a_warm_up_that_never_settled_or_measured_nothing(monkeypatch: pytest.MonkeyPatch, warmup: Warmup,
                                                          line: str | None) -> None:
    _asked(monkeypatch, warmup)
    said: list[str] = []
    after_ready.post_ready_checks(_cfg(warmup=3), get_profile("vllm"), None, said.append)
    assert said == ([line] if line else [])


def test_the_benchmark_runs_as_configured_and_says_its_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(monkeypatch)
    said: list[str] = []
    out = after_ready.post_ready_checks(_cfg(bench=True, bench_requests=40, bench_concurrency=8, bench_duration=20.0,
                                             bench_prompt_len=256, bench_output_len=32),
                                        get_profile("sglang"), "m", said.append)
    ((what, cfg, (engine, command)),) = asked
    assert what == "bench" and (engine, command) == ("sglang", ["vllm", "serve", "m"])
    assert (cfg.prompt_len, cfg.output_len, cfg.concurrency, cfg.num_requests, cfg.duration_s, cfg.ignore_eos) == (
        256, 32, 8, 40, 20.0, True)
    assert out == {"bench": {"output_throughput": 812.25},
                   "spec_decoding": {"status": "not_enabled", "message": "no draft model in the command"}}
    assert said == ["bench: 30/32 ok, 1 errors, 1 timeouts; 812.2 output tok/s; TTFT median 42 ms, TPOT median 7.2 ms",
                    "speculative decoding: not_enabled: no draft model in the command"]


def test_a_watched_servers_command_is_the_one_read_for_speculative_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(monkeypatch)
    cfg = dataclasses.replace(_cfg(bench=True), command=[], watched_command=["sglang", "serve", "--speculative-x"])
    after_ready.post_ready_checks(cfg, get_profile("sglang"), "m", lambda s: None)
    assert asked[0][2] == ("sglang", ["sglang", "serve", "--speculative-x"])


def test_a_benchmark_that_fails_is_said_and_recorded_and_the_warm_up_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from firstlight.bench.client import BenchError

    _asked(monkeypatch, bench_error=BenchError("every request failed: connection refused"))
    said: list[str] = []
    out = after_ready.post_ready_checks(_cfg(warmup=2, bench=True), get_profile("vllm"), "m", said.append)
    assert out["post_ready_error"] == "every request failed: connection refused" and "warmup" in out
    assert said[-1] == "after READY: every request failed: connection refused"
    _asked(monkeypatch, bench_error=ValueError("api must be one of completions, chat"))
    assert after_ready.post_ready_checks(_cfg(bench=True), get_profile("vllm"), "m", lambda s: None) == {
        "post_ready_error": "api must be one of completions, chat"}


# -- compare_with_history on a real history file -----------------------------------------------------------------

def key_of(model: str = "/m/llama") -> DeploymentKey:
    return DeploymentKey.create("vllm", model, ["vllm", "serve", model], 1, Redactor())


def anat(weights_s: float, total_s: float) -> dict[str, Any]:
    return {"total_s": total_s, "phases": [{"name": "weights_loading", "seconds": weights_s},
                                           {"name": "compile", "seconds": total_s - weights_s}], "cache": {}}


def started(cold_start_s: float, *, start_type: str = "cold", throughput: float | None = None,
            anatomy: dict[str, Any] | None = None, version: str | None = "0.9.1", verdict: str = "ready") -> RunResult:
    bench = ({"output_throughput": throughput, "completed": 32, "sent": 32, "errors": 0, "timeouts": 0}
             if throughput is not None else None)
    return RunResult(verdict=verdict, phase="ready", started_at=1000.0, ended_at=1000.0 + cold_start_s,
                     engine="vllm", url="http://127.0.0.1:8000", ready_at=1000.0 + cold_start_s,
                     cold_start_s=cold_start_s, bench=bench, anatomy=anatomy,
                     start_type={"type": start_type, "labels": [start_type]}, engine_version=version)


def test_each_start_is_recorded_with_its_baseline_eta_and_bench(tmp_path: Path) -> None:
    h, key = History(tmp_path / "h.db"), key_of()
    first = after_ready.compare_with_history(h, key, "up", started(100.0, throughput=50.0), 0.2)
    assert first.history_run == 1 and first.regression is None
    assert first.baseline == {"deployment": key.hash, "start_type": "cold", "eta": None, "cold_start_s": None,
                              "output_throughput": None, "margin": 0.2}
    stored = h.get(1)
    assert stored is not None and stored.kind == "up" and stored.bench is not None
    assert stored.bench["output_throughput"] == 50.0 and stored.summary["cold_start_s"] == 100.0
    second = after_ready.compare_with_history(h, key, "watch", started(110.0, throughput=48.0), 0.2)
    assert second.history_run == 2 and second.regression is None
    b = second.baseline
    assert b is not None and (b["cold_start_s"], b["output_throughput"], b["start_type"]) == (100.0, 50.0, "cold")
    assert b["eta"] is not None and b["eta"]["seconds"] == 100.0 and b["eta"]["start_type"] == "cold"
    assert h.get(2).kind == "watch"  # type: ignore[union-attr]
    assert h.get(2).summary["baseline"] == b  # type: ignore[union-attr]  # stored with the start, as told


def test_a_start_is_compared_with_starts_of_its_own_type(tmp_path: Path) -> None:
    h, key = History(tmp_path / "h.db"), key_of()
    after_ready.compare_with_history(h, key, "up", started(300.0, start_type="cold"), 0.2)
    after_ready.compare_with_history(h, key, "up", started(20.0, start_type="warm_page_cache"), 0.2)
    cold = after_ready.compare_with_history(h, key, "up", started(310.0, start_type="cold"), 0.2)
    assert cold.regression is None  # against the 300 s cold start, never the 20 s warm one
    assert cold.baseline is not None and cold.baseline["cold_start_s"] == 300.0
    assert cold.baseline["eta"]["seconds"] == 300.0  # the next cold start's ETA: cold starts only
    warm = after_ready.compare_with_history(h, key, "up", started(30.0, start_type="warm_page_cache"), 0.2)
    assert warm.regression is not None and warm.regression[0]["metric"] == "cold_start_s"
    assert warm.verdict == "regression"


def test_a_slower_start_or_a_lower_throughput_beyond_the_margin_is_a_regression_naming_the_versions(
        tmp_path: Path) -> None:
    h, key = History(tmp_path / "h.db"), key_of()
    after_ready.compare_with_history(h, key, "up", started(100.0, throughput=50.0, version="0.9.0"), 0.2)
    r = after_ready.compare_with_history(h, key, "up", started(100.0, throughput=30.0, version="0.9.1"), 0.2)
    assert r.regression is not None
    (reg,) = r.regression
    assert reg["metric"] == "output_throughput" and "0.9.0" in reg["message"] and "0.9.1" in reg["message"]
    assert after_ready.compare_with_history(h, key, "up", started(100.0, throughput=30.0), 0.5).regression is None


def test_the_anatomy_is_set_against_the_pinned_run_else_the_newest_good_one(tmp_path: Path) -> None:
    h, key = History(tmp_path / "h.db"), key_of()
    after_ready.compare_with_history(h, key, "up", started(100.0, anatomy=anat(60.0, 100.0)), 0.2)
    after_ready.compare_with_history(h, key, "watch", started(90.0, anatomy=anat(50.0, 90.0)), 0.2)
    after_ready.compare_with_history(h, key, "up", started(95.0, anatomy=anat(55.0, 95.0), verdict="failed"), 0.2)
    h.record_run("bench", {"verdict": "ready", "anatomy": anat(1.0, 2.0)}, key, bench=None)  # not a start
    newest = after_ready.compare_with_history(h, key, "up", started(80.0, anatomy=anat(45.0, 80.0)), 0.2)
    assert newest.anatomy is not None and newest.anatomy["vs_baseline"]["run"] == 2  # the newest good start
    h.pin(1)
    pinned = after_ready.compare_with_history(h, key, "up", started(80.0, anatomy=anat(45.0, 80.0)), 0.2)
    vs = pinned.anatomy["vs_baseline"]  # type: ignore[index]
    assert vs["run"] == 1 and vs["delta_s"] == -20.0
    assert [p["phase"] for p in vs["phases"]] == ["weights_loading", "compile"]
    other = after_ready.compare_with_history(h, key_of("/m/other"), "up", started(80.0, anatomy=anat(45.0, 80.0)),
                                             0.2)
    assert "vs_baseline" not in (other.anatomy or {})  # another deployment's runs are not its baseline
    assert after_ready.anatomy_baseline(h, key, started(80.0)) is None  # no anatomy of its own


def test_a_history_that_fails_is_a_note_and_the_result_unrecorded(tmp_path: Path) -> None:
    h, key = History(tmp_path / "h.db"), key_of()
    h.close()  # as a history whose database went away under the run
    r = after_ready.compare_with_history(h, key, "up", started(100.0), 0.2)
    assert r.history_run is None and r.baseline is None and r.regression is None
    assert len(r.notes) == 1 and r.notes[0].startswith("history: "), r.notes


def test_the_deployment_key_reads_the_command_as_its_engine_names_it_and_masks_the_sessions_secrets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    llama = get_profile("llamacpp")
    wrapped = ["./serve.sh", "-hf", "org/model-GGUF", "--tag", "pa55w0rd-xyz"]  # the engine not named by the command
    secrets = Redactor()
    secrets.add("pa55w0rd-xyz")
    key = after_ready.deployment_key(Config(), llama, wrapped, secrets)
    assert key.model == "org/model-GGUF"  # llama.cpp's -hf, read as --engine names it
    assert key.command is not None and "pa55w0rd-xyz" not in key.command and "***" in key.command
    other = after_ready.deployment_key(Config(), llama, [*wrapped[:-1], "other"], secrets)
    assert other.hash != key.hash  # another command, another deployment


# -- the engine's own clock from its endpoints, asked of a real (simulated) SGLang -----------------------------------
CLOCKS = FIXTURES / "clocks"


@pytest.mark.parametrize("answers", ["server_info", "metrics"])
def test_the_engines_clock_is_read_from_the_first_endpoint_with_figures_with_the_key_and_the_sessions_time(
        answers: str) -> None:
    extra = (("--server-info", str(CLOCKS / "sglang-server-info-startup-time.json")) if answers == "server_info"
             else ("--extra-metrics", str(CLOCKS / "sglang-startup-metrics.prom")))
    with running_sim(*extra, "--api-key", "sk-clock-0123456789") as url:
        cfg = Config(probe=ProbeConfig(url=url, api_key="sk-clock-0123456789"))
        got = after_ready.engine_clock_endpoints(cfg, get_profile("sglang"), lambda: 4242.0)
        assert got and {c.source for c in got} == {answers} and {c.t for c in got} == {4242.0}
        # without the key SGLang answers 401 on /server_info and still serves /metrics (its middleware)
        keyless = after_ready.engine_clock_endpoints(Config(probe=ProbeConfig(url=url)), get_profile("sglang"),
                                                     lambda: 4242.0)
        assert keyless == ([] if answers == "server_info" else got)


def test_an_engine_clock_endpoint_that_does_not_answer_is_no_figure() -> None:
    cfg = Config(probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}"))  # nothing listens
    assert after_ready.engine_clock_endpoints(cfg, get_profile("sglang"), lambda: 1.0) == []
