"""The wire layer against the real llama-server: one server watched by URL alone (engine identified by its
endpoints through the wire, the user's --health-path kept), probed and benchmarked through a base URL that
ends in /v1, as users paste it from their OpenAI client settings."""

from __future__ import annotations

import subprocess

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight
from tests.support.llama_server import FAST, SLOW_LOAD, llama, server_cmd  # noqa: F401 - llama is a fixture

pytestmark = pytest.mark.llama


def test_watch_probe_and_bench_agree_on_a_real_server_behind_a_v1_url(llama: dict[str, str]):  # noqa: F811
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(server_cmd(llama, port, *SLOW_LOAD), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        watch = run_firstlight("watch", url, "--json", "--health-path", "/health", "--timeout", "120", *FAST)
        probe = run_firstlight("probe", url, "--level", "generation", "--timeout", "20")
        bench = run_firstlight("bench", url, "--requests", "2", "--warmup", "0", "--output-len", "8",
                               "--no-history", "--json")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert watch.rc == 0, watch.stderr[-3000:]
    assert watch.summary["engine"] == "llamacpp"  # identified by its endpoints, through the wire
    assert probe.rc == 0, probe.stderr
    assert bench.rc == 0, bench.stderr
    ran = bench.events[-1]
    assert ran["model"] and ran["model"].endswith(".gguf") and ran["bench"]["completed"] == 2
