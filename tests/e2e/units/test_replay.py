"""``replay --unit --journal-file`` on real journal files built from every labelled real log in ../shared/logs:
each log is the unit's last invocation, after a failed one, and the replay gives the labelled outcome, phase
and failure, the same report as replaying the log file itself, and picks the last invocation."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from firstlight.cli import main as cli_main
from firstlight.logreplay import replay_log
from tests.support.common import SHARED
from tests.support.journal_export import UnitRun, journal_remote, write_journal

LOGS = SHARED / "logs"
INDEX = LOGS / "INDEX.tsv"
UNIT = "llm.service"
FIRST_FAILED = "sglang-nccl-unhandled-system-error.log"
OTHER_FAILED = "vllm-free-memory-less-than-utilization.log"


def _labels() -> list[dict[str, str]]:
    if not INDEX.is_file():
        return []
    with INDEX.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


LABELS = _labels()


@pytest.fixture(autouse=True)
def _needs_logs() -> None:
    if not INDEX.is_file():
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"in CI the shared logs must be there: {INDEX}")
        pytest.skip(f"shared logs not found at {LOGS}")
    journal_remote()


def log_lines(path: Path) -> list[bytes]:
    """A log file's lines as journald's stdout stream stores them: split at newlines, bytes kept as they are."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    return lines[:-1] if data.endswith(b"\n") else lines


def build(tmp_path: Path, first: str, last: str) -> tuple[Path, UnitRun, UnitRun]:
    a = UnitRun(UNIT, 1_790_000_000.0, pid=1001)
    a.started()
    a.lines(log_lines(LOGS / first))
    a.main_exited(1, restart=1)
    b = UnitRun(UNIT, 1_790_003_600.0, pid=2002)
    b.started()
    b.lines(log_lines(LOGS / last))
    path = tmp_path / f"{Path(last).stem}.journal"
    write_journal(path, bytes(a.out + b.out))
    return path, a, b


def replay_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    with pytest.raises(SystemExit) as e:
        cli_main(["replay", "--json", *args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), json.loads(out) if out.strip() else {}, err


@pytest.mark.parametrize("label", LABELS, ids=[r["file"] for r in LABELS])
def test_journal_replay_gives_the_labelled_result(label: dict[str, str], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]):
    first = FIRST_FAILED if label["file"] != FIRST_FAILED else OTHER_FAILED
    path, _, last = build(tmp_path, first, label["file"])
    rc, report, err = replay_cli(capsys, "--unit", "llm", "--journal-file", str(path))
    assert f"invocation {last.invocation}" in err and "(2 of 2" in err
    assert report["outcome"] in label["outcome"].split("|"), report["evidence"]
    assert report["phase"] in label["phase"].split("|")
    assert report["failure"] in label["failure"].split("|")
    assert report["engine"] == label["engine"]
    assert rc == {"ready": 0, "failed": 1}.get(report["outcome"], 3)
    # the same report, key for key, as the log file's own replay, except that the phases carry the journal's
    # own times (a log without timestamps has none)
    from_file = replay_log(LOGS / label["file"]).to_dict()
    strip = [{k: v for k, v in p.items() if k != "timestamp"} for p in report["phases"]]
    assert strip == [{k: v for k, v in p.items() if k != "timestamp"} for p in from_file["phases"]]
    # the anatomy too, but for its times (a phase's lines without timestamps have no duration): the same phases
    assert [p["name"] for p in report["anatomy"]["phases"]] == [p["name"] for p in from_file["anatomy"]["phases"]]
    # the engine's own clock too, but for firstlight's side of it (its seconds come from the lines' times, here the
    # journal's, written milliseconds apart): the same stages with the engine's same figures
    def engine_side(r: dict) -> list[tuple[object, ...]] | None:
        clock = r.get("engine_clock")
        return None if clock is None else [(p["stage"], p["phase"], p["engine_s"]) for p in clock["phases"]]

    assert engine_side(report) == engine_side(from_file)
    timeless = {"phases": None, "anatomy": None, "engine_clock": None}
    assert {**report, **timeless} == {**from_file, **timeless}
    assert all(p["timestamp"] is not None for p in report["phases"])  # every journal entry has its time


def test_invocation_picks_an_earlier_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path, first, _ = build(tmp_path, FIRST_FAILED, "sglang-llama31-8b-cudagraph-2024.log")
    rc, report, _ = replay_cli(capsys, "--unit", UNIT, "--journal-file", str(path))
    assert (rc, report["outcome"]) == (0, "ready")
    rc, report, err = replay_cli(capsys, "--unit", UNIT, "--journal-file", str(path),
                                 "--invocation", first.invocation[:10])
    assert (rc, report["outcome"], report["failure"]) == (1, "failed", "nccl")
    assert "(1 of 2" in err


def test_journalctl_json_output_replays_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path, _, _ = build(tmp_path, FIRST_FAILED, "vllm-enginecore-failed-after-torch-compile.log")
    dump = tmp_path / "dump.json"
    with open(dump, "wb") as f:
        subprocess.run(["journalctl", "--file", str(path), "-o", "json", "--no-pager"], stdout=f, check=True,
                       timeout=60)
    rc, report, _ = replay_cli(capsys, "--unit", UNIT, "--journal-file", str(dump))
    assert (rc, report["outcome"], report["engine"]) == (1, "failed", "vllm")


@pytest.mark.parametrize("args, message", [
    (["--unit", UNIT], "needs --journal-file"),
    (["--unit", "nosuch", "--journal-file", "{journal}"], "no entries of nosuch.service"),
    (["--unit", UNIT, "--journal-file", "{journal}", "--invocation", "feedfacefeedface"], "no invocation"),
    (["--unit", UNIT, "--journal-file", "{missing}"], "not a readable file"),
    (["--unit", "bad name", "--journal-file", "{journal}"], "not a unit name"),
    (["{log}", "--unit", UNIT, "--journal-file", "{journal}"], "not both"),
])
def test_bad_input_is_one_line_and_exit_64(args: list[str], message: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]):
    path, _, _ = build(tmp_path, FIRST_FAILED, OTHER_FAILED)
    values = {"journal": str(path), "missing": str(tmp_path / "nope.journal"), "log": str(LOGS / FIRST_FAILED)}
    rc, report, err = replay_cli(capsys, *[a.format(**values) for a in args])
    assert rc == 64 and report == {}
    assert message in err and "Traceback" not in err
