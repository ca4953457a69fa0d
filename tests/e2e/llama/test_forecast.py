"""The forecast on the real llama-server, through ``firstlight up``: the memory fit's KV cache is llama.cpp's own
figure (its ``llama_kv_cache: size = ... MiB`` line); a context that cannot fit is refused before launch, no
server started; the second start of a deployment is forecast from the first and graded against what it took, and
``firstlight history`` says how good the forecasts have been, and ``firstlight preflight`` forecasts the next."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from firstlight.sim.fixtures import free_port
from firstlight.vocab import EXIT_CODES, FAILED
from tests.support.common import run_firstlight
from tests.support.llama_server import FAST, llama, server_cmd  # noqa: F401  (the fixture)

MIB = 1 << 20


def _summary(stdout: str) -> dict[str, Any]:
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    return next(x for x in reversed(lines) if x.get("event") == "summary")


def test_a_context_that_cannot_fit_is_refused_before_launch_with_the_numbers(llama: dict[str, str]):  # noqa: F811
    r = run_firstlight("up", "--json", "--no-history", *FAST, "--",
                       *server_cmd(llama, free_port(), "-c", "4000000"), timeout=300)
    s = _summary(r.stdout)
    assert r.rc == EXIT_CODES[FAILED] and s["failure"] == "kv_cache" and s["pid"] is None, r.stderr[-2000:]
    assert s["preflight"]["verdict"] == "fail" and s["evidence"][0]["signal"] == "preflight:fit"
    assert "4000000-token sequence" in s["evidence"][0]["value"] and "short" in s["evidence"][0]["value"]
    assert s["forecast"]["fit_status"] == "fail" and "does not fit: RAM" in r.stderr


def test_the_forecast_kv_cache_is_llama_cpps_own_and_a_second_start_is_forecast_and_graded(
        llama: dict[str, str], tmp_path: Path):  # noqa: F811
    history, port = tmp_path / "h.sqlite3", free_port()

    def up() -> tuple[dict[str, Any], str]:
        # --margin 10: a start of a second on a busy machine may take twice its first; this test is about forecasts.
        # -lv 4: llama.cpp says its KV cache's size at the info level only
        r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), "--margin", "10", *FAST,
                           "--", *server_cmd(llama, port, "-c", "3000", "-lv", "4"), timeout=300)
        assert r.rc == 0, r.stderr[-3000:]
        return _summary(r.stdout), r.stderr

    first, err = up()
    fit = first["forecast"]["fit"]
    own = re.search(r"llama_kv_cache: size = +([\d.]+) MiB \( *(\d+) cells", err)
    assert own is not None, err[-3000:]
    assert fit["context"] == int(own.group(2)) == 3072  # llama.cpp's padding to 256 cells
    assert abs(fit["kv_min_bytes"] - float(own.group(1)) * MIB) < 0.01 * MIB  # its own size, to its rounding
    assert first["forecast"]["source"] != "history"  # nothing before it

    second, err = up()
    said = second["forecast"]
    assert said["source"] == "history" and said["total_s"] > 0 and said["phases"], said
    assert "forecast: about" in err and "from history" in err
    graded = said["graded"]["total"]
    assert graded["forecast_s"] == said["total_s"] and graded["actual_s"] == round(second["cold_start_s"], 3)
    assert graded["error_s"] == round(graded["actual_s"] - graded["forecast_s"], 3)

    r = run_firstlight("history", "--history", str(history))
    assert r.rc == 0 and re.search(r"^FORECAST \w+: forecasts of 1 start: typically off by \d+%", r.stdout, re.M), \
        r.stdout

    r = run_firstlight("explain", "--last", "--history", str(history))  # the graded forecast beside the anatomy
    assert r.rc == 0 and re.search(r"^forecast: expected [\d.]+s, took [\d.]+s \([+-]\d+%\)", r.stderr, re.M), r.stderr
    if first["start_type"]["labels"][:1] == second["start_type"]["labels"][:1]:  # both warm (or cold): one before it
        assert re.search(r"^  weights_loading +[\d.]+s  [\d.]+-[\d.]+s over 1 start, median", r.stderr, re.M), \
            r.stderr

    # `firstlight preflight` forecasts the same deployment's next start from the same history, read only
    r = run_firstlight("preflight", "--json", "--history", str(history), "--", *server_cmd(llama, port, "-c", "3000",
                                                                                          "-lv", "4"))
    events = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.rc == 0 and [e["event"] for e in events] == ["forecast", "preflight"], r.stdout
    assert events[0]["source"] == "history" and events[0]["total_s"] > 0 and "forecast: about" in r.stderr
    assert events[0]["fit"]["kv_min_bytes"] == fit["kv_min_bytes"]
