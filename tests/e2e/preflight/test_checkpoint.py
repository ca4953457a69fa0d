"""The checkpoint check (``firstlight.preflight.checkpoint``) at its edges, on real files: every way a header, an
index or a directory can be wrong, and what the check then says. Written to kill the mutants scripts/mutation.sh
found surviving (test_preflight.py covers the main cases and the CLI).

The process-starting tests of this subject; the others: ``tests/unit/preflight/test_checkpoint.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from firstlight.preflight.checkpoint import (
    MAX_FULL_PARSE,
    scan_checkpoint,
)
from tests.support.checkpoint import _gguf, _raw_safetensors

# The child's own peak: ru_maxrss keeps the high-water mark of the process it was forked from (Linux carries it
# across exec), so a child of a big pytest worker read 474 MiB in a full run. Writing 5 to clear_refs resets
# VmHWM to what the child holds now.
PARSE_IN_A_CHILD = """
import sys
from pathlib import Path
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
from firstlight.preflight.checkpoint import safetensors_header
p = Path(sys.argv[1])
print(safetensors_header(p, p.stat().st_size)[1])
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")))  # KiB
"""


def test_a_huge_header_that_needs_the_full_parse_is_refused_unparsed(tmp_path: Path):
    """A 40 MB header of a million small entries with float offsets (not the writer's layout): json would take
    ~0.5 GB to parse it; it is a fail naming why, read by the byte scan only."""
    entry = b'"t%07d": {"dtype": "U8", "shape": [1], "data_offsets": [%d.0, %d.0]}'
    header = b"{" + b", ".join(entry % (i, i, i + 1) for i in range(600_000)) + b"}"
    assert len(header) > MAX_FULL_PARSE
    p = tmp_path / "m.safetensors"
    _raw_safetensors(p, header, 600_000)
    out = subprocess.run([sys.executable, "-c", PARSE_IN_A_CHILD, str(p)], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out[0].startswith("m.safetensors: a ") and "header not in the layout the safetensors writer uses" in out[0]
    assert int(out[1]) < 300 * 1024, f"peak RSS {int(out[1]) // 1024} MiB"  # the header (~45 MB) read once


NOBODY = 65534


def test_a_gguf_this_user_cannot_read_is_named_with_the_reason(tmp_path: Path):
    """An operator who is not root checking a model that root wrote 0600: the file is named, with the system's
    reason, and the check fails (never a traceback). Run as the user nobody in a forked child when the test runs
    as root (root reads every file)."""
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="firstlight-unreadable-"))  # /tmp: the pytest base dir is 0700
    try:
        top.chmod(0o755)
        p = top / "m.gguf"
        _gguf(p)
        assert scan_checkpoint(p).problems == []  # readable; also ties this test to the scan for mutation runs
        p.chmod(0)
        if os.geteuid() != 0:
            problems = scan_checkpoint(p).problems
        else:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: drop to nobody, scan, say what it found
                try:
                    os.close(r)
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                    os.write(w, json.dumps(scan_checkpoint(p).problems).encode())
                finally:
                    os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                out = f.read()
            os.waitpid(pid, 0)
            problems = json.loads(out)
        assert problems == ["m.gguf: cannot read (Permission denied)"]
    finally:
        p.chmod(0o600)
        subprocess.run(["rm", "-rf", str(top)], check=False, timeout=60)
