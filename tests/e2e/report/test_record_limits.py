"""A ``--record`` that cannot be written (a file-size limit, a full disk) is one warning: the verdict, the history
and the report stay (issue 32). The limit is a real RLIMIT_FSIZE on firstlight, SIGXFSZ ignored, so a write past
it fails with EFBIG as on a full disk."""

from __future__ import annotations

import resource
import signal
import sys
from pathlib import Path

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd

LIMIT = 1 << 20  # bytes any file firstlight writes may reach

# The server prints 2 MB of lines (the record passes the limit while it starts), then serves.
CHATTY = "import sys\nfor i in range(20000):\n    print(f'loading shard {i:05d} ' + 'x' * 80, flush=False)\n"


def _limited() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.mark.parametrize("extra", [[], ["--report", "REPORT"]], ids=["history", "history+report"])
def test_a_record_past_the_file_size_limit_is_one_warning_and_the_verdict_stands(tmp_path: Path, weights: Path,
                                                                                extra: list[str]):
    port = free_port()
    record, history = tmp_path / "run.jsonl", tmp_path / "history.sqlite3"
    extra = [str(tmp_path / "report.html") if a == "REPORT" else a for a in extra]
    server = " ".join(sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0.5"))
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    r = run_firstlight("up", "--json", "--stop-when-ready", "--record", str(record), "--history", str(history),
                       "--quiet-server", *extra, "--poll-min", "0.05", "--sample-interval", "0.2", "--url", f"http://127.0.0.1:{port}",
                       "--", "sh", "-c", f"{sys.executable} {script}; exec {server}", preexec_fn=_limited)
    assert "internal error" not in r.stderr, r.stderr[-3000:]
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["verdict"] == "ready" and r.summary["server_stopped"].startswith("stopped")
    warnings = [e for e in r.events if e["event"] == "message" and "--record" in e["message"]
                and "cannot write" in e["message"]]  # stdout: stderr drops lines under the echoed flood
    assert len(warnings) == 1, r.stdout[-3000:]
    assert record.stat().st_size <= LIMIT
    assert isinstance(r.summary.get("history_run"), int), r.summary  # the run is in the history all the same
    if extra:
        assert (tmp_path / "report.html").stat().st_size > 0


def test_a_record_on_a_full_disk_with_the_history_on_is_one_warning(tmp_path: Path, weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--record", "/dev/full", "--history",
                       str(tmp_path / "history.sqlite3"), "--poll-min", "0.05", "--sample-interval", "0.2", "--",
                       *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0.5"))
    assert "internal error" not in r.stderr, r.stderr[-3000:]
    assert r.rc == 0 and r.summary["verdict"] == "ready", r.stderr[-3000:]
    said = [e["message"] for e in r.events if e["event"] == "message"]
    assert len([m for m in said if "--record /dev/full: cannot write" in m]) == 1, said
    assert isinstance(r.summary.get("history_run"), int), r.summary
