"""The wire layer's promises through the real CLI (`probe`, `watch`, `bench` in a subprocess) against fault
servers on real sockets. No timing is asserted: each test checks an outcome the old behaviour could not give
(an exit within a generous subprocess limit, a READY that a stuck probing thread would never see).

The process-starting tests of this subject; the others: ``tests/unit/cli/test_wire.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.common import firstlight_peak_cmd, run_firstlight
from tests.support.faults import fault_server

FAST = ["--poll-min", "0.05", "--poll-max", "0.3", "--sample-interval", "0.2"]


def test_probe_returns_against_a_server_that_trickles_header_bytes():
    with fault_server("header_trickle") as s:
        r = run_firstlight("probe", s.url, "--timeout", "5", timeout=90)  # the old probe never returned
    assert r.rc == 1 and "deadline" in r.stderr, r.stderr


def test_probe_timeout_bounds_the_whole_call_not_each_request():
    # Each answer takes 1.5 s: every request fits in --timeout 2.5, the whole climb (about 4.5 s) does not.
    with fault_server("slow", delay=1.5) as s:
        r = run_firstlight("probe", s.url, "--timeout", "2.5", "--level", "generation")
    assert r.rc == 1 and "within" in r.stderr, r.stderr


def test_watch_sees_a_server_recover_after_a_request_that_trickled():
    # The first request trickles a header byte a second for ever (each read well within --read-timeout 3): a
    # probing thread stuck in it would never see READY.
    with fault_server("header_trickle", trickle_first=1) as s:
        r = run_firstlight("watch", s.url, "--json", "--timeout", "60", "--read-timeout", "3", *FAST)
    assert r.rc == 0, r.stderr[-2000:]
    assert r.summary["verdict"] == "ready"


def test_bench_cannot_hang_on_a_server_that_trickles_header_bytes():
    with fault_server("header_trickle") as s:
        r = run_firstlight("bench", s.url, "--requests", "1", "--warmup", "1", "--request-timeout", "2",
                           "--connect-timeout", "1", "--no-history", timeout=120)
    assert r.rc in (1, 3) and "Traceback" not in r.stderr, r.stderr


def test_bench_memory_is_bounded_on_a_stream_line_that_never_ends(tmp_path: Path):
    out, peak = tmp_path / "out.json", tmp_path / "peak"
    with fault_server("sse_no_newline") as s, open(out, "wb") as stdout:
        p = subprocess.run([*firstlight_peak_cmd(peak, "bench"), s.url, "--model", "m", "--requests",
                            "1", "--warmup", "0", "--request-timeout", "60", "--no-history", "--json"],
                           stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=120)
    result = json.loads(out.read_text())
    assert p.returncode == 1 and "line longer than" in json.dumps(result["bench"]["error_samples"])
    assert int(peak.read_text()) < 300 * 1024  # KiB; the server sends up to 512 MiB on that one line


@pytest.mark.parametrize("command", ["probe", "bench"])
def test_nested_json_is_not_json_and_never_an_internal_error(command: str):
    with fault_server("nested_json") as s:
        extra = ["--level", "models"] if command == "probe" else ["--warmup", "0", "--no-history"]
        r = run_firstlight(command, s.url, *extra)
    assert r.rc == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert "not a model list" in r.stderr


def test_nested_json_never_kills_the_probing_thread():
    with fault_server("nested_json") as s:
        r = run_firstlight("watch", s.url, "--json", "--timeout", "3", *FAST)
    assert r.rc in (1, 3) and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.summary["requests"]["models"] >= 2  # the ladder kept probing


def test_a_base_url_ending_in_v1_probes_the_right_paths():
    with fault_server("ok") as s:
        r = run_firstlight("probe", s.url + "/v1", "--level", "generation")
        paths = [x["path"] for x in s.seen]
    assert r.rc == 0, r.stderr
    assert "/v1/models" in paths and not any(p.startswith("/v1/v1") for p in paths)


@pytest.mark.parametrize("command", ["probe", "watch", "bench"])
def test_port_0_in_a_url_is_a_usage_error(command: str):
    r = run_firstlight(command, "http://127.0.0.1:0")
    assert r.rc == 64 and "port 0" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_up_without_a_known_port_is_a_usage_error_not_port_80():
    r = run_firstlight("up", "--", "true")
    assert r.rc == 64 and "Traceback" not in r.stderr, r.stderr
    want = "--url: cannot tell the server's port from its command line; give the URL"
    assert r.stderr.strip().endswith(want), r.stderr


def test_identification_by_endpoints_never_delays_ready():
    # The engine-specific endpoints never answer; the first generations are 503 (still loading). Asked one
    # after another with full timeouts, identification held the ladder for 7 x 6 s; now it runs beside it.
    with fault_server("identify_hangs", fail_first=2) as s:
        r = run_firstlight("watch", s.url, "--json", "--timeout", "20", "--read-timeout", "5", *FAST)
    assert r.rc == 0, r.stderr[-2000:]


def test_levels_are_reported_as_each_rung_is_checked():
    # The generation trickles for its whole --generation-timeout (60 s); the run ends at --timeout 4 s.
    with fault_server("trickle") as s:
        r = run_firstlight("watch", s.url, "--json", "--timeout", "4", "--generation-timeout", "60", *FAST)
    assert r.rc == 3, r.stderr[-2000:]
    assert r.summary["level"] == "models"
    assert any(e["event"] == "level" and e["message"] == "models" for e in r.events), r.events


def test_an_explicit_health_path_wins_over_the_detected_engines():
    # The server says it is SGLang (whose health path is /health_generate) while its generations are 503.
    with fault_server("sglang", fail_first=8) as s:
        r = run_firstlight("watch", s.url, "--json", "--timeout", "60", "--health-path", "/health", *FAST)
        gets = [x["path"] for x in s.seen if x["method"] == "GET"]
    assert r.rc == 0, r.stderr[-2000:]
    assert any(e["event"] == "note" and "identified by its endpoints" in e.get("message", "") for e in r.events)
    assert "/health_generate" not in gets and "/health" in gets


def test_server_text_reaches_neither_terminal_nor_json_with_escapes():
    with fault_server("escapes") as s:
        probe = run_firstlight("probe", s.url, "--level", "health", "--json")
        watch = run_firstlight("watch", s.url, "--json", "--timeout", "20", "--health-path", "/none", *FAST)
        bench = run_firstlight("bench", s.url, "--requests", "1", "--warmup", "0", "--no-history", "--json")
    assert probe.rc == 1 and watch.rc == 0 and bench.rc == 0, (probe.stderr, watch.stderr[-2000:], bench.stderr)
    for r in (probe, watch, bench):
        for text in (r.stdout, r.stderr):
            assert "\x1b" not in text and "\\u001b" not in text and "\x07" not in text
    assert len(watch.summary["first_generation"]["text"]) <= 201
    # the server's text itself is there, each escape taken out of the middle of it (the text around it kept): a
    # reporter that dropped the server's words entirely would pass the checks above
    assert json.loads(probe.stdout)["checks"][-1]["detail"] == 'GET /health -> 503 {"status": "loading"}'
    assert 'GET /health -> 503 {"status": "loading"}' in probe.stderr
    assert watch.summary["first_generation"]["text"].startswith(" Paris!!!!!")
    assert "generation returned ' Paris!!!!!" in watch.stderr
    bench_out = json.loads(bench.stdout)
    assert bench_out["model"].startswith("m1zzzzz") and bench_out["bench"]["model"] == bench_out["model"]
