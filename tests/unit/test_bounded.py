"""Numbers read from outside go through one bounded parser (firstlight/bounded.py): a framed record's time, a journal
field, an engine's startup figures, a ``Last-Event-ID`` header, a history row. Each hostile value (``1e400``, a
400-digit number, ``"²"``, ``NaN``) is no number: never a loop, never an exception, never a figure in a verdict.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from pathlib import Path

import pytest

from firstlight import framing
from firstlight.bounded import MAX_CHARS, number, whole
from firstlight.engines.clocks import MAX_SECONDS, sglang_startup_time
from firstlight.history import History
from firstlight.history.policy import MAX_METRIC, extract_metrics, metric_value
from firstlight.logreplay import ReplayReport, replay_log
from firstlight.report.events import last_event_id
from firstlight.report.readiness import parse_bind
from firstlight.units.journal.entries import parse_line
from tests.support.hostile_history import KEY, _two_runs

HUGE = int("9" * 400)
HOSTILE = [1e400, -1e400, float("nan"), HUGE, -HUGE, "9" * 400, "²", "1²", "١٢", "nan", "inf", "Infinity", "1e400",
           True, False, None, [1], {"a": 1}, b"12", "", " ", "+", "1.2.3", "0x10", "1_000"]


# -- the parser ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_hostile_value_is_no_number(value: object) -> None:
    assert number(value, -1e300, 1e300) is None


@pytest.mark.parametrize(("value", "want"), [
    (0, 0.0), (5, 5.0), (2.5, 2.5), ("2.5", 2.5), (" 7 ", 7.0), ("1e3", 1000.0), ("-1", -1.0), (".5", 0.5),
    ("5.", 5.0), ("+3", 3.0), ("1E+2", 100.0),
])
def test_plain_numbers_are_read(value: object, want: float) -> None:
    got = number(value, -10.0, 1e4)
    assert got == want and isinstance(got, float)


@pytest.mark.parametrize(("value", "low", "high", "want"), [
    (10, 0, 10, 10.0), (0, 0, 10, 0.0), (11, 0, 10, None), (-1, 0, 10, None),
    (10.0, 0, 10, 10.0), (10.000001, 0, 10, None), ("10", 0, 10, 10.0), ("10.5", 0, 10, None), ("-0.5", 0, 10, None),
])
def test_the_range_is_inclusive_and_nothing_is_clipped_into_it(value: object, low: float, high: float,
                                                                want: float | None) -> None:
    assert number(value, low, high) == want


def test_text_longer_than_the_bound_is_no_number() -> None:
    assert number("1" * MAX_CHARS, 0, math.inf) == float("1" * MAX_CHARS)
    assert number("1" * (MAX_CHARS + 1), 0, math.inf) is None


@pytest.mark.parametrize(("text", "digits", "want"), [
    ("0", 3, 0), ("123", 3, 123), ("1234", 3, None), ("", 3, None), ("²", 3, None), ("١", 3, None), ("-1", 3, None),
    (" 1", 3, None), ("1.0", 3, None), (12, 3, None), (None, 3, None),
])
def test_whole_numbers_are_ascii_digits_of_a_bounded_length(text: object, digits: int, want: int | None) -> None:
    assert whole(text, digits) == want


# -- framed records and journal fields ----------------------------------------------------------------------------
def _docker(time: object) -> str:
    return json.dumps({"log": "INFO server starting\n", "stream": "stdout", "time": time})


@pytest.mark.parametrize("time", [1e400, HUGE, "9" * 400, "²", float("nan"), -5, "1e400"], ids=repr)
def test_a_framed_records_hostile_time_is_no_time_and_the_line_is_kept(time: object) -> None:
    line = _docker(time) if not isinstance(time, float) or math.isfinite(time) else \
        '{"log": "INFO server starting\\n", "stream": "stdout", "time": %s}' % ("1e400" if time > 0 else "NaN")
    framed = framing.peel(line)
    assert framed.text == "INFO server starting"
    assert framed.ts is None


@pytest.mark.parametrize("key", ["time", "timestamp", "@timestamp", "ts"])
def test_a_shippers_time_in_seconds_milli_micro_or_nanoseconds_is_still_read(key: str) -> None:
    for value in (1_700_000_000, 1_700_000_000_000, 1_700_000_000_000_000, 1_700_000_000_000_000_000,
                  "1700000000.5"):
        got = framing.peel(json.dumps({"message": "x", key: value})).ts
        assert got is not None and abs(got - 1_700_000_000) < 1, value


@pytest.mark.parametrize("raw", ["²", "٣", "9" * 400, "12a", ""])
def test_a_journal_json_records_hostile_realtime_timestamp_is_no_time(raw: str) -> None:
    framed = framing.peel(json.dumps({"__REALTIME_TIMESTAMP": raw, "MESSAGE": "model loaded"}))
    assert framed.text == "model loaded" and framed.ts is None


def test_a_journal_export_records_hostile_realtime_timestamp_is_no_time() -> None:
    d = framing.Deframer()
    out = [f for raw in ("__CURSOR=s=1", "__REALTIME_TIMESTAMP=²", "MESSAGE=model loaded", "") for f in d.line(raw)]
    assert [f.text for f in out] == ["model loaded"] and out[0].ts is None


def test_replay_of_a_log_with_an_infinite_record_time_ends(tmp_path: Path) -> None:
    """``"time": 1e400`` once made replay loop for ever (dividing infinity by 1000); the lines after it are read."""
    log = tmp_path / "docker.log"
    lines = ['{"log":"INFO 05-07 02:13:52 api_server.py:1 vLLM API server version 0.8.5\\n","stream":"stdout",'
             '"time":1e400}',
             '{"log":"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\\n","stream":"stderr",'
             '"time":"²"}']
    log.write_text("\n".join(lines) + "\n")
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(replay_log(log)), daemon=True)
    worker.start()
    worker.join(60)
    assert done, "replay did not end within 60 s"
    report = done[0]
    assert isinstance(report, ReplayReport)
    assert (report.engine, report.outcome, report.failure, report.lines) == ("vllm", "failed", "oom", 2)


# -- an engine's startup figures, a header, a bind address ------------------------------------------------------
@pytest.mark.parametrize("value", [HUGE, "9" * 400, "²", 1e400, float("nan"), MAX_SECONDS * 2, -1])
def test_sglang_startup_figures_that_are_no_number_are_left_out(value: object) -> None:
    clocks = sglang_startup_time({"startup_time": {"load_weight": value, "cuda_graph": 3.0}}, 1.0)
    assert {c.stage: c.seconds for c in clocks} == {"cuda_graph": 3.0}


@pytest.mark.parametrize(("header", "want"), [("17", 17), ("²", 0), ("1²", 0), ("9" * 19, 0), ("9" * 18, 10**18 - 1),
                                              (None, 0), ("", 0), ("-3", 0)])
def test_last_event_id_takes_ascii_digits_only(header: str | None, want: int) -> None:
    assert last_event_id(header) == want


@pytest.mark.parametrize("spec", ["127.0.0.1:²", "²", ":65536", "1" * 400])
def test_a_bind_address_with_no_ascii_port_is_refused_in_words(spec: str) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        parse_bind(spec)


# -- the history --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [1e400, -1e400, -5.0, HUGE, "9" * 300, "²", "x", MAX_METRIC * 10])
def test_a_damaged_metric_row_is_no_figure(tmp_path: Path, value: object) -> None:
    path = tmp_path / "h.sqlite3"
    _two_runs(path)
    con = sqlite3.connect(path)
    stored = str(value) if isinstance(value, int) and value == HUGE else value  # SQLite holds 64-bit integers
    con.execute("UPDATE metrics SET value = ? WHERE run_id = (SELECT MIN(id) FROM runs)", (stored,))
    con.commit()
    con.close()
    with History(path) as h:
        runs = sorted(h.runs(), key=lambda r: r.id)
        assert "cold_start_s" not in runs[0].metrics and runs[1].metrics["cold_start_s"] == 11.0
        assert h.baseline(KEY, "cold_start_s") == 11.0
        assert [s for _, s in h.starts(KEY)] == [11.0]


def test_metric_value_bounds() -> None:
    assert metric_value(0) == 0.0 and metric_value(MAX_METRIC) == MAX_METRIC
    assert metric_value(-0.001) is None and metric_value(MAX_METRIC * 1.0001) is None


@pytest.mark.parametrize("cold", [HUGE, 1e400, float("nan"), -1.0, "12"])
def test_a_summary_whose_start_is_no_figure_records_none(cold: object) -> None:
    assert extract_metrics({"verdict": "ready", "cold_start_s": cold}, None) == {}


def test_a_summarys_figures_are_recorded() -> None:
    bench = {"output_throughput": 120.5, "request_throughput": HUGE, "ttft_ms": {"median": 30}, "itl_ms": {}}
    assert extract_metrics({"verdict": "ready", "cold_start_s": 12}, bench) == {
        "cold_start_s": 12.0, "output_throughput": 120.5, "ttft_median_ms": 30.0}


# -- nesting ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [2, 600, 900])
def test_a_journal_json_message_nested_deep_is_no_value_and_never_a_recursion(depth: int) -> None:
    """journalctl nests one level (a repeated field's values); a MESSAGE nested deeper once exited 70."""
    line = '{"__REALTIME_TIMESTAMP":"1700000000000000","MESSAGE":' + "[" * depth + '"x"' + "]" * depth + "}"
    framed = framing.peel(line)
    assert framed.text == "" and framed.ts == 1_700_000_000.0
    entry = parse_line(line)
    assert entry is not None and entry.message is None


def test_a_journal_json_repeated_message_is_its_values_as_lines() -> None:
    line = json.dumps({"__REALTIME_TIMESTAMP": "1700000000000000", "MESSAGE": ["a", [98], None, "c"]})
    assert framing.peel(line).text == "a\nb\nc"
    entry = parse_line(line)
    assert entry is not None and entry.message == "a\nb\nc"
