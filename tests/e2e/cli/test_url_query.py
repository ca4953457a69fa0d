"""A base URL with a query (``--url 'http://h:p/?api_key=K'``) is probed, watched and benchmarked at the right
paths, the query after each (issue 32), and the key is never printed. A real simulator whose access log shows
each request line."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd, wait_for

KEY = "ak-query-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    port, log = free_port(), tmp_path_factory.mktemp("sim") / "sim.log"
    with open(log, "w") as out:
        p = subprocess.Popen(sim_cmd("normal", port, "--load-seconds", "0"), stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, 60, "the simulator to be healthy")
        yield port, log
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("args", [
    ["probe", "--json", "--timeout", "10"],
    ["bench", "--json", "--requests", "2", "--output-len", "4", "--no-history"],
    ["watch", "--json", "--timeout", "30", "--poll-min", "0.05", "--no-history"],
], ids=["probe", "bench", "watch"])
def test_a_url_with_a_query_is_asked_at_the_right_paths(server: tuple[int, Path], args: list[str]):
    port, log = server
    before = log.stat().st_size
    r = run_firstlight(*args[:1], f"http://127.0.0.1:{port}/?api_key={KEY}", *args[1:], timeout=120)
    assert r.rc == 0, (r.stdout + r.stderr)[-3000:]
    assert KEY not in r.stdout + r.stderr
    with open(log) as f:
        f.seek(before)
        asked = f.read()
    assert f"/v1/completions?api_key={KEY}" in asked, asked[-2000:]  # the path, then the query
    assert f"?api_key={KEY}/" not in asked


def test_up_with_a_query_in_its_url_reaches_ready(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", "--poll-min", "0.05", "--url",
                       f"http://127.0.0.1:{port}/?api_key={KEY}", "--",
                       *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0.5"))
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["verdict"] == "ready"
    assert KEY not in r.stdout + r.stderr
