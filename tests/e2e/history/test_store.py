"""The run history: concurrent writers, a writer killed mid-run, a corrupt file, baselines and regressions.

The tests of this subject that run the store in the test's own process; the others:
``tests/e2e/history/test_history.py``.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from firstlight.history import DeploymentKey, History, HistoryError

KEY = DeploymentKey.create("vllm", "meta-llama/Llama-3.1-8B", ["vllm", "serve", "meta-llama/Llama-3.1-8B"], 1)


def ready_summary(cold_start_s: float, started_at: float = 1000.0) -> dict:
    return {"verdict": "ready", "started_at": started_at, "ready_at": started_at + cold_start_s}


def bench_dict(tput: float, errors: int = 0) -> dict:
    return {"completed": 10, "errors": errors, "timeouts": 0, "output_throughput": tput,
            "request_throughput": tput / 100, "ttft_ms": {"median": 50.0}}


def _writer(path: str, writer: int, n: int) -> None:
    with History(path) as h:
        for i in range(n):
            h.record_run("bench", {"writer": writer, "i": i}, KEY, bench=bench_dict(100.0 + i))


def test_concurrent_writers_lose_nothing(tmp_path: Path):
    path = str(tmp_path / "h.sqlite3")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]  # a writer's traceback, if any, is in the captured stderr
    with History(path) as h:
        runs = h.runs(limit=1000)
    assert len(runs) == 200
    assert {(r.summary["writer"], r.summary["i"]) for r in runs} == {(w, i) for w in range(4) for i in range(50)}
    assert all(r.metrics["output_throughput"] == 100.0 + r.summary["i"] for r in runs)


def test_a_corrupt_file_is_moved_aside_with_a_warning(tmp_path: Path):
    path = tmp_path / "history.sqlite3"
    garbage = b"SQLite format 3\x00" + os.urandom(16384 - 16)  # a database whose pages are garbage
    path.write_bytes(garbage)
    warnings: list[str] = []
    with History(path, warn=warnings.append) as h:
        run_id = h.record_run("up", ready_summary(30), KEY)
        assert [r.id for r in h.runs()] == [run_id]
    assert len(warnings) == 1 and "corrupt" in warnings[0] and "\n" not in warnings[0]
    aside = list(tmp_path.glob("history.sqlite3.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage  # kept, never silently lost
    assert str(aside[0]) in warnings[0]


def test_a_damaged_page_is_detected_at_open(tmp_path: Path):
    path = tmp_path / "h.sqlite3"
    with History(path) as h:
        for i in range(200):
            h.record_run("bench", {"pad": "y" * 2000, "i": i}, KEY, bench=bench_dict(100))
        h._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page: 6 * page] = os.urandom(3 * page)  # header intact, b-tree pages destroyed
    path.write_bytes(bytes(data))
    warnings: list[str] = []
    with History(path, warn=warnings.append) as h:
        assert h.runs() == []
    assert len(warnings) == 1 and "corrupt" in warnings[0]


def test_an_unusable_path_is_a_one_line_error(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(HistoryError, match="cannot open history database"):
        History(tmp_path / "file" / "h.sqlite3")


def test_baseline_is_the_median_of_previous_good_runs(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        assert h.baseline(KEY, "cold_start_s") is None and h.expected_start_seconds(KEY) is None
        for s in (10, 12, 11, 13):
            h.record_run("up", ready_summary(s), KEY)
        h.record_run("up", {"verdict": "failed", "started_at": 0, "ready_at": None}, KEY)  # not a good run
        h.record_run("up", ready_summary(99), DeploymentKey("vllm", "other-model"))  # another deployment
        h.record_run("bench", {}, KEY, bench=bench_dict(100))
        h.record_run("bench", {}, KEY, bench=bench_dict(120))
        h.record_run("bench", {}, KEY, bench=bench_dict(9999, errors=3))  # failed requests: not a baseline
        assert h.baseline(KEY, "cold_start_s") == pytest.approx(11.5)
        assert h.baseline(KEY.hash, "cold_start_s") == pytest.approx(11.5)
        assert h.expected_start_seconds(KEY) == pytest.approx(11.5)
        assert h.baseline(KEY, "output_throughput") == pytest.approx(110)
        assert h.baseline(KEY, "ttft_median_ms") == pytest.approx(50)
        first = h.runs(KEY, kind="up")[-1]
        assert h.baseline(KEY, "cold_start_s", before=first.id + 2) == pytest.approx(11)  # only runs 1 and 2


def test_the_baseline_run_is_the_pinned_start_else_the_good_start_nearest_the_median(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        assert h.baseline_run(KEY) is None
        ids = [h.record_run("up", ready_summary(s), KEY) for s in (10, 30, 12)]
        h.record_run("bench", {}, KEY, bench=bench_dict(100))  # not a start
        h.record_run("up", {"verdict": "failed", "started_at": 0, "ready_at": None}, KEY)  # not a good start
        run = h.baseline_run(KEY)
        assert run is not None and run.id == ids[2] and h.baseline(KEY, "cold_start_s") == 12  # the median's run
        assert getattr(h.baseline_run(KEY, before=ids[2]), "id", None) in (ids[0], ids[1])
        h.pin(ids[1])
        assert getattr(h.baseline_run(KEY), "id", None) == ids[1]
        assert getattr(h.baseline_run(KEY, before=ids[1]), "id", None) == ids[0]


def test_regression_is_caught_with_both_numbers(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        for _ in range(3):
            h.record_run("up", ready_summary(30.0), KEY, bench=bench_dict(100.0))
        regs = h.check_regression(KEY, cold_start_s=39.0, output_throughput=70.0, margin=0.2)
        by = {r.metric: r for r in regs}
        assert set(by) == {"cold_start_s", "output_throughput"}
        assert (by["cold_start_s"].value, by["cold_start_s"].baseline) == (39.0, 30.0)
        assert by["cold_start_s"].ratio == pytest.approx(1.3)
        assert (by["output_throughput"].value, by["output_throughput"].baseline) == (70.0, 100.0)
        assert by["output_throughput"].ratio == pytest.approx(0.7)
        assert "39" in by["cold_start_s"].message and "30" in by["cold_start_s"].message
        assert h.check_regression(KEY, cold_start_s=35.0, output_throughput=85.0, margin=0.2) == []
        assert h.check_regression(DeploymentKey("x", "y"), cold_start_s=1e9) == []  # no history: nothing to say


def test_a_pinned_run_is_the_baseline(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        ids = [h.record_run("up", ready_summary(s), KEY) for s in (20, 30, 40)]
        assert h.baseline(KEY, "cold_start_s") == 30
        h.pin(ids[0])
        assert h.baseline(KEY, "cold_start_s") == 20
        reg = h.check_regression(KEY, cold_start_s=25.0)
        assert reg and reg[0].pinned_run == ids[0] and reg[0].baseline == 20
        h.pin(ids[2])  # one pinned run per deployment
        assert [r.id for r in h.runs(KEY) if r.pinned] == [ids[2]]
        h.unpin(KEY)
        assert h.baseline(KEY, "cold_start_s") == 30
        with pytest.raises(KeyError):
            h.pin(12345)


def test_deployment_key_masks_secrets_and_is_stable():
    a = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m", "--api-key", "sk-abcdefghijklmnopqrstu"], 2)
    b = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m", "--api-key", "another-secret-value"], 2)
    assert "sk-abc" not in (a.command or "") and "***" in (a.command or "")
    assert a.hash == b.hash and len(a.hash) == 12
    assert a.hash != DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"], 4).hash
    assert a.to_dict()["hash"] == a.hash
    c = DeploymentKey.create("vllm", "m", "vllm serve m --api-key sk-abcdefghijklmnopqrstu", 2)
    assert c.hash == a.hash and "sk-abc" not in (c.command or "")


def test_no_secret_reaches_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_TOKEN", "hf_envsecretvalue0123456789")
    path = tmp_path / "h.sqlite3"
    cmd = ["python", "-m", "sglang.launch_server", "--api-key=topsecret42"]
    key = DeploymentKey.create("sglang", "m", cmd)
    summary = {"verdict": "ready", "api_key": "topsecret42", "command": cmd, "plain": "no hint topsecret42 here",
               "argv": ["x", "--hf-token", "hf_envsecretvalue0123456789"],
               "log": "ServerArgs(api_key='topsecret42', model_path='m')", "note": "Bearer abc.def.ghi"}
    with History(path) as h:
        h.record_run("up", summary, key)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for secret in (b"topsecret42", b"hf_envsecretvalue0123456789", b"abc.def.ghi"):
        assert secret not in raw


def test_kind_is_checked(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h, pytest.raises(ValueError, match="kind"):
        h.record_run("nope", {}, KEY)
