"""One log line can't freeze firstlight (issue 15, item 8): every per-line pattern is linear and sees a bounded
prefix of the line. Asserted on the work done (the length of what each pattern is given), never on wall time;
and replay reads a non-seekable file (a ``<(zcat log.gz)`` process substitution).

The process-starting tests of this subject; the others: ``tests/unit/test_logtext.py``.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.common import REPO, firstlight_cmd


def test_replay_reads_a_process_substitution(tmp_path: Path):
    """`firstlight replay <(zcat log.gz)`: a /dev/fd path that can be read only once."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is needed for a process substitution")
    src = REPO / "tests" / "fixtures" / "engines" / "vllm-v0-oom-profile.log"
    gz = tmp_path / "log.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    cmd = " ".join(firstlight_cmd("replay", "--json"))
    p = subprocess.run([bash, "-c", f'{cmd} <(gzip -dc "$0")', str(gz)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1, p.stderr[-2000:]
    assert '"failure": "oom"' in p.stdout and '"engine": "vllm"' in p.stdout
