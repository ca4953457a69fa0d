"""Run history in SQLite: what past starts and benchmarks of the same deployment measured.

Several firstlight processes may write at once (WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` for every
write so that no transaction has to upgrade its lock). A writer killed mid-transaction leaves the last committed
state. A damaged database is never silently dropped: it is moved aside to ``<name>.corrupt-<timestamp>`` (with
its ``-wal``) with a one-line warning, and a new database is started. Only a file with the SQLite header is
ever moved, and only by a writer: a file that is not a database at all (``--history notes.txt``) is refused and
left alone, and a listing (``readonly``) opens the file read-only and moves nothing, so a read-only history can
be listed. A damaged row is skipped with a warning, never fatal. Strings are scrubbed of secrets before they
are stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import sqlite3
import stat
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import platformdirs

from firstlight.bench.metrics import median
from firstlight.files import kind
from firstlight.redact import MASK, Redactor, is_secret_name

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

KINDS = ("up", "watch", "bench")
SCHEMA_VERSION = 1
# metric -> True when lower is better
DIRECTION: dict[str, bool] = {
    "cold_start_s": True,
    "output_throughput": False,
    "request_throughput": False,
    "total_token_throughput": False,
    "ttft_median_ms": True,
    "tpot_median_ms": True,
    "itl_median_ms": True,
    "e2el_median_ms": True,
}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at REAL NOT NULL,
  kind TEXT NOT NULL,
  deployment TEXT NOT NULL,
  engine TEXT, model TEXT, command TEXT, gpu_count INTEGER,
  ok INTEGER NOT NULL,
  pinned INTEGER NOT NULL DEFAULT 0,
  summary TEXT NOT NULL,
  bench TEXT
);
CREATE INDEX IF NOT EXISTS runs_deployment ON runs(deployment, id);
CREATE TABLE IF NOT EXISTS metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
"""


# Each run's downsampled timeline, for `firstlight report --run`. Additive and created on first use, so that
# databases from before it (and firstlight versions without it) keep working with the same schema version.
_TIMELINES = """CREATE TABLE IF NOT EXISTS timelines (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  data BLOB NOT NULL
)"""

# After READY, each change of the serving checks' state (serving, degraded, not_serving, hung); additive too.
_SERVING = """CREATE TABLE IF NOT EXISTS serving (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  t REAL NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL
)"""


# The device's sequential read rate, measured once per filesystem (`firstlight preflight --disk`); additive too.
_DISKS = """CREATE TABLE IF NOT EXISTS disks (
  device TEXT PRIMARY KEY,
  mount TEXT NOT NULL,
  fstype TEXT NOT NULL,
  rate REAL NOT NULL,
  cache_rate REAL,
  bytes INTEGER NOT NULL,
  measured_at REAL NOT NULL
)"""


def default_path() -> Path:
    """$FIRSTLIGHT_HISTORY, else ``history.sqlite3`` in the per-user data directory."""
    env = os.environ.get("FIRSTLIGHT_HISTORY")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("firstlight")) / "history.sqlite3"


class HistoryError(Exception):
    """The history cannot be used (unwritable path, locked for too long, written by a newer firstlight)."""


@dataclass(frozen=True)
class DeploymentKey:
    """What makes runs comparable: engine, model, the launch command (secrets masked) and GPU count.
    ``hash`` is stable across processes and machines for the same fields."""

    engine: str | None
    model: str | None
    command: str | None = None
    gpu_count: int | None = None

    @classmethod
    def create(cls, engine: str | None, model: str | None, command: Sequence[str] | str | None = None,
               gpu_count: int | None = None, redactor: Redactor | None = None) -> DeploymentKey:
        r = redactor or Redactor()
        model = r.text(model) if model else model  # a path or id may hold a token, as the command may
        argv: Sequence[str] | None = command if not isinstance(command, str) else None
        if isinstance(command, str):
            try:
                argv = shlex.split(command)
            except ValueError:  # unbalanced quotes: mask what the text patterns can see
                return cls(engine, model, r.text(command), gpu_count)
        cmd = None
        if argv:
            r.add_from_argv(argv)
            cmd = shlex.join(r.argv(argv))
        return cls(engine, model, cmd, gpu_count)

    @property
    def hash(self) -> str:
        raw = json.dumps([self.engine, self.model, self.command, self.gpu_count], separators=(",", ":"))
        return hashlib.sha256(raw.encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return {"hash": self.hash, **asdict(self)}


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

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not full:
            d.pop("summary")
            d.pop("bench")
        return d


@dataclass
class Regression:
    """A metric worse than its baseline by more than the margin; carries both numbers."""

    metric: str
    value: float
    baseline: float
    ratio: float  # value / baseline
    margin: float
    baseline_runs: int  # how many runs the baseline is the median of (1 when pinned)
    pinned_run: int | None

    @property
    def message(self) -> str:
        worse = "slower" if DIRECTION.get(self.metric, True) else "lower"
        base = f"pinned run {self.pinned_run}" if self.pinned_run else f"median of {self.baseline_runs} runs"
        return (f"{self.metric} {self.value:.4g} vs baseline {self.baseline:.4g} ({base}): {self.ratio:.2f}x, "
                f"{abs(self.ratio - 1) * 100:.0f}% {worse} (margin {self.margin * 100:.0f}%)")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.message}


