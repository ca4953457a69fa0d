"""--unit on the command line: what a wrong combination or a machine without systemd gets (one line, exit 64),
and a journal file watched with no invocation of the unit in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.cli import main as cli_main
from firstlight.units.systemctl import SYSTEMCTL_ENV
from tests.support.journal_export import UnitRun, journal_remote, write_journal


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        cli_main(list(args))
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.mark.parametrize("args, message", [
    (["watch"], "missing the server URL"),
    (["watch", "--journal-file", "x.journal", "http://127.0.0.1:1"], "--journal-file needs --unit"),
    (["up"], "missing the server command"),
    (["up", "--unit", "llm", "--", "llama-server"], "not both"),
    (["replay"], "missing the log file"),
    (["watch", "--unit", "llm", "--pid", "1"], "drop --pid and --log"),
    (["watch", "--unit", "llm", "--journal-file", "{missing}"], "No such file"),
    (["watch", "--unit", "llm", "--journal-file", "{text}"], "not a journal file"),
    (["watch", "--unit", "llm", "--journal-file", "{journal}"], "needs the server's URL"),
    (["watch", "--unit", "a b"], "not a unit name"),
])
def test_wrong_combinations_are_usage_errors(args: list[str], message: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]):
    journal_remote()
    journal = tmp_path / "u.journal"
    run_ = UnitRun("llm.service", 1_790_000_000.0)
    run_.line("hello")
    write_journal(journal, bytes(run_.out))
    text = tmp_path / "log.txt"
    text.write_text("not a journal\n")
    values = {"missing": str(tmp_path / "none.journal"), "text": str(text), "journal": str(journal)}
    rc, _, err = run(capsys, *[a.format(**values) for a in args])
    assert rc == 64 and message in err and "Traceback" not in err, err


def test_without_systemd_watch_unit_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]):
    fake = tmp_path / "systemctl"
    fake.write_text("#!/bin/sh\necho 'System has not been booted with systemd as init system (PID 1). "
                    "Can'\"'\"'t operate.' >&2\necho 'Failed to connect to bus: Host is down' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(SYSTEMCTL_ENV, str(fake))
    rc, _, err = run(capsys, "watch", "--unit", "sglang")
    assert rc == 64
    assert "has not been booted with systemd" in err and "--journal-file" in err
    assert "Failed to connect" not in err  # the first line only


def test_a_journal_without_the_unit_times_out_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    journal_remote()
    journal = tmp_path / "u.journal"
    other = UnitRun("other.service", 1_790_000_000.0)
    other.line("not ours")
    write_journal(journal, bytes(other.out))
    rc, out, _ = run(capsys, "watch", "--unit", "llm", "--journal-file", str(journal), "--url",
                     "http://127.0.0.1:9", "--timeout", "1", "--json", "--no-history")
    summary = json.loads(out.splitlines()[-1])
    assert rc == 3 and summary["verdict"] == "timeout"
    assert "no entries of llm.service" in summary["evidence"][0]["value"]
