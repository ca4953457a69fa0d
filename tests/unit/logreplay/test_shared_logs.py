"""Replay every real startup log in ../shared/logs/ and compare with its INDEX.tsv labels.

Labels: outcome, phase and failure (``|`` separates alternatives that are all right). The engine is
detected from the log (the INDEX's engine column is checked too). A score table is printed whatever the
capture mode (``capsys.disabled``), then the test asserts every log matches.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pytest

from firstlight.logreplay import ReplayReport, replay_log
from tests.support.common import REPO as _REPO

LOGS = _REPO.parent / "shared" / "logs"
INDEX = LOGS / "INDEX.tsv"



@dataclass(frozen=True)
class Expected:
    file: str
    engine: str
    outcome: tuple[str, ...]
    phase: tuple[str, ...]
    failure: tuple[str, ...]


def _load_index() -> list[Expected]:
    if not INDEX.is_file():
        return []
    with INDEX.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [
        Expected(
            r["file"],
            r["engine"],
            tuple(r["outcome"].split("|")),
            tuple(r["phase"].split("|")),
            tuple(r["failure"].split("|")),
        )
        for r in rows
    ]


EXPECTED = _load_index()


def test_the_real_logs_are_here(shared_logs: Path) -> None:
    assert len(EXPECTED) >= 30


def _mismatches(exp: Expected, rep: ReplayReport) -> list[str]:
    out = []
    if rep.engine != exp.engine:
        out.append(f"engine {rep.engine} != {exp.engine}")
    if rep.outcome not in exp.outcome:
        out.append(f"outcome {rep.outcome} not in {exp.outcome}")
    if rep.phase not in exp.phase:
        out.append(f"phase {rep.phase} not in {exp.phase}")
    if rep.failure not in exp.failure:
        out.append(f"failure {rep.failure} not in {exp.failure}")
    return out


@pytest.mark.parametrize("exp", EXPECTED, ids=[e.file for e in EXPECTED])
def test_shared_log(exp: Expected) -> None:
    rep = replay_log(LOGS / exp.file)
    assert not _mismatches(exp, rep), f"{exp.file}: {_mismatches(exp, rep)}\nevidence: {rep.evidence}"
    # evidence points at real lines
    for ev in rep.evidence:
        assert 1 <= ev["line"] <= rep.lines
        assert ev["what"] in ("failure", "phase", "ready")
    if rep.outcome == "failed":
        assert any(ev["what"] == "failure" for ev in rep.evidence)
        assert rep.hint


def test_index_covers_every_log() -> None:
    listed = {e.file for e in EXPECTED}
    on_disk = {p.name for p in LOGS.glob("*.log")}
    assert on_disk <= listed, f"logs without labels: {sorted(on_disk - listed)}"


def test_zz_score_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Score on the whole folder; printed even without -s."""
    rows = []
    ok = 0
    for exp in EXPECTED:
        rep = replay_log(LOGS / exp.file)
        bad = _mismatches(exp, rep)
        ok += not bad
        rows.append(
            f"{'ok ' if not bad else 'BAD'} {exp.file[:52]:52} {rep.engine:9} {rep.outcome:10} "
            f"{rep.phase:16} {rep.failure:16}{'  <- ' + '; '.join(bad) if bad else ''}"
        )
    table = "\n".join(
        [
            "",
            f"shared logs replay score: {ok}/{len(EXPECTED)} (engine, outcome, phase, failure all right)",
            f"    {'file':52} {'engine':9} {'outcome':10} {'phase':16} {'failure':16}",
            *rows,
            "",
        ]
    )
    with capsys.disabled():
        print(table)
    assert ok == len(EXPECTED), table
