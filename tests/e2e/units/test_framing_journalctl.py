"""Real journalctl output, every format, read as firstlight reads a log: the shared real logs stored in a real journal
file (systemd-journal-remote, as tests/journal_export.py builds them) and printed by the real `journalctl -o FORMAT`
replay to the engine, outcome, phase and failure of their plain form (firstlight.framing peels each line)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from firstlight.logreplay import replay_log
from tests.support.journal_export import UnitRun, write_journal

LOGS = Path(__file__).resolve().parents[3].parent / "shared" / "logs"
CASES = ("llamacpp-ready-serving.log", "sglang-nccl-unhandled-system-error.log",
         "vllm-free-memory-less-than-utilization.log", "tgi-oom-cuda-graph-during-warmup.log")
FORMATS = ("short", "short-iso", "short-precise", "short-iso-precise", "json", "export")


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name in CASES:
        run = UnitRun("engine.service", t0=1746584032.0)
        run.started()
        for line in (LOGS / name).read_bytes().split(b"\n"):
            if line.strip():  # journald stores no empty line
                run.line(line)
        path = tmp_path_factory.mktemp("journal") / f"{name}.journal"
        write_journal(path, bytes(run.out))
        out[name] = path
    return out


def _key(path: Path) -> tuple[str, str, str, str]:
    rep = replay_log(path)
    return rep.engine, rep.outcome, rep.phase, rep.failure


@pytest.mark.parametrize("fmt", FORMATS)
def test_journalctl_output_replays_as_the_plain_log(fmt: str, journals: dict[str, Path], tmp_path: Path) -> None:
    wrong = []
    for name, journal in journals.items():
        p = subprocess.run(["journalctl", "--file", str(journal), "-o", fmt, "--all", "--no-pager",
                            "-u", "engine.service"], capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-500:]
        captured = tmp_path / f"{name}.{fmt}"
        captured.write_bytes(p.stdout)
        if _key(captured) != _key(LOGS / name):
            wrong.append(f"{name}: {_key(captured)} != plain {_key(LOGS / name)}")
    assert not wrong, "\n".join(wrong)