def extract_metrics(summary: dict[str, Any], bench: dict[str, Any] | None) -> dict[str, float]:
    """The numbers a run is compared on: time to ready (ready runs only) and benchmark figures."""
    out: dict[str, float] = {}
    cold = summary.get("cold_start_s")
    # Older summaries have no cold_start_s: from READY. One that says None saw no start it could time (a watch
    # attached to a server already up): never a 0 s start, which would size a k8s probe to one period.
    if "cold_start_s" not in summary and summary.get("verdict") == "ready":
        ready_at, started_at = summary.get("ready_at"), summary.get("started_at")
        if isinstance(ready_at, int | float) and isinstance(started_at, int | float):
            cold = ready_at - started_at
    if isinstance(cold, int | float) and cold >= 0:
        out["cold_start_s"] = float(cold)
    if bench:
        for k in ("output_throughput", "request_throughput", "total_token_throughput"):
            if isinstance(bench.get(k), int | float):
                out[k] = float(bench[k])
        for k in ("ttft", "tpot", "itl", "e2el"):
            v = (bench.get(f"{k}_ms") or {}).get("median")
            if isinstance(v, int | float):
                out[f"{k}_median_ms"] = float(v)
    return out


def is_good(kind: str, summary: dict[str, Any], bench: dict[str, Any] | None) -> bool:
    """A run fit to be a baseline: the server got ready, and a benchmark (if any) had no failed request."""
    if kind in ("up", "watch") and summary.get("verdict") != "ready":
        return False
    if bench is not None:
        return bool(bench.get("completed")) and not bench.get("errors") and not bench.get("timeouts")
    return True


def _scrub(obj: Any, r: Redactor) -> Any:
    if isinstance(obj, dict):
        return {k: MASK if isinstance(v, str) and v and is_secret_name(str(k)) else _scrub(v, r)
                for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_scrub(v, r) for v in obj]
    if isinstance(obj, str):
        return _redact_text(obj, r)
    return obj


_PATTERN_HINTS = ("=", ":", "Bearer", "hf_", "sk-")


def _redact_text(s: str, r: Redactor) -> str:
    """``r.text`` with a fast path: its key=value pattern is quadratic in the length of a long word, so strings
    that cannot match any of its patterns (no '=', ':', 'Bearer', 'hf_', 'sk-') only get the literal secrets."""
    if any(h in s for h in _PATTERN_HINTS):
        return r.text(s)
    for secret in sorted(r.secrets, key=len, reverse=True):
        s = s.replace(secret, MASK)
    return s


