"""preflight/gpus.py: which GPUs the server will use, who else holds memory on them, and the engines' own start-up
memory rules, each at its edge. The GPUs are recorded NVML snapshots (no GPU on this machine); the processes
holding memory are real processes.

The process-starting tests of this subject; the others: ``tests/unit/preflight/test_gpus.py``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from firstlight.preflight.base import FAIL, OK, WARN
from firstlight.preflight.gpus import GIB
from firstlight.redact import Redactor
from tests.support.preflight_gpus import check_gpus, dev, reading, tgt

SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "/m"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield p
    p.kill()
    p.wait()


# -- other processes on the GPUs -------------------------------------------------------------------------------
def test_a_foreign_process_on_a_used_gpu_is_a_warning_naming_it(sleeper: subprocess.Popen[bytes]):
    r = reading(dev(75 * GIB, [{"pid": sleeper.pid, "used_gpu_memory": 5 * GIB}]), dev(75 * GIB))
    c = check_gpus(tgt([*SGLANG, "--tp", "2"]), r)
    assert c.status == WARN and c.category == "gpu_occupied", c
    assert f"; GPU 0: 5.0 GiB held by PID {sleeper.pid} python" in c.evidence, c
    assert c.evidence.endswith("-c import time; time.sleep(120)"), c
    assert c.hint == f"kill {sleeper.pid}"


def test_every_foreign_holder_is_in_the_fix_of_a_warning(sleeper: subprocess.Popen[bytes]):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        r = reading(dev(75 * GIB, [{"pid": sleeper.pid, "used_gpu_memory": GIB},
                                   {"pid": other.pid, "used_gpu_memory": GIB}]))
        c = check_gpus(tgt(SGLANG), r)
    finally:
        other.kill()
        other.wait()
    assert c.status == WARN and c.hint == f"kill {sleeper.pid} or kill {other.pid}", c


def test_a_foreign_holders_command_line_is_shown_through_the_redactor():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "hunter2-password-value"])
    try:
        r = reading(dev(75 * GIB, [{"pid": p.pid, "used_gpu_memory": GIB}]))
        c = check_gpus(tgt(SGLANG), r, Redactor(["hunter2-password-value"]))
    finally:
        p.kill()
        p.wait()
    assert c.status == WARN and "time.sleep(120)" in c.evidence, c
    assert "hunter2-password-value" not in c.evidence


def test_a_foreign_process_of_unknown_size_is_shown_with_a_question_mark(sleeper: subprocess.Popen[bytes]):
    r = reading(dev(75 * GIB, [{"pid": sleeper.pid}]))
    c = check_gpus(tgt(["llama-server", "-m", "m.gguf"]), r)
    assert c.status == WARN and f"GPU 0: ? held by PID {sleeper.pid} " in c.evidence, c


def test_a_process_on_a_gpu_the_server_will_not_use_is_ignored(sleeper: subprocess.Popen[bytes]):
    r = reading(dev(75 * GIB), dev(75 * GIB, [{"pid": sleeper.pid, "used_gpu_memory": GIB}]))
    c = check_gpus(tgt(SGLANG), r)  # TP 1: GPU 0 only
    assert c.status == OK and str(sleeper.pid) not in c.evidence, c


def test_a_failing_rule_tells_how_to_stop_each_foreign_holder_once(sleeper: subprocess.Popen[bytes]):
    two_gpus = [{"pid": sleeper.pid, "used_gpu_memory": 30 * GIB}]
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        r = reading(dev(40 * GIB, two_gpus), dev(40 * GIB, [*two_gpus, {"pid": other.pid, "used_gpu_memory": GIB}]),
                    dev(70 * GIB))
        c = check_gpus(tgt([*SGLANG, "--tp", "3"]), r)
    finally:
        other.kill()
        other.wait()
    assert c.status == FAIL and c.category == "gpu_occupied", c
    assert c.evidence.count(f"held by PID {sleeper.pid} ") == 2 and f"held by PID {other.pid} " in c.evidence
    assert c.hint == f"kill {sleeper.pid} or kill {other.pid}"
