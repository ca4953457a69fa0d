"""Replay the engine fixtures (tests/fixtures/engines/, built from the engines' real wording) and check
the report's structure, timestamps, JSON form and text rendering.

The in-process tests of this subject; the others: ``tests/e2e/logreplay/test_live_vs_replay.py``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from firstlight.engines import FAILURE_CATEGORIES, PHASES
from firstlight.logreplay import ReplayReport, replay_lines, replay_log
from firstlight.report.replay_text import format_replay_text
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import SHARED, require
from tests.support.live_vs_replay import _index

FIXTURES = _FIXTURES / "engines"


def _rows() -> list[dict[str, str]]:
    with (FIXTURES / "INDEX.tsv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


ROWS = _rows()


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_fixture(row: dict[str, str]) -> None:
    rep = replay_log(FIXTURES / row["file"])
    assert rep.engine == row["engine"]
    assert rep.outcome == row["outcome"], rep.evidence
    assert rep.phase in row["phase"].split("|"), rep.phases
    assert rep.failure in row["failure"].split("|"), rep.evidence
    # the same log given as lines (and with the engine forced) gives the same verdict
    with (FIXTURES / row["file"]).open(encoding="utf-8", errors="replace", newline="") as fh:
        rep2 = replay_lines(fh, engine=row["engine"])
    assert (rep2.outcome, rep2.phase, rep2.failure) == (rep.outcome, rep.phase, rep.failure)


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_report_shape(row: dict[str, str]) -> None:
    rep = replay_log(FIXTURES / row["file"])
    d = rep.to_dict()
    json.dumps(d)  # serialisable
    for key in (
        "engine",
        "outcome",
        "phase",
        "failure",
        "hint",
        "evidence",
        "phases",
        "serving_failure",
        "lines",
    ):
        assert key in d
    assert rep.outcome in ("ready", "failed", "incomplete")
    assert rep.phase in PHASES
    assert rep.failure == "none" or rep.failure in FAILURE_CATEGORIES
    for p in rep.phases:
        assert set(p) >= {"name", "line", "timestamp"}
        assert p["name"] in PHASES
    lines = [p["line"] for p in rep.phases]
    assert lines == sorted(lines)
    for ev in rep.evidence:
        assert len(ev["text"]) <= 300
    text = format_replay_text(rep)
    assert rep.outcome.upper() in text
    if rep.outcome == "failed":
        assert rep.failure in text and rep.hint is not None and rep.hint in text


def test_timestamps_vllm_and_tgi() -> None:
    rep = replay_log(FIXTURES / "vllm-v1-ready.log")
    ts = {p["name"]: p["timestamp"] for p in rep.phases}
    # "INFO 07-21 09:00:17" -> same year as the parser's guess; durations are what matters
    assert ts["ready"] is not None and ts["weights_loading"] is not None
    assert ts["ready"] - ts["weights_loading"] == pytest.approx(22.0)
    rep = replay_log(FIXTURES / "tgi-ready.log")
    ts = {p["name"]: p["timestamp"] for p in rep.phases}
    assert ts["ready"] == pytest.approx(1736510424.1)  # 2025-01-10T12:00:24.1Z


def test_timestamps_sglang_full_and_time_only() -> None:
    rep = replay_lines(
        [
            "[2025-08-11 02:20:13 TP0] Load weight begin. avail mem=78.58 GB",
            "[2025-08-11 02:20:20 TP0] Capture cuda graph begin. This can take up to several minutes.",
            "[2025-08-11 02:20:30] The server is fired up and ready to roll!",
        ]
    )
    assert [p["timestamp"] for p in rep.phases] == [1754878813.0, 1754878820.0, 1754878830.0]
    rep = replay_lines(
        [
            "[23:59:58 TP0] Load weight begin. avail mem=78.58 GB",
            "[00:00:03 TP0] Capture cuda graph begin. This can take up to several minutes.",
        ],
        engine="sglang",
    )
    t0, t1 = (p["timestamp"] for p in rep.phases)
    assert t1 - t0 == pytest.approx(5.0)  # rolls over midnight


def test_one_line_stamped_a_century_off_keeps_the_logs_clock_and_a_real_move_to_another_day_follows() -> None:
    """A log's clock moving more than a day (MAX_CLOCK_JUMP_S) at one line is that line's bad stamp unless the next
    dated line goes there too: no century-long phase in the anatomy; a start resumed two days later is followed
    from its second line there."""
    from firstlight.logreplay import MAX_CLOCK_JUMP_S

    assert MAX_CLOCK_JUMP_S == 86_400.0
    lines = [
        "[2025-08-11 02:20:13 TP0] Load weight begin. avail mem=78.58 GB",
        "[2125-08-11 02:20:20 TP0] Capture cuda graph begin. This can take up to several minutes.",
        "[2025-08-11 02:20:25 TP0] Capture cuda graph end. Time elapsed: 5.00 s",
        "[2025-08-11 02:20:30] The server is fired up and ready to roll!",
    ]
    rep = replay_lines(lines, engine="sglang")
    assert rep.outcome == "ready"
    assert [p["timestamp"] for p in rep.phases] == [1754878813.0, None, 1754878830.0]  # the bad stamp: not a time
    assert rep.anatomy is not None
    assert all(p["seconds"] < 60 for p in rep.anatomy["phases"]), rep.anatomy["phases"]
    assert rep.anatomy["total_s"] == pytest.approx(17.0, abs=0.01)
    # the same log moved on by two days at the graphs (two dated lines there): its clock follows
    later = [lines[0], lines[1].replace("2125-08-11", "2025-08-13"), lines[2].replace("2025-08-11", "2025-08-13"),
             lines[3].replace("2025-08-11", "2025-08-13")]
    rep = replay_lines(later, engine="sglang")
    assert [p["timestamp"] for p in rep.phases] == [1754878813.0, None, 1754878813.0 + 2 * 86_400 + 17]
    # a jump of exactly a day is the clock's own move, at once
    rep = replay_lines([lines[0], lines[1].replace("2125-08-11 02:20:20", "2025-08-12 02:20:13"), lines[3]],
                       engine="sglang")
    assert [p["timestamp"] for p in rep.phases][:2] == [1754878813.0, 1754878813.0 + 86_400]


def test_serving_failure_after_ready_keeps_outcome_ready() -> None:
    lines = (FIXTURES / "vllm-v1-ready.log").read_text(encoding="utf-8").splitlines()
    lines += [
        "(EngineCore_0 pid=4301) ERROR 07-21 09:10:00 [core.py:634] torch.OutOfMemoryError: CUDA out of "
        "memory.",
        "(APIServer pid=4120) ERROR 07-21 09:10:00 [async_llm.py:420] EngineDeadError: EngineCore "
        "encountered an issue.",
    ]
    rep = replay_lines(lines)
    assert rep.outcome == "ready" and rep.failure == "none"
    assert rep.serving_failure is not None
    assert rep.serving_failure["category"] == "oom"
    assert "Serving failure" in format_replay_text(rep)


def test_root_cause_beats_wrapper_in_either_order() -> None:
    wrapper_first = [
        "[2025-06-01 10:00:06 TP0] Load weight begin. avail mem=78.58 GB",
        "[2025-06-01 10:00:07 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/model_executor/model_runner.py", line 1, in load_model',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
        "[2025-06-01 10:00:07] Received sigquit from a child process. It usually means the child failed.",
    ]
    rep = replay_lines(wrapper_first)
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "weights_loading", "oom")
    root_first = [
        "INFO 05-07 02:13:52 [gpu_model_runner.py:1347] Starting to load model x...",
        "ERROR 05-07 02:14:18 [core.py:396] safetensors_rust.SafetensorError: Error while deserializing "
        "header: "
        "HeaderTooLarge",
        "ERROR 05-07 02:14:18 [core.py:396] EngineCore failed to start.",
    ]
    rep = replay_lines(root_first)
    assert (rep.engine, rep.outcome, rep.failure) == ("vllm", "failed", "corrupt_weights")


def test_non_fatal_warning_alone_is_not_a_failure() -> None:
    rep = replay_lines(
        [
            "[2025-06-01 10:00:05 TP0] Init torch distributed begin.",
            '[2025-06-01 10:00:05 TP0] Failed to import pynvml with ModuleNotFoundError("No module named '
            "'x'\")",
            "ModuleNotFoundError: No module named 'amdsmi'",
            "[2025-06-01 10:00:06 TP0] Load weight begin. avail mem=78.58 GB",
        ]
    )
    assert (rep.outcome, rep.phase, rep.failure) == ("incomplete", "weights_loading", "none")
    assert rep.hint  # a stall note for the phase


def test_unknown_engine_name_raises_value_error(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("hello\n")
    with pytest.raises(ValueError, match="valid engines"):
        replay_log(log, engine="nope")
    rep = replay_log(log)
    assert rep.engine == "generic" and rep.outcome == "incomplete" and rep.lines == 1


def test_empty_log(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_bytes(b"")
    rep = replay_log(log)
    assert rep.lines == 0 and rep.outcome == "incomplete" and rep.phase == "process_start"
    assert "INCOMPLETE" in format_replay_text(rep)


def test_report_is_json_roundtrippable() -> None:
    rep = replay_log(FIXTURES / "llamacpp-oom.log")
    d = json.loads(json.dumps(rep.to_dict()))
    assert ReplayReport(**d).to_dict() == d


SHARED_LOGS = SHARED / "logs"


def test_the_shared_logs_are_here() -> None:
    require((SHARED_LOGS / "INDEX.tsv").is_file(), f"the real startup logs at {SHARED_LOGS}")
    assert len(_index(SHARED_LOGS)) >= 30
