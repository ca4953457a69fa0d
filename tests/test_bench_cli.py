
"""`firstlight bench` and `firstlight history` as click commands (CliRunner on the command objects): exit codes,
JSON, one-line errors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from firstlight.cli.bench import bench_command
from firstlight.cli.history import history_command
from firstlight.history import DeploymentKey, History
from firstlight.sim.server import free_port
from tests.test_bench import _sse_head, fake_server, running_sim

FAST = ["--requests", "4", "-c", "2", "--output-len", "10", "--prompt-len", "16"]


def invoke(cmd, args: list[str]) -> Result:  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cmd, args, catch_exceptions=False)


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


def test_server_down_is_exit_1_with_one_line(tmp_path: Path):
    r = invoke(bench_command, [f"http://127.0.0.1:{free_port()}", *FAST, "--history", str(tmp_path / "h")])
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1 and "connection refused" in r.stderr
    r = invoke(bench_command, [f"http://127.0.0.1:{free_port()}", *FAST, "--json", "--no-history"])
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["verdict"] == "failed" and "connection refused" in out["error"]


def test_failed_requests_are_exit_1_and_timeouts_exit_3(tmp_path: Path):
    def http_500(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        h.send_response(500)
        h.send_header("Content-Length", "2")
        h.end_headers()
        h.wfile.write(b"no")

    def stall(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _sse_head(h)
        stop.wait(30)

    with fake_server(http_500) as url:
        r = invoke(bench_command, [url, *FAST, "--warmup", "0", "--json", "--no-history"])
    assert r.exit_code == 1 and json.loads(r.stdout)["bench"]["errors"] == 4
    with fake_server(stall) as url:
        r = invoke(bench_command, [url, *FAST, "--warmup", "0", "--json", "--no-history", "--request-timeout", "0.3"])
        assert r.exit_code == 3 and json.loads(r.stdout)["bench"]["timeouts"] == 4
        r = invoke(bench_command, [url, *FAST, "--warmup", "1", "--no-history", "--request-timeout", "0.3"])
        assert r.exit_code == 3 and "every warm-up request failed" in r.stderr


def test_usage_errors_exit_64():
    for args in (["ftp://x"], ["http://x:notaport"], ["http://x", "--bogus"], ["http://x", "-c", "0"],
                 ["http://x", "--no-history", "--fail-on-regression"], []):
        r = invoke(bench_command, args)
        assert r.exit_code == 64, (args, r.output)


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


def test_history_command_corrupt_missing_and_unusable(tmp_path: Path):
    r = invoke(history_command, ["--history", str(tmp_path / "none.sqlite3")])
    assert r.exit_code == 0 and "no history yet" in r.stdout
    bad = tmp_path / "bad.sqlite3"  # not a database at all: refused in one line, and never moved or touched
    bad.write_bytes(b"\x00garbage" * 1000)
    r = invoke(history_command, ["--history", str(bad)])
    assert r.exit_code == 1 and "not a SQLite database" in r.stderr and r.stderr.count("\n") == 1
    assert bad.read_bytes() == b"\x00garbage" * 1000 and not list(tmp_path.glob("bad.sqlite3.corrupt-*"))
    (tmp_path / "file").write_text("x")
    r = invoke(history_command, ["--history", str(tmp_path / "file" / "h.sqlite3"), "--pin", "1"])
    assert r.exit_code == 1 and "cannot open history database" in r.stderr


def test_registered_in_the_cli_group(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture):
    """The real CLI group has both commands, and runs them through its own entry point (exit codes, no
    traceback)."""
    from firstlight import cli as cli_mod

    assert cli_mod.cli.commands.get("bench") is bench_command
    assert cli_mod.cli.commands.get("history") is history_command
    for argv, code in ((["bench", "ftp://x"], 64), (["bench", "http://x", "--bogus"], 64),
                       (["bench", f"http://127.0.0.1:{free_port()}", "--no-history"], 1),
                       (["history", "--history", str(tmp_path / "none.sqlite3")], 0)):
        with pytest.raises(SystemExit) as e:
            cli_mod.main(argv)
        assert e.value.code == code, argv
    assert "Traceback" not in capsys.readouterr().err
