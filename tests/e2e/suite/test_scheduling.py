"""The suite's scheduler under pytest-xdist (tests/support/scheduling.py), on a real ``pytest -n 2`` over a small
suite where tests end their own worker: the run ends, each such test fails once, and every other test runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.common import REPO

CONFTEST = """
from tests.support.scheduling import TogetherScheduling

def pytest_xdist_make_scheduler(config, log):
    return TogetherScheduling(config, log, together=("test_together.py",))
"""

RAN = """
import os, signal
from pathlib import Path

def ran(name):
    with open(Path(__file__).parent / "ran.txt", "a") as f:
        f.write(name + "\\n")
"""


def _suite(root: Path) -> None:
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_a.py").write_text("".join(f"def test_a{i}():\n    pass\n" for i in range(8)))
    # a stop signal with no handler: the default action ends the worker, as SIGTERM did in CI
    (root / "test_crash.py").write_text(RAN + "def test_killed():\n    ran('killed')\n"
                                        "    os.kill(os.getpid(), signal.SIGTERM)\n")
    # one unit of three: the worker dies on the second; the third still runs, on the replacement worker
    (root / "test_together.py").write_text(RAN + "def test_1():\n    ran('together 1')\n"
                                           "def test_2():\n    ran('together 2')\n    os._exit(3)\n"
                                           "def test_3():\n    ran('together 3')\n")
    (root / "test_z.py").write_text("".join(f"def test_z{i}():\n    pass\n" for i in range(8)))


def test_a_worker_that_dies_costs_one_failed_test_and_the_run_still_ends(tmp_path: Path):
    _suite(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider",
                              "-p", "no:randomly", "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired as e:  # xdist 3.8.0's own LoadScopeScheduling waits here for ever
        raise AssertionError(f"the run never ended after a worker died:\n{e.stdout}") from None
    out = run.stdout
    assert run.returncode == 1, out
    assert "2 failed, 18 passed" in out, out
    assert "FAILED test_crash.py::test_killed" in out and "FAILED test_together.py::test_2" in out, out
    # the test that killed its worker is not run again (it would kill the replacement too)
    ran = (tmp_path / "ran.txt").read_text().splitlines()
    assert sorted(ran) == ["killed", "together 1", "together 2", "together 3"], ran
