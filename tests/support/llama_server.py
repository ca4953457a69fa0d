"""Helpers shared by tests/e2e/deploy/test_prometheus_fleet.py, tests/e2e/hostile/test_ports.py,
tests/e2e/llama/test_anatomy.py, tests/e2e/llama/test_readiness.py, tests/e2e/llama/test_report.py,
tests/e2e/llama/test_rpc_group.py, tests/e2e/llama/test_server.py, tests/e2e/llama/test_serving.py,
tests/e2e/llama/test_spec.py, tests/e2e/llama/test_units.py, tests/e2e/llama/test_wire.py,
tests/e2e/api/test_api.py, tests/e2e/pytest_plugin/test_pytest_plugin.py, tests/support/api.py,
tests/unit/bench/test_spec.py, tests/unit/api/test_api.py, tests/unit/pytest_plugin/test_pytest_plugin.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.common import REPO, require

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


SLOW_LOAD = ["-c", "65536"]


@pytest.fixture(scope="session")
def llama() -> dict[str, str]:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        why = f"llama-server or the model is not in the cache ({p.stderr.strip()[-200:]}); " \
              "run: python scripts/setup_llama_server.py"
        require(False, why)
    return json.loads(p.stdout)


def server_cmd(llama: dict[str, str], port: int, *extra: str, model: str | None = None) -> list[str]:
    return [llama["llama_server"], "-m", model or llama["model"], "--host", "127.0.0.1", "--port", str(port),
            "-np", "1", "--metrics", *(extra or ("-c", "2048"))]
