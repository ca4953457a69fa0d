
"""`firstlight bench` and `firstlight history` as click commands (CliRunner on the command objects): exit codes,
JSON, one-line errors.

The process-starting tests of this subject; the others: ``tests/unit/cli/test_bench.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.cli.bench import bench_command
from firstlight.cli.history import history_command
from firstlight.history import DeploymentKey, History
from tests.support.bench import running_sim
from tests.support.bench_cli import invoke

FAST = ["--requests", "4", "-c", "2", "--output-len", "10", "--prompt-len", "16"]


@pytest.fixture(scope="module")
def sim() -> str:  # type: ignore[misc]
    with running_sim("--spec-accept", "2.5", dialect="vllm", rate=200.0) as url:
        yield url


def test_bench_json_and_exit_0(sim: str, tmp_path: Path):
    db = tmp_path / "h.sqlite3"
    r = invoke(bench_command, [sim, *FAST, "--json", "--history", str(db), "--api-key", "sk-verysecretkey123"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["verdict"] == "ok" and out["exit_code"] == 0 and out["engine"] == "vllm"
    b = out["bench"]
    assert (b["completed"], b["errors"], b["timeouts"], b["sent"]) == (4, 0, 0, 4)
    # the rate itself is checked in test_bench.py; here only that the figures are there and plausible: the
    # simulator paces tokens 5 ms apart, a floor (a busy machine only adds to it, so no ceiling is asserted)
    assert b["output_throughput"] > 0 and b["tpot_ms"]["median"] > 4.0
    assert out["config"]["ignore_eos"] is True and "api_key" not in out["config"]
    assert out["warmup"]["n"] == 1
    assert out["spec_decoding"]["status"] == "ok"
    assert out["spec_decoding"]["mean_acceptance_length"] == pytest.approx(2.5, rel=0.05)
    assert out["history"]["run_id"] == 1 and out["history"]["regressions"] == []
    assert "sk-verysecretkey123" not in r.output
    assert b"sk-verysecretkey123" not in b"".join(p.read_bytes() for p in tmp_path.iterdir())


def test_bench_human_output(sim: str):
    r = invoke(bench_command, [sim, *FAST, "--no-history"])
    assert r.exit_code == 0, r.output
    assert "4 completed, 0 errors, 0 timeouts" in r.stdout and "TPOT" in r.stdout
    assert "spec decoding: ok: mean acceptance length 2.5" in r.stdout


def test_regression_exits_4_only_with_fail_on_regression(sim: str, tmp_path: Path):
    db = tmp_path / "h.sqlite3"
    with History(db) as h:  # a baseline far above what the simulated server can do
        for _ in range(3):
            h.record_run("bench", {}, DeploymentKey.create("vllm", "sim-model"),
                         bench={"completed": 4, "errors": 0, "timeouts": 0, "output_throughput": 1e6})
    r = invoke(bench_command, [sim, *FAST, "--json", "--history", str(db)])
    assert r.exit_code == 0
    regs = json.loads(r.stdout)["history"]["regressions"]
    assert len(regs) == 1 and regs[0]["metric"] == "output_throughput" and regs[0]["baseline"] == 1e6
    r = invoke(bench_command, [sim, *FAST, "--json", "--history", str(db), "--fail-on-regression"])
    assert r.exit_code == 4, r.output
    out = json.loads(r.stdout)
    assert out["verdict"] == "regression"
    reg = out["history"]["regressions"][0]
    assert reg["value"] == out["bench"]["output_throughput"] and reg["ratio"] < 0.8
    r = invoke(bench_command, [sim, *FAST, "--history", str(db), "--fail-on-regression", "--margin", "0.2"])
    assert r.exit_code == 4 and "REGRESSION output_throughput" in r.stdout


def test_history_command_lists_compares_pins(sim: str, tmp_path: Path):
    db = str(tmp_path / "h.sqlite3")
    for _ in range(2):
        assert invoke(bench_command, [sim, *FAST, "--history", db, "--warmup", "0"]).exit_code == 0
    r = invoke(history_command, ["--history", db, "--json"])
    assert r.exit_code == 0
    runs = json.loads(r.stdout)["runs"]
    assert [x["id"] for x in runs] == [2, 1] and all(x["kind"] == "bench" for x in runs)
    dep = runs[0]["deployment"]
    r = invoke(history_command, ["--history", db])
    assert r.exit_code == 0 and dep in r.stdout
    r = invoke(history_command, ["--history", db, "--deployment", dep[:6], "--json"])
    assert json.loads(r.stdout)["baselines"]["output_throughput"] > 0
    r = invoke(history_command, ["--history", db, "--compare", "1", "2", "--json"])
    assert r.exit_code == 0
    row = json.loads(r.stdout)["compare"]["metrics"]["output_throughput"]
    # run 2 against run 1 (no timing asserted: two runs on a busy machine differ by whatever they differ by)
    assert row["a"] > 0 and row["b"] > 0 and row["ratio"] == pytest.approx(row["b"] / row["a"])
    r = invoke(history_command, ["--history", db, "--compare", "1", "2"])
    assert "output_throughput" in r.stdout
    r = invoke(history_command, ["--history", db, "--pin", "1"])
    assert r.exit_code == 0 and "pinned run 1" in r.stdout
    r = invoke(history_command, ["--history", db, "--json"])
    assert [x["pinned"] for x in json.loads(r.stdout)["runs"]] == [False, True]
    assert invoke(history_command, ["--history", db, "--unpin", "--deployment", dep]).exit_code == 0
    assert invoke(history_command, ["--history", db, "--pin", "99"]).exit_code == 64
    assert invoke(history_command, ["--history", db, "--compare", "1", "99"]).exit_code == 64
    assert invoke(history_command, ["--history", db, "--pin", "1", "--compare", "1", "2"]).exit_code == 64