def _is_corruption(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    msg = str(e).lower()
    return "not a database" in msg or "malformed" in msg or "corrupt" in msg


class _Corrupt(Exception):
    pass


SQLITE_HEADER = b"SQLite format 3\x00"


def _is_sqlite_file(path: Path) -> bool:
    """Empty (SQLite starts a database in it) or starting with the SQLite header."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return False
    return head == b"" or head == SQLITE_HEADER


def _warn_stderr(message: str) -> None:
    print(f"firstlight: warning: {message}", file=sys.stderr)


class History:
    """The run history at ``path`` (default: ``platformdirs.user_data_dir("firstlight")/history.sqlite3``)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout: float = 30.0,
                 warn: Callable[[str], None] = _warn_stderr, redactor: Redactor | None = None,
                 readonly: bool = False) -> None:
        """``readonly``: for listings: the file is opened read-only, nothing is created, moved or written."""
        self.path = Path(path) if path is not None else default_path()
        self.busy_timeout = busy_timeout
        self.readonly = readonly
        self.warn = warn
        self.warnings: list[str] = []
        if redactor is None:
            redactor = Redactor()
            redactor.add_from_env()
        self.redactor = redactor
        self._con = self._open()

    # -- opening, corruption ---------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        con.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        con.execute("PRAGMA synchronous = NORMAL")  # with WAL: a crash of the process loses nothing committed
        return con

    def _connect_readonly(self) -> sqlite3.Connection:
        """Read-only; ``immutable`` where even the WAL's shared memory cannot be created (a read-only directory)."""
        uri = "file:" + urllib.parse.quote(str(self.path.absolute()))
        for extra in ("", "&immutable=1"):
            try:
                con = sqlite3.connect(f"{uri}?mode=ro{extra}", uri=True, timeout=self.busy_timeout,
                                      isolation_level=None)
                con.execute("PRAGMA user_version").fetchone()
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return con
            except sqlite3.DatabaseError as e:
                if _is_corruption(e):
                    raise _Corrupt(str(e)) from None
                last = e
        raise last

    def set_busy_timeout(self, seconds: float) -> None:
        """How long a write waits for another writer's lock (short on the way to stopping a server)."""
        self.busy_timeout = seconds
        with contextlib.suppress(sqlite3.Error):
            self._con.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def _connect_checked(self) -> sqlite3.Connection:
        """A connection to a sound database; raises _Corrupt when the file is not one."""
        con = None
        try:
            con = self._connect()
            con.execute("PRAGMA journal_mode = WAL").fetchone()
            rows = con.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as e:
            if con is not None:
                con.close()
            if _is_corruption(e):
                raise _Corrupt(str(e)) from None
            raise
        if [r[0] for r in rows] != ["ok"]:
            con.close()
            raise _Corrupt(str(rows[0][0]) if rows else "quick_check failed")
        return con

    def _open(self) -> sqlite3.Connection:
        try:  # a FIFO blocks in open(), a device is no database: a regular file or none
            mode = os.stat(self.path).st_mode
        except OSError:
            mode = None  # no file yet (or unreadable): said below
        if mode is not None and not stat.S_ISREG(mode):
            raise HistoryError(f"history database {self.path} is {kind(mode)}, not a regular file; pass another "
                               "--history")
        if self.readonly:
            return self._open_readonly()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.exists()
            try:
                con = self._connect_checked()
            except _Corrupt as e:
                if not _is_sqlite_file(self.path):
                    raise HistoryError(f"{self.path} is not a SQLite database; firstlight leaves it alone (pass "
                                       "another --history)") from None
                self._move_aside(str(e))
                con = self._connect_checked()
            if fresh:
                with contextlib.suppress(OSError):
                    os.chmod(self.path, 0o600)
            self._init_schema(con)
            return con
        except _Corrupt as e:
            raise HistoryError(f"history database {self.path} is still unreadable after moving it aside: {e}") from None
        except (sqlite3.Error, OSError) as e:
            raise HistoryError(f"cannot open history database {self.path}: {e}") from None

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.path.exists():  # a listing creates nothing: say what is wrong, not "not a database"
            raise HistoryError(f"no history at {self.path} (no such file)")
        if not _is_sqlite_file(self.path):
            raise HistoryError(f"{self.path} is not a SQLite database")
        try:
            con = self._connect_readonly()
        except _Corrupt as e:
            raise HistoryError(f"history database {self.path} is damaged ({e}); a run (not a listing) moves it "
                               "aside") from None
        except (sqlite3.Error, OSError) as e:
            raise HistoryError(f"cannot open history database {self.path} read-only: {e}") from None
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            con.close()
            raise HistoryError(f"history database {self.path} was written by a newer firstlight (schema {version})")
        return con

    def _move_aside(self, reason: str) -> None:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                # another process may have replaced the file while we waited: check again under the lock
                try:
                    self._connect_checked().close()
                    return
                except _Corrupt:
                    pass
                stamp = time.strftime("%Y%m%d-%H%M%S")
                dest = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
                n = 1
                while dest.exists():
                    n += 1
                    dest = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
                os.replace(self.path, dest)
                for suffix in ("-wal", "-shm"):
                    side = self.path.with_name(self.path.name + suffix)
                    if side.exists():
                        os.replace(side, dest.with_name(dest.name + suffix))
                msg = f"history database {self.path} is corrupt ({reason}); moved it to {dest}, starting a new one"
                self.warnings.append(msg)
                self.warn(msg)
            finally:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def _init_schema(self, con: sqlite3.Connection) -> None:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise HistoryError(f"history database {self.path} was written by a newer firstlight (schema {version})")
        if version == SCHEMA_VERSION:
            return
        con.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    con.execute(stmt)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        try:
            self._con.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise HistoryError(f"cannot write history database {self.path}: {e}") from None
        try:
            yield self._con
            self._con.execute("COMMIT")
        except BaseException as e:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("ROLLBACK")
            if isinstance(e, sqlite3.Error):
                raise HistoryError(f"cannot write history database {self.path}: {e}") from None
            raise

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._con.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            if self.readonly and "no such table" in str(e):
                return []  # an empty database: nothing recorded yet
            raise HistoryError(f"cannot read history database {self.path}: {e}") from None

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------------------
    def record_run(self, kind: str, summary: dict[str, Any], deployment: DeploymentKey,
                   bench: dict[str, Any] | None = None, *, ok: bool | None = None,
                   created_at: float | None = None) -> int:
        """Store one run and return its id. ``ok`` (default: :func:`is_good`) decides whether it may serve as
        a baseline. Numbers compared later are extracted by :func:`extract_metrics`."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        good = is_good(kind, summary, bench) if ok is None else ok
        metrics = extract_metrics(summary, bench)
        r = self.redactor
        if isinstance(summary.get("command"), list):  # learn --api-key X from the command, to mask X anywhere
            r = Redactor(r.secrets)
            r.add_from_argv([str(a) for a in summary["command"]])
        summary_json = json.dumps(_scrub(summary, r), default=str)
        bench_json = json.dumps(_scrub(bench, r), default=str) if bench is not None else None
        d = deployment
        with self._write() as con:
            cur = con.execute(
                "INSERT INTO runs (created_at, kind, deployment, engine, model, command, gpu_count, ok, summary, bench)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (created_at if created_at is not None else time.time(), kind, d.hash, d.engine, d.model,
                 r.text(d.command) if d.command else None, d.gpu_count, int(good), summary_json,
                 bench_json))
            run_id = int(cur.lastrowid or 0)
            con.executemany("INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)",
                            [(run_id, k, v) for k, v in metrics.items()])
        return run_id

    def store_timeline(self, run_id: int, data: bytes) -> None:
        """Keep a run's timeline (gzip-compressed JSON Lines, see ``firstlight.report.record.pack_timeline``)."""
        with self._write() as con:
            con.execute(_TIMELINES)
            con.execute("INSERT OR REPLACE INTO timelines (run_id, data) VALUES (?, ?)", (run_id, data))

    def record_serving(self, run_id: int, t: float, state: str, reason: str) -> None:
        """One change of a run's serving state after READY."""
        with self._write() as con:
            con.execute(_SERVING)
            con.execute("INSERT INTO serving (run_id, t, state, reason) VALUES (?, ?, ?, ?)",
                        (run_id, t, state, self.redactor.text(reason)))

    def record_disk(self, disk: dict[str, Any]) -> None:
        """A filesystem's measured read rates (``firstlight.preflight.disk.measure``); the newest replaces."""
        with self._write() as con:
            con.execute(_DISKS)
            con.execute("INSERT OR REPLACE INTO disks (device, mount, fstype, rate, cache_rate, bytes, measured_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", (disk["device"], disk["mount"], disk["fstype"], disk["rate"],
                                                         disk.get("cache_rate"), disk["bytes"], disk["measured_at"]))

    def disk(self, device: str) -> dict[str, Any] | None:
        """The measured read rates of the filesystem on ``device`` (``st_dev`` as major:minor); None: never."""
        try:
            row = self._con.execute("SELECT device, mount, fstype, rate, cache_rate, bytes, measured_at FROM disks "
                                    "WHERE device = ?", (device,)).fetchone()
        except sqlite3.Error:  # no such table: never measured
            return None
        if row is None:
            return None
        return dict(zip(("device", "mount", "fstype", "rate", "cache_rate", "bytes", "measured_at"), row, strict=True))

    def serving_changes(self, run_id: int) -> list[tuple[float, str, str]]:
        """A run's serving-state changes, oldest first: (t, state, reason)."""
        try:
            rows = self._con.execute("SELECT t, state, reason FROM serving WHERE run_id = ? ORDER BY t",
                                     (run_id,)).fetchall()
        except sqlite3.Error:  # no such table: nothing recorded
            return []
        return [(float(t), str(s), str(r)) for t, s, r in rows]

    def timeline(self, run_id: int) -> bytes | None:
        """A run's stored timeline; None when it has none (older runs, ``bench`` runs)."""
        try:
            row = self._con.execute("SELECT data FROM timelines WHERE run_id = ?", (run_id,)).fetchone()
        except sqlite3.OperationalError:  # no timelines table yet: a database from before timelines were kept
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
            con.execute("UPDATE runs SET pinned = 0 WHERE deployment = ?", (_hash(deployment),))

    # -- reading ---------------------------------------------------------------------------------------------
    _COLS = "id, created_at, kind, deployment, engine, model, command, gpu_count, ok, pinned, summary, bench"

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
        metrics = {str(k): float(v) for k, v in self._query("SELECT name, value FROM metrics WHERE run_id = ?",
                                                            (row[0],))}
        summary = json.loads(row[10])
        bench = json.loads(row[11]) if row[11] else None
        if not isinstance(summary, dict) or not (bench is None or isinstance(bench, dict)):
            raise TypeError("summary or bench is not an object")
        return Run(int(row[0]), float(row[1]), str(row[2]), str(row[3]), _opt_str(row[4]), _opt_str(row[5]),
                   _opt_str(row[6]), None if row[7] is None else int(row[7]), bool(row[8]), bool(row[9]), metrics,
                   summary, bench)

    def get(self, run_id: int) -> Run | None:
        runs = self._runs(self._query(f"SELECT {self._COLS} FROM runs WHERE id = ?", (run_id,)))
        return runs[0] if runs else None

    def runs(self, deployment: DeploymentKey | str | None = None, limit: int = 50, kind: str | None = None
             ) -> list[Run]:
        """Newest first. ``deployment``: a key or its hash (a unique prefix of the hash works too)."""
        where: list[str] = []
        args: list[Any] = []
        if deployment is not None:
            h = _hash(deployment)
            where.append("substr(deployment, 1, ?) = ?")
            args += [len(h), h]
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        cond = f"WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT {self._COLS} FROM runs {cond} ORDER BY id DESC LIMIT ?"
        return self._runs(self._query(sql, [*args, limit]))

    def _baseline(self, deployment: DeploymentKey | str, metric: str, before: int | None, window: int,
                  use_pin: bool = True) -> tuple[float, int, int | None] | None:
        h = _hash(deployment)
        if use_pin:
            rows = self._query(
                "SELECT r.id, m.value FROM runs r JOIN metrics m ON m.run_id = r.id WHERE r.deployment = ? AND "
                "r.pinned = 1 AND m.name = ? AND (? IS NULL OR r.id < ?)", (h, metric, before, before))
            pinned = _numbers(rows, 1)
            if pinned:
                return pinned[0], 1, int(rows[0][0])
        rows = self._query(
            "SELECT m.value FROM runs r JOIN metrics m ON m.run_id = r.id WHERE r.deployment = ? AND r.ok = 1 AND "
            "m.name = ? AND (? IS NULL OR r.id < ?) ORDER BY r.id DESC LIMIT ?", (h, metric, before, before, window))
        values = _numbers(rows, 0)
        if not values:
            return None
        return median(values), len(values), None

    def baseline(self, deployment: DeploymentKey | str, metric: str, *, before: int | None = None,
                 window: int = 10) -> float | None:
        """The pinned run's value if one is pinned, else the median over the last ``window`` good runs
        (only runs older than ``before`` when given); None without history."""
        b = self._baseline(deployment, metric, before, window)
        return b[0] if b else None

    def expected_start_seconds(self, deployment: DeploymentKey | str, window: int = 10) -> float | None:
        """Median time to ready of the last ``window`` ready starts of this deployment (for an ETA)."""
        b = self._baseline(deployment, "cold_start_s", None, window, use_pin=False)
        return b[0] if b else None

    def check_regression(self, deployment: DeploymentKey | str, cold_start_s: float | None = None,
                         output_throughput: float | None = None, margin: float = 0.2, *,
                         before: int | None = None, **metrics: float | None) -> list[Regression]:
        """Metrics worse than their baseline by more than ``margin`` (0.2: 20% slower start, or throughput
        below 80% of the baseline). Other metrics of :data:`DIRECTION` may be passed by name."""
        values = {"cold_start_s": cold_start_s, "output_throughput": output_throughput, **metrics}
        out = []
        for metric, value in values.items():
            if value is None:
                continue
            if metric not in DIRECTION:
                raise ValueError(f"unknown metric {metric!r}; known: {', '.join(DIRECTION)}")
            b = self._baseline(deployment, metric, before, 10)
            if b is None or b[0] <= 0:
                continue
            ratio = value / b[0]
            worse = ratio > 1 + margin if DIRECTION[metric] else ratio < 1 - margin
            if worse:
                out.append(Regression(metric, float(value), b[0], ratio, margin, b[1], b[2]))
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


def _numbers(rows: list[tuple[Any, ...]], col: int) -> list[float]:
    """The column's values that are numbers (a damaged row's text is left out)."""
    out = []
    for r in rows:
        try:
            out.append(float(r[col]))
        except (TypeError, ValueError):
            continue
    return out


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _hash(deployment: DeploymentKey | str) -> str:
    return deployment.hash if isinstance(deployment, DeploymentKey) else deployment
