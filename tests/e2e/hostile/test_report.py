"""``report`` never exits 70 on a hostile record or summary (issue 20): fields of the wrong type are counted and
skipped (a record line) or left out (the summary), as the record's docstring promises; a log tail of huge lines
is clipped on the page. The record and summary come from a real ``up`` of the simulator.

The process-starting tests of this subject; the others: ``tests/unit/report/test_record.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_peak_cmd, run_firstlight, sim_cmd


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    d = tmp_path_factory.mktemp("run")
    record = d / "run.jsonl"
    r = run_firstlight("up", "--json", "--no-preflight", "--stop-when-ready", "--poll-min", "0.05", "--record",
                       str(record), "--", *sim_cmd("normal", free_port(), "--load-seconds", "0.5"))
    assert r.rc == 0, r.stderr[-2000:]
    return record, r.summary


def _report(tmp_path: Path, record: Path, summary: dict[str, Any] | None = None) -> Any:
    args = [str(record), "-o", str(tmp_path / "out.html"), "--no-baseline"]
    if summary is not None:
        (tmp_path / "summary.json").write_text(json.dumps(summary))
        args += ["--summary", str(tmp_path / "summary.json")]
    return run_firstlight("report", *args, timeout=120)


SUMMARY_VARIANTS: list[tuple[str, Any]] = [
    ("started_at", "1790000000"), ("started_at", float("nan")), ("started_at", 1e308), ("ready_at", "5"),
    ("ready_at", 1e308), ("cold_start_s", "fast"), ("levels", ["health"]), ("levels", {"health": "soon"}),
    ("evidence", {"signal": "x"}), ("evidence", ["text"]), ("phases", {"ready": 1}), ("phases", [1, 2]),
    ("first_generation", ["hi"]), ("notes", 5), ("command", {"argv": 1}),
]


@pytest.mark.parametrize("key, value", SUMMARY_VARIANTS)
def test_a_summary_field_of_the_wrong_type_never_exits_70(recorded: tuple[Path, dict[str, Any]], tmp_path: Path,
                                                          key: str, value: Any):
    record, summary = recorded
    r = _report(tmp_path, record, {**summary, key: value})
    assert r.rc == 0 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert (tmp_path / "out.html").stat().st_size > 1000


RECORD_VARIANTS = [
    {"kind": "log", "t": 1.0, "text": 123}, {"kind": "log", "t": 1.0, "text": None},
    {"kind": "log", "t": 1.0, "text": ["a"]}, {"kind": "log", "t": 1.0, "text": {"a": 1}},
    {"kind": "log", "t": "1", "text": "x"}, {"kind": "log", "t": float("nan"), "text": "x"},
    {"kind": "log", "t": 1e308, "text": "x"}, {"kind": "log", "t": 1.0, "text": "x", "lineno": "3"},
    {"kind": "probe", "t": 1.0, "level": "health", "ok": "yes"}, {"kind": "process", "t": 1.0, "alive": True,
                                                                   "procs": "x"},
]


def test_record_lines_of_the_wrong_type_are_counted_and_skipped(recorded: tuple[Path, dict[str, Any]],
                                                                tmp_path: Path):
    record, _ = recorded
    hostile = tmp_path / "hostile.jsonl"
    good = record.read_text()
    t = json.loads(good.splitlines()[1])["t"]
    hostile.write_text(good + "".join(json.dumps({**v, "t": v["t"] if v["t"] != 1.0 else t}) + "\n"
                                      for v in RECORD_VARIANTS))
    r = _report(tmp_path, hostile)
    assert r.rc == 0 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert f"{len(RECORD_VARIANTS)} line(s) of" in (tmp_path / "out.html").read_text()


def test_a_log_tail_of_huge_lines_is_clipped_on_the_page(recorded: tuple[Path, dict[str, Any]], tmp_path: Path):
    record, _ = recorded
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    t = max(o["t"] for o in lines if o["kind"] == "log")
    huge = tmp_path / "huge.jsonl"
    with open(huge, "w") as f:
        f.write(record.read_text())
        for i in range(50):
            f.write(json.dumps({"kind": "log", "t": t - 0.001, "text": f"{i} " + "z" * (1 << 20), "stream": "stdout",
                                "lineno": 10_000 + i}) + "\n")
    r = _report(tmp_path, huge)
    assert r.rc == 0, r.stderr[-2000:]
    assert (tmp_path / "out.html").stat().st_size < 2 << 20  # 50 MiB of lines, a page of at most 2 MiB


def test_a_stored_timeline_that_inflates_to_hundreds_of_mb_is_refused_not_read_whole(tmp_path: Path):
    import sqlite3
    import zlib

    history = tmp_path / "history.sqlite3"
    r = run_firstlight("up", "--json", "--no-preflight", "--stop-when-ready", "--poll-min", "0.05", "--history",
                       str(history), "--", *sim_cmd("normal", free_port(), "--load-seconds", "0.2"))
    assert r.rc == 0, r.stderr[-2000:]
    run_id = r.summary["history_run"]

    def report_rss() -> tuple[int, int, str]:
        """Exit code, its own peak RSS (KiB) and stderr of `report --run`."""
        peak = tmp_path / "peak"
        with open(tmp_path / "err.txt", "w") as f:
            p = subprocess.run(firstlight_peak_cmd(peak, "report", "--run", str(run_id), "--history", str(history),
                                                   "-o", str(tmp_path / "o.html")), stdout=subprocess.DEVNULL,
                               stderr=f, stdin=subprocess.DEVNULL, timeout=300)
        return p.returncode, int(peak.read_text()), (tmp_path / "err.txt").read_text()

    baseline = report_rss()[1]  # the same report of the intact timeline
    deflate = zlib.compressobj(1, wbits=31)  # gzip framing, built by streaming: this process stays small
    chunk = b"\n" * (4 << 20)
    bomb = b"".join(deflate.compress(chunk) for _ in range(100)) + deflate.flush()  # 400 MB of empty lines
    with sqlite3.connect(history) as con:
        con.execute("UPDATE timelines SET data = ? WHERE run_id = ?", (bomb, run_id))
    rc, rss, text = report_rss()
    assert rc == 1 and "inflates beyond" in text and "Traceback" not in text, text[-2000:]
    assert rss < baseline + (150 << 10), (rss, baseline)  # KiB: far below the 400 MB it would inflate to


def test_a_record_of_a_million_lines_is_drawn_in_bounded_memory(recorded: tuple[Path, dict[str, Any]],
                                                                tmp_path: Path):
    record, _ = recorded
    t = json.loads(record.read_text().splitlines()[1])["t"]
    big = tmp_path / "big.jsonl"
    run = record.read_text().splitlines(keepends=True)
    with open(big, "w") as f:  # the flood while it starts, before the verdict (a record is replayed as it was fed)
        f.writelines(run[:2])
        line = '{"kind": "log", "t": %.6f, "text": "%d flood", "stream": "stdout", "lineno": %d, "final": true}\n'
        f.writelines(line % (t + i / 1e6, i, i) for i in range(1_000_000))
        f.writelines(run[2:])
    err, peak = tmp_path / "err.txt", tmp_path / "peak"
    with open(err, "w") as e:
        p = subprocess.run(firstlight_peak_cmd(peak, "report", str(big), "-o", str(tmp_path / "o.html"),
                                               "--no-baseline"), stdout=subprocess.DEVNULL, stderr=e,
                           stdin=subprocess.DEVNULL, timeout=300)
    assert p.returncode == 0, err.read_text()[-2000:]
    assert int(peak.read_text()) < 300 << 10, peak.read_text()  # KiB; it took 533 MB
    assert "left out of the drawing" in (tmp_path / "o.html").read_text()
