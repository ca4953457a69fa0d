"""Run history: what past starts and benchmarks of the same deployment measured, read and written.

The file and its schema are ``firstlight.history.db``, the deployment key ``firstlight.history.key``, what is
compared and the ETA ``firstlight.history.policy``, the scrubbing of secrets ``firstlight.history.scrub``. A
damaged row is skipped with a warning, never fatal. Strings are scrubbed of secrets before they are stored.
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from firstlight.bench.metrics import median
from firstlight.history.db import (
    _DISKS,
    _SERVING,
    _TIMELINES,
    Database,
    HistoryError,
    default_path,
)
from firstlight.history.errors import Unreachable
from firstlight.history.key import DeploymentKey, key_hash
from firstlight.history.location import node, spool_dir
from firstlight.history.policy import (
    DIRECTION,
    KINDS,
    STARTS,
    Regression,
    StartEstimate,
    base_type,
    estimate,
    extract_metrics,
    is_good,
    metric_value,
    numbers,
    start_type_of,
    version_of,
)
from firstlight.history.scrub import scrub
from firstlight.history.spool import Spool
from firstlight.redact import Redactor

__all__ = ["DIRECTION", "KINDS", "STARTS", "DeploymentKey", "History", "HistoryError", "Regression", "Run",
           "StartEstimate", "default_path", "extract_metrics", "is_good"]


@dataclass
class Run:
    id: int
    created_at: float
    kind: str
    deployment: str  # hash
    engine: str | None
    model: str | None
    command: str | None
    gpu_count: int | None
    ok: bool
    pinned: bool
    metrics: dict[str, float]
    summary: dict[str, Any]
    bench: dict[str, Any] | None
    start_type: str | None = None
    engine_version: str | None = None
    node: str | None = None  # the machine that made it (FIRSTLIGHT_NODE, else the host name)

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not full:
            d.pop("summary")
            d.pop("bench")
        return d


_RUN_COLUMNS = ("created_at", "kind", "deployment", "engine", "model", "command", "gpu_count", "ok", "summary",
                "bench", "start_type", "engine_version", "node", "uid")


class History(Database):
    """The run history at ``path`` (default: ``platformdirs.user_data_dir("firstlight")/history.sqlite3``), or in
    the fleet's PostgreSQL database given a ``postgresql://`` URL. A run the shared database does not take is
    spooled; what writes a run sends the spool first (:meth:`send_spooled`)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.spool = Spool(spool_dir(self.url), self.warn) if self.url is not None else None

    def __enter__(self) -> History:
        return self

    def send_spooled(self) -> int:
        """Send the spooled runs, oldest first, each whole (its run, metrics, timeline and serving changes in one
        transaction) and stored once whatever happens between its send and the removal of its file. Only what
        writes a run calls this (``up``, ``watch``, ``bench``); a listing, a report or a pin never does. Returns
        how many were sent; stops at the first the database does not take."""
        sent = 0
        if self.spool is None or self._con is None or self.readonly:
            return 0
        try:
            with self.spool.locked():
                for path, record in self.spool.waiting():
                    try:
                        self._insert(record)
                    except Unreachable:
                        break
                    except (HistoryError, KeyError, TypeError, ValueError, binascii.Error) as e:
                        self.warn(f"spooled run {path.name} not taken by {self.path} ({e}); kept")
                        continue
                    self.spool.sent(path)
                    sent += 1
        except OSError as e:
            self.warn(f"spool {self.spool.folder} not sent ({e.strerror or e})")
        return sent

    # -- writing ---------------------------------------------------------------------------------------------
    def record_run(self, kind: str, summary: dict[str, Any], deployment: DeploymentKey,
                   bench: dict[str, Any] | None = None, *, ok: bool | None = None,
                   created_at: float | None = None, uid: str | None = None) -> int:
        """Store one run and return its id. ``ok`` (default: :func:`is_good`) decides whether it may serve as
        a baseline. Numbers compared later are extracted by :func:`extract_metrics`. ``uid``: the run's unique id
        (default: a new one); the same run recorded again under its id is stored, or spooled, once."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        good = is_good(kind, summary, bench) if ok is None else ok
        metrics = extract_metrics(summary, bench)
        r = self.redactor
        if isinstance(summary.get("command"), list):  # learn --api-key X from the command, to mask X anywhere
            r = Redactor(r.secrets)
            r.add_from_argv([str(a) for a in summary["command"]])
        summary_json = json.dumps(scrub(summary, r), default=str)
        bench_json = json.dumps(scrub(bench, r), default=str) if bench is not None else None
        d = deployment
        record = {"created_at": created_at if created_at is not None else time.time(), "kind": kind,
                  "deployment": d.hash, "engine": d.engine, "model": d.model,
                  "command": r.text(d.command) if d.command else None, "gpu_count": d.gpu_count, "ok": int(good),
                  "summary": summary_json, "bench": bench_json, "start_type": start_type_of(summary),
                  "engine_version": version_of(summary), "node": node(), "uid": uid or uuid.uuid4().hex,
                  "metrics": metrics}
        try:
            return self._insert(record)
        except Unreachable as e:
            if self.spool is None:
                raise
            try:
                self.spool.keep(record)
            except OSError as oe:
                raise HistoryError(f"{e}; this run is lost (spool {self.spool.folder}: {oe.strerror})") from None
            raise Unreachable(f"{e}; this run is kept in {self.spool.folder} and sent when it answers") from None

    def _insert(self, record: dict[str, Any]) -> int:
        """One run with its metrics, and a spooled run's timeline and serving changes, in one transaction; a run
        whose ``uid`` is stored already is not stored again (only what it lacks of its timeline and changes)."""
        values = [record[c] for c in _RUN_COLUMNS]
        timeline = record.get("timeline")
        data = base64.b64decode(timeline, validate=True) if isinstance(timeline, str) else None
        serving = [(float(t), str(st), str(why)) for t, st, why in record.get("serving") or ()]
        with self._write() as con:
            row = con.execute(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES ({', '.join('?' * len(values))})"
                              " ON CONFLICT (uid) DO NOTHING RETURNING id", values).fetchone()
            fresh = row is not None
            if row is None:  # sent before: the file outlived the send
                row = con.execute("SELECT id FROM runs WHERE uid = ?", (record["uid"],)).fetchone()
            run_id = int(row[0])
            if fresh:
                con.executemany("INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)",
                                [(run_id, k, float(v)) for k, v in dict(record["metrics"]).items()])
            if data is not None:
                self._additive(con, _TIMELINES)
                con.execute("INSERT INTO timelines (run_id, data) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING",
                            (run_id, data))
            if serving:
                self._additive(con, _SERVING)
                if fresh or con.execute("SELECT count(*) FROM serving WHERE run_id = ?", (run_id,)).fetchone()[0] == 0:
                    con.executemany("INSERT INTO serving (run_id, t, state, reason) VALUES (?, ?, ?, ?)",
                                    [(run_id, *change) for change in serving])
        return run_id

    def run_id(self, uid: str) -> int | None:
        """The id of the stored run ``uid``; None when it is not stored (it may wait in the spool)."""
        row = self.con.execute("SELECT id FROM runs WHERE uid = ?", (uid,)).fetchone()
        return int(row[0]) if row else None

    def _to_run(self, run: int | str, spooled: Callable[[dict[str, Any]], None], stored: Callable[[int], None]
                ) -> None:
        """What a run adds after its record: to its stored row (``run``: its id, or its uid once sent), or, while
        the run waits in the spool (``run``: its uid), to its spooled file, sent with it."""
        if isinstance(run, int):
            stored(run)
            return
        if self.spool is not None:
            try:
                with self.spool.locked():
                    if self.spool.add(run, spooled):
                        return
            except OSError as e:
                raise HistoryError(f"spool {self.spool.folder}: {e.strerror or e}") from None
        try:
            run_id = self.run_id(run)
        except sqlite3.Error as e:
            raise HistoryError(f"cannot read history database {self.path}: {e}") from None
        if run_id is None:
            raise HistoryError(f"run {run} is neither in {self.path} nor in its spool")
        stored(run_id)

    def store_timeline(self, run: int | str, data: bytes) -> None:
        """Keep a run's timeline (gzip-compressed JSON Lines, see ``firstlight.report.record.pack_timeline``);
        ``run``: its id, or its uid (a run that may wait in the spool)."""
        def stored(run_id: int) -> None:
            with self._write() as con:
                self._additive(con, _TIMELINES)
                con.execute("INSERT INTO timelines (run_id, data) VALUES (?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                            "data = excluded.data", (run_id, data))

        def spooled(record: dict[str, Any]) -> None:
            record["timeline"] = base64.b64encode(data).decode("ascii")
        self._to_run(run, spooled, stored)

    def record_serving(self, run: int | str, t: float, state: str, reason: str) -> None:
        """One change of a run's serving state after READY; ``run``: its id, or its uid."""
        reason = self.redactor.text(reason)

        def stored(run_id: int) -> None:
            with self._write() as con:
                self._additive(con, _SERVING)
                con.execute("INSERT INTO serving (run_id, t, state, reason) VALUES (?, ?, ?, ?)",
                            (run_id, t, state, reason))

        def spooled(record: dict[str, Any]) -> None:
            record["serving"] = [*(record.get("serving") or []), [t, state, reason]]
        self._to_run(run, spooled, stored)

    def record_disk(self, disk: dict[str, Any]) -> None:
        """A filesystem's measured read rates (``firstlight.preflight.disk.measure``); the newest replaces."""
        with self._write() as con:
            self._additive(con, _DISKS)
            con.execute("INSERT INTO disks (device, mount, fstype, rate, cache_rate, bytes, measured_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (device) DO UPDATE SET mount = excluded.mount, "
                        "fstype = excluded.fstype, rate = excluded.rate, cache_rate = excluded.cache_rate, "
                        "bytes = excluded.bytes, measured_at = excluded.measured_at",
                        (self._device(disk["device"]), disk["mount"], disk["fstype"], disk["rate"],
                         disk.get("cache_rate"), disk["bytes"], disk["measured_at"]))

    def disk(self, device: str) -> dict[str, Any] | None:
        """The measured read rates of the filesystem on ``device`` (``st_dev`` as major:minor); None: never."""
        try:
            row = self.con.execute("SELECT device, mount, fstype, rate, cache_rate, bytes, measured_at FROM disks "
                                   "WHERE device = ?", (self._device(device),)).fetchone()
        except (sqlite3.Error, HistoryError):  # no such table: never measured (or a database that did not answer)
            return None
        if row is None:
            return None
        out = dict(zip(("device", "mount", "fstype", "rate", "cache_rate", "bytes", "measured_at"), row, strict=True))
        return {**out, "device": device}

    def _device(self, device: str) -> str:
        """A device number names a filesystem on one machine: in a shared database it is the node's."""
        return f"{node()}/{device}" if self.shared else device

    def serving_changes(self, run_id: int) -> list[tuple[float, str, str]]:
        """A run's serving-state changes, oldest first: (t, state, reason)."""
        try:
            rows = self.con.execute("SELECT t, state, reason FROM serving WHERE run_id = ? ORDER BY t",
                                    (run_id,)).fetchall()
        except (sqlite3.Error, HistoryError):  # no such table: nothing recorded
            return []
        return [(float(t), str(s), str(r)) for t, s, r in rows]

    def timeline(self, run_id: int) -> bytes | None:
        """A run's stored timeline; None when it has none (older runs, ``bench`` runs)."""
        try:
            row = self.con.execute("SELECT data FROM timelines WHERE run_id = ?", (run_id,)).fetchone()
        except (sqlite3.OperationalError, HistoryError):  # no timelines table yet: a file from before timelines
            return None
        return bytes(row[0]) if row else None

    def pin(self, run_id: int) -> Run:
        """Make ``run_id`` the baseline of its deployment (instead of the median of recent good runs)."""
        run = self.get(run_id)
        if run is None:
            raise KeyError(run_id)
        with self._write() as con:
            con.execute("UPDATE runs SET pinned = 0 WHERE deployment = ? AND pinned = 1", (run.deployment,))
            con.execute("UPDATE runs SET pinned = 1 WHERE id = ?", (run_id,))
        run.pinned = True
        return run

    def unpin(self, deployment: DeploymentKey | str) -> None:
        with self._write() as con:
            con.execute("UPDATE runs SET pinned = 0 WHERE deployment = ?", (key_hash(deployment),))

    # -- reading ---------------------------------------------------------------------------------------------
    @property
    def _cols(self) -> str:
        """The columns of a Run; a schema-1 file (a read-only listing) has no start types or versions."""
        extra = "start_type, engine_version" if self.schema >= 2 else "NULL, NULL"
        extra += ", node" if self.schema >= 3 else ", NULL"
        return f"id, created_at, kind, deployment, engine, model, command, gpu_count, ok, pinned, summary, bench, " \
               f"{extra}"

    def _of(self, h: str, col: str = "deployment") -> tuple[str, list[Any]]:
        """A condition on a deployment hash (or a prefix of it); an old hash (schema 1) finds its re-keyed rows."""
        cond = f"substr({col}, 1, ?) = ?"
        if self.schema >= 2:
            return f"({cond} OR substr(legacy_deployment, 1, ?) = ?)", [len(h), h, len(h), h]
        return cond, [len(h), h]

    def _runs(self, rows: list[tuple[Any, ...]]) -> list[Run]:
        out = []
        for row in rows:
            try:
                out.append(self._run(row))
            except (ValueError, TypeError, KeyError, IndexError, RecursionError) as e:
                msg = f"history row {row[0] if row else '?'} in {self.path} is damaged ({type(e).__name__}); skipped"
                self.warnings.append(msg)
                self.warn(msg)
        return out

    def _run(self, row: tuple[Any, ...]) -> Run:
        """One row, checked: a hand-edited or half-written row raises rather than reaching a caller."""
        metrics = {str(k): v for k, raw in self._query("SELECT name, value FROM metrics WHERE run_id = ?", (row[0],))
                   if (v := metric_value(raw)) is not None}  # a damaged value (inf, -1, 300 digits) is no figure
        summary = json.loads(row[10])
        bench = json.loads(row[11]) if row[11] else None
        if not isinstance(summary, dict) or not (bench is None or isinstance(bench, dict)):
            raise TypeError("summary or bench is not an object")
        return Run(int(row[0]), float(row[1]), str(row[2]), str(row[3]), _opt_str(row[4]), _opt_str(row[5]),
                   _opt_str(row[6]), None if row[7] is None else int(row[7]), bool(row[8]), bool(row[9]), metrics,
                   summary, bench, _opt_str(row[12]) or start_type_of(summary),
                   _opt_str(row[13]) or version_of(summary), _opt_str(row[14]))

    def get(self, run_id: int) -> Run | None:
        runs = self._runs(self._query(f"SELECT {self._cols} FROM runs WHERE id = ?", (run_id,)))
        return runs[0] if runs else None

    def runs(self, deployment: DeploymentKey | str | None = None, limit: int = 50, kind: str | None = None
             ) -> list[Run]:
        """Newest first. ``deployment``: a key or its hash (a unique prefix of the hash works too)."""
        where: list[str] = []
        args: list[Any] = []
        if deployment is not None:
            cond, more = self._of(key_hash(deployment))
            where.append(cond)
            args += more
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        cond = f"WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT {self._cols} FROM runs {cond} ORDER BY id DESC LIMIT ?"
        return self._runs(self._query(sql, [*args, limit]))

    def _typed(self) -> str:
        return "r.start_type" if self.schema >= 2 else "NULL"

    def _baseline(self, deployment: DeploymentKey | str, metric: str, before: int | None, window: int,
                  use_pin: bool = True, start_type: str | None = None
                  ) -> tuple[float, int, int | None, str | None] | None:
        """(value, runs, pinned run, the engine version of the newest of those runs). With ``start_type``: the
        runs of that type when there are any (a warm start is not the baseline of a cold one), else all."""
        h = key_hash(deployment)
        if use_pin:
            rows = self._query(
                "SELECT r.id, m.value, r.summary FROM runs r JOIN metrics m ON m.run_id = r.id WHERE r.deployment = ? "
                "AND r.pinned = 1 AND m.name = ? AND (? IS NULL OR r.id < ?)", (h, metric, before, before))
            pinned = numbers(rows, 1)
            if pinned:
                return pinned[0], 1, int(rows[0][0]), _version(rows[0][2])
        rows = self._query(
            f"SELECT m.value, r.summary, {self._typed()} FROM runs r JOIN metrics m ON m.run_id = r.id WHERE "
            "r.deployment = ? AND r.ok = 1 AND m.name = ? AND (? IS NULL OR r.id < ?) ORDER BY r.id DESC LIMIT ?",
            (h, metric, before, before, window * 10))
        start_type = base_type(start_type)
        if start_type is not None and any(base_type(_opt_str(r[2])) == start_type for r in rows):
            rows = [r for r in rows if base_type(_opt_str(r[2])) == start_type]
        rows = rows[:window]
        values = numbers(rows, 0)
        if not values:
            return None
        return median(values), len(values), None, _version(rows[0][1])

    def baseline(self, deployment: DeploymentKey | str, metric: str, *, before: int | None = None,
                 window: int = 10, start_type: str | None = None) -> float | None:
        """The pinned run's value if one is pinned, else the median over the last ``window`` good runs (of
        ``start_type`` where there are such; only runs older than ``before`` when given); None without history."""
        b = self._baseline(deployment, metric, before, window, start_type=start_type)
        return b[0] if b else None

    def baseline_run(self, deployment: DeploymentKey | str, before: int | None = None, window: int = 10
                     ) -> Run | None:
        """The deployment's baseline start, as a run (what a report draws beside a start): the pinned start, else
        of the last ``window`` good starts (before ``before``), the one whose time to READY is nearest their
        median, the value :meth:`baseline` compares with."""
        runs = [r for r in self.runs(deployment, limit=200)
                if r.kind in STARTS and (before is None or r.id < before)]
        pinned = next((r for r in runs if r.pinned), None)
        if pinned is not None:
            return pinned
        good = [r for r in runs if r.ok and "cold_start_s" in r.metrics][:window]
        if not good:
            return None
        mid = median([r.metrics["cold_start_s"] for r in good])
        return min(good, key=lambda r: abs(r.metrics["cold_start_s"] - mid))

    def known_answer(self, deployment: DeploymentKey | str, request: str) -> tuple[int, float, dict[str, Any]] | None:
        """(run, when, answer) of this deployment's known answer to ``request`` (a fingerprint): of its good
        starts that recorded one (summary ``known_answer.outcome``), the newest re-recorded (``--known-answer
        record``), else the earliest recorded. None: no reference yet."""
        # read in Python, not by the database's JSON functions: one query for SQLite and PostgreSQL alike; a damaged
        # summary is no reference, never an error
        rows = self._query("SELECT id, created_at, summary FROM runs WHERE deployment = ? AND ok = 1 ORDER BY id",
                           (key_hash(deployment),))
        found: list[tuple[int, float, str, dict[str, Any]]] = []
        for run_id, created, raw in rows:
            try:
                summary = json.loads(raw)
            except (TypeError, ValueError, RecursionError):
                continue
            ka = summary.get("known_answer") if isinstance(summary, dict) else None
            if not isinstance(ka, dict):
                continue
            answer, outcome = ka.get("answer"), ka.get("outcome")
            if isinstance(answer, dict) and outcome in ("recorded", "re-recorded") and answer.get("request") == request:
                found.append((int(run_id), float(created), str(outcome), answer))
        rerecorded = [f for f in found if f[2] == "re-recorded"]
        for run_id, created, _, answer in ([rerecorded[-1]] if rerecorded else []) + found:
            return run_id, created, answer
        return None

    def starts(self, deployment: DeploymentKey | str, limit: int = 100) -> list[tuple[str | None, float]]:
        """(start type, seconds to READY) of this deployment's good starts, newest first."""
        rows = self._query(
            f"SELECT {self._typed()}, m.value FROM runs r JOIN metrics m ON m.run_id = r.id WHERE r.deployment = ? "
            "AND r.ok = 1 AND m.name = 'cold_start_s' ORDER BY r.id DESC LIMIT ?", (key_hash(deployment), limit))
        return [(_opt_str(t), v) for t, raw in rows if (v := metric_value(raw)) is not None]

    def start_anatomies(self, deployment: DeploymentKey | str, limit: int = 40, before: int | None = None
                        ) -> list[tuple[str | None, dict[str, Any] | None]]:
        """(start type, anatomy) of this deployment's good starts, newest first: what its phase budgets are
        learned from (``firstlight.budgets.learn``); ``before``: only runs older than that run id. A damaged summary
        gives no anatomy."""
        rows = self._query(
            f"SELECT {self._typed()}, r.summary FROM runs r WHERE r.deployment = ? AND r.ok = 1 "
            "AND r.kind IN ('up', 'watch') AND r.id < ? ORDER BY r.id DESC LIMIT ?",
            (key_hash(deployment), before if before is not None else 2**62, limit))
        out: list[tuple[str | None, dict[str, Any] | None]] = []
        for t, raw in rows:
            try:
                summary = json.loads(raw)
            except (TypeError, ValueError, RecursionError):
                summary = None
            anat = summary.get("anatomy") if isinstance(summary, dict) else None
            typed = _opt_str(t) or (start_type_of(summary) if isinstance(summary, dict) else None)
            out.append((typed, anat if isinstance(anat, dict) else None))
        return out

    def start_nodes(self, deployment: DeploymentKey | str, start_type: str | None = None, limit: int = 40,
                    before: int | None = None) -> dict[str, int]:
        """The nodes that made the good starts :meth:`start_anatomies` reads (those of ``start_type`` when there
        are any), with how many each made: in a shared history, the fleet a start is compared with."""
        node_col = "r.node" if self.schema >= 3 else "NULL"
        rows = self._query(
            f"SELECT {self._typed()}, {node_col} FROM runs r WHERE r.deployment = ? AND r.ok = 1 "
            "AND r.kind IN ('up', 'watch') AND r.id < ? ORDER BY r.id DESC LIMIT ?",
            (key_hash(deployment), before if before is not None else 2**62, limit))
        typed = [r for r in rows if start_type is not None and _opt_str(r[0]) == start_type]
        out: dict[str, int] = {}
        for _, where in typed or rows:
            name = _opt_str(where) or "unknown"
            out[name] = out.get(name, 0) + 1
        return out

    def expected_start(self, deployment: DeploymentKey | str, start_type: str | None = None
                       ) -> StartEstimate | None:
        """The ETA of a start of ``start_type`` (``firstlight.history.policy.estimate``): from past starts of that
        type, else from all, with a note that says which."""
        return estimate(self.starts(deployment), start_type)

    def expected_start_seconds(self, deployment: DeploymentKey | str, window: int = 10,
                               start_type: str | None = None) -> float | None:
        """Median time to ready of the last ``window`` ready starts of this deployment (for an ETA)."""
        e = estimate(self.starts(deployment)[: max(window, 1) * 10], start_type)
        return e.seconds if e else None

    def check_regression(self, deployment: DeploymentKey | str, cold_start_s: float | None = None,
                         output_throughput: float | None = None, margin: float = 0.2, *,
                         before: int | None = None, start_type: str | None = None, version: str | None = None,
                         **metrics: float | None) -> list[Regression]:
        """Metrics worse than their baseline by more than ``margin`` (0.2: 20% slower start, or throughput
        below 80% of the baseline). Other metrics of :data:`DIRECTION` may be passed by name. A start is compared
        with the starts of its ``start_type``; a regression names the baseline's engine version and ``version``."""
        values = {"cold_start_s": cold_start_s, "output_throughput": output_throughput, **metrics}
        out = []
        for metric, value in values.items():
            if value is None:
                continue
            if metric not in DIRECTION:
                raise ValueError(f"unknown metric {metric!r}; known: {', '.join(DIRECTION)}")
            typed = base_type(start_type) if metric == "cold_start_s" else None
            b = self._baseline(deployment, metric, before, 10, start_type=typed)
            if b is None or b[0] <= 0:
                continue
            ratio = value / b[0]
            worse = ratio > 1 + margin if DIRECTION[metric] else ratio < 1 - margin
            if worse:
                out.append(Regression(metric, float(value), b[0], ratio, margin, b[1], b[2], typed, b[3], version))
        return out

    def compare(self, run_a: int, run_b: int) -> dict[str, Any]:
        """Both runs' metrics side by side with ``b / a`` ratios. KeyError if a run does not exist."""
        a, b = self.get(run_a), self.get(run_b)
        if a is None or b is None:
            raise KeyError(run_a if a is None else run_b)
        rows = {}
        for m in sorted(set(a.metrics) | set(b.metrics)):
            va, vb = a.metrics.get(m), b.metrics.get(m)
            rows[m] = {"a": va, "b": vb, "ratio": vb / va if va and vb is not None else None,
                       "lower_is_better": DIRECTION.get(m)}
        return {"a": a.to_dict(), "b": b.to_dict(), "same_deployment": a.deployment == b.deployment,
                "metrics": rows}


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _version(summary_json: Any) -> str | None:
    try:
        summary = json.loads(summary_json)
    except (TypeError, ValueError):
        return None
    return version_of(summary) if isinstance(summary, dict) else None
