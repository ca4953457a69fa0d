"""The history's SQLite file: its schema and migrations, opening it, corruption, transactions.

Several firstlight processes may write at once (WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` for every
write so that no transaction has to upgrade its lock). A writer killed mid-transaction leaves the last committed
state. A damaged database is never silently dropped: it is moved aside to ``<name>.corrupt-<timestamp>`` (with
its ``-wal``) with a one-line warning, and a new database is started. Only a file with the SQLite header is
ever moved, and only by a writer: a file that is not a database at all (``--history notes.txt``) is refused and
left alone, and a listing (``readonly``) opens the file read-only and moves nothing, so a read-only history can
be listed.

Schema 2 (migration from 1, by the first writer that opens an older file, in one transaction): ``runs`` gains
``start_type``, ``engine_version`` and ``legacy_deployment``; every old row's ``deployment`` is recomputed with
the port-free key of ``firstlight.history.key`` from its stored engine, model, command and GPU count, and its
schema-1 hash kept in ``legacy_deployment`` (a ``--deployment`` given as an old hash still finds it); its start
type and engine version are read from its summary where it has them. A read-only listing of a schema-1 file reads
it as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from firstlight.errors import FirstlightError
from firstlight.files import kind
from firstlight.history.errors import HistoryError, Unreachable
from firstlight.history.key import DeploymentKey
from firstlight.history.location import Where, default_where, is_url, mask, redactor_with, where
from firstlight.history.pg import Budget
from firstlight.history.pg import Connection as PgConnection
from firstlight.history.policy import start_type_of, version_of
from firstlight.redact import Redactor

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 3

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


# 1 -> 2: start types, engine versions, and the deployment key without the port.
_V2_COLUMNS = ("start_type TEXT", "engine_version TEXT", "legacy_deployment TEXT")


def migrate_1_to_2(con: sqlite3.Connection) -> int:
    """Inside the caller's transaction: the new columns, then every row re-keyed. Returns the rows re-keyed."""
    have = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    for col in _V2_COLUMNS:
        if col.split()[0] not in have:
            con.execute(f"ALTER TABLE runs ADD COLUMN {col}")
    rows = con.execute("SELECT id, engine, model, command, gpu_count, summary FROM runs "
                       "WHERE legacy_deployment IS NULL").fetchall()
    plain = Redactor()  # the stored command is masked already
    for run_id, engine, model, command, gpus, summary_json in rows:
        key = DeploymentKey.create(engine, model, command, gpus if isinstance(gpus, int) else None, plain)
        try:
            summary = json.loads(summary_json)
        except (TypeError, ValueError):
            summary = {}
        summary = summary if isinstance(summary, dict) else {}
        con.execute("UPDATE runs SET legacy_deployment = deployment, deployment = ?, start_type = ?, "
                    "engine_version = ? WHERE id = ?",
                    (key.hash, start_type_of(summary), version_of(summary), run_id))
    con.execute("CREATE INDEX IF NOT EXISTS runs_legacy ON runs(legacy_deployment)")
    return len(rows)


def default_path() -> Where:
    """$FIRSTLIGHT_HISTORY (a path or a ``postgresql://`` URL), else ``history.sqlite3`` in the per-user data
    directory."""
    return default_where()


# 2 -> 3: the node that made each run, and its unique id (a run sent twice from the spool is stored once).
_V3_COLUMNS = ("node TEXT", "uid TEXT")


def migrate_2_to_3(con: sqlite3.Connection) -> None:
    have = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    for col in _V3_COLUMNS:
        if col.split()[0] not in have:
            con.execute(f"ALTER TABLE runs ADD COLUMN {col}")
    con.execute("CREATE UNIQUE INDEX IF NOT EXISTS runs_uid ON runs(uid)")




def _is_corruption(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    msg = str(e).lower()
    return "not a database" in msg or "malformed" in msg or "corrupt" in msg


class _Corrupt(FirstlightError):
    """A file that is not a database (recreated, or named in a HistoryError)."""


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



class Database:
    """The history database at ``path`` (default: ``platformdirs.user_data_dir("firstlight")/history.sqlite3``),
    or, given a ``postgresql://`` URL, the fleet's database (``firstlight.history.pg``): the same tables and
    statements, so that nothing above the store knows which it has. ``path`` is the file, or the URL masked."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout: float = 30.0,
                 warn: Callable[[str], None] = _warn_stderr, redactor: Redactor | None = None,
                 readonly: bool = False, budget: Budget | None = None) -> None:
        """``readonly``: for listings: the file is opened read-only, nothing is created, moved or written.
        ``budget``: a start's time for its shared database, all calls together (``firstlight.history.pg``)."""
        loc = where(path) if path is not None else default_path()
        assert loc is not None
        self.busy_timeout = busy_timeout
        self.readonly = readonly
        self.budget = budget
        self.warn = warn
        self.warnings: list[str] = []
        if redactor is None:
            redactor = Redactor()
            redactor.add_from_env()
        self.redactor = redactor
        self.schema = SCHEMA_VERSION  # the file's, once open
        self.url: str | None = loc if isinstance(loc, str) and is_url(loc) else None
        self.shared = self.url is not None  # many nodes write here: runs are spooled when it does not answer
        self.path: Path | str = mask(loc)
        self.file = Path(loc) if self.url is None else Path()
        self.unreached: str | None = None  # why the shared database was not reached, if it was not
        self._empty = False  # a shared database read (never written) before any run made its tables
        self._con: Any
        if self.url is not None:
            redactor_with(self.url, self.redactor)
            self._con = self._open_shared(self.url)
        else:
            self.path = self.file
            self._con = self._open()

    def _open_shared(self, url: str) -> PgConnection | None:
        """The fleet's database; None (and ``unreached`` set) when it does not answer, refuses the login or is
        newer: a run then goes on and its record waits in the spool."""
        try:
            con = PgConnection(url, self.redactor, readonly=self.readonly, budget=self.budget)
            if self.readonly:  # a listing creates and migrates nothing: a database without the tables has no runs
                self.schema = con.schema_version()
                if self.schema > SCHEMA_VERSION:
                    con.close()
                    raise HistoryError(f"history {self.path} was written by a newer firstlight (schema "
                                       f"{self.schema})")
                self._empty = self.schema == 0
            else:
                self.schema = con.init_schema()
            return con
        except Unreachable as e:
            self.unreached = str(e)
            return None

    def end_budget(self) -> None:
        """The start is over (its run recorded or spooled): later calls (serving changes) have their own deadlines
        only. A database that spent the budget stays unreachable."""
        self.budget = None
        if isinstance(self._con, PgConnection):
            self._con.budget = None

    @property
    def con(self) -> Any:
        """The open connection; Unreachable at once when the shared database was not reached."""
        if self._con is None:
            raise Unreachable(self.unreached or f"history {self.path} not reached")
        return self._con

    # -- opening, corruption ---------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.file, timeout=self.busy_timeout, isolation_level=None)
        con.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        con.execute("PRAGMA synchronous = NORMAL")  # with WAL: a crash of the process loses nothing committed
        return con

    def _connect_readonly(self) -> sqlite3.Connection:
        """Read-only; ``immutable`` where even the WAL's shared memory cannot be created (a read-only directory)."""
        uri = "file:" + urllib.parse.quote(str(self.file.absolute()))
        # A header that says WAL (byte 19 is 2) makes even a read-only open create the -wal and -shm files: a
        # damaged file's (1 random header in 300 says so) are removed again, so a listing leaves nothing behind.
        sidecars = [self.file.with_name(self.file.name + suffix) for suffix in ("-wal", "-shm")]
        existed = [f.exists() for f in sidecars]
        for extra in ("", "&immutable=1"):
            try:
                con = sqlite3.connect(f"{uri}?mode=ro{extra}", uri=True, timeout=self.busy_timeout,
                                      isolation_level=None)
                con.execute("PRAGMA user_version").fetchone()
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return con
            except sqlite3.DatabaseError as e:
                if _is_corruption(e):
                    for f, was in zip(sidecars, existed, strict=True):
                        if not was and f.is_file() and (f.name.endswith("-shm") or f.stat().st_size == 0):
                            with contextlib.suppress(OSError):
                                f.unlink()
                    raise _Corrupt(str(e)) from None
                last = e
        raise last

    def set_busy_timeout(self, seconds: float) -> None:
        """How long a write waits for another writer's lock (short on the way to stopping a server)."""
        self.busy_timeout = seconds
        if self.shared:  # its statements have their own deadline (firstlight.history.pg)
            return
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
            mode = os.stat(self.file).st_mode
        except OSError:
            mode = None  # no file yet (or unreadable): said below
        if mode is not None and not stat.S_ISREG(mode):
            raise HistoryError(f"history database {self.file} is {kind(mode)}, not a regular file; pass another "
                               "--history")
        if self.readonly:
            return self._open_readonly()
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.file.exists()
            try:
                con = self._connect_checked()
            except _Corrupt as e:
                if not _is_sqlite_file(self.file):
                    raise HistoryError(f"{self.file} is not a SQLite database; firstlight leaves it alone (pass "
                                       "another --history)") from None
                self._move_aside(str(e))
                con = self._connect_checked()
            if fresh:
                with contextlib.suppress(OSError):
                    os.chmod(self.file, 0o600)
            self._init_schema(con)
            return con
        except _Corrupt as e:
            raise HistoryError(f"history database {self.file} is still unreadable after moving it aside: {e}") from None
        except (sqlite3.Error, OSError) as e:
            raise HistoryError(f"cannot open history database {self.file}: {e}") from None

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.file.exists():  # a listing creates nothing: say what is wrong, not "not a database"
            raise HistoryError(f"no history at {self.file} (no such file)")
        if not _is_sqlite_file(self.file):
            raise HistoryError(f"{self.file} is not a SQLite database")
        try:
            con = self._connect_readonly()
        except _Corrupt as e:
            raise HistoryError(f"history database {self.file} is damaged ({e}); a run (not a listing) moves it "
                               "aside") from None
        except (sqlite3.Error, OSError) as e:
            raise HistoryError(f"cannot open history database {self.file} read-only: {e}") from None
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            con.close()
            raise HistoryError(f"history database {self.file} was written by a newer firstlight (schema {version})")
        self.schema = version  # an older file is read as it is: a listing migrates nothing
        return con

    def _move_aside(self, reason: str) -> None:
        lock_path = self.file.with_name(self.file.name + ".lock")
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
                dest = self.file.with_name(f"{self.file.name}.corrupt-{stamp}")
                n = 1
                while dest.exists():
                    n += 1
                    dest = self.file.with_name(f"{self.file.name}.corrupt-{stamp}-{n}")
                os.replace(self.file, dest)
                for suffix in ("-wal", "-shm"):
                    side = self.file.with_name(self.file.name + suffix)
                    if side.exists():
                        os.replace(side, dest.with_name(dest.name + suffix))
                msg = f"history database {self.file} is corrupt ({reason}); moved it to {dest}, starting a new one"
                self.warnings.append(msg)
                self.warn(msg)
            finally:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def _init_schema(self, con: sqlite3.Connection) -> None:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise HistoryError(f"history database {self.file} was written by a newer firstlight (schema {version})")
        self.schema = SCHEMA_VERSION
        if version == SCHEMA_VERSION:
            return
        con.execute("BEGIN IMMEDIATE")
        try:
            # another writer may have migrated it while this one waited for the lock
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version < 1:
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        con.execute(stmt)
            if version < 2:
                migrate_1_to_2(con)
            if version < 3:
                migrate_2_to_3(con)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def _write(self) -> Iterator[Any]:
        """One transaction (``BEGIN IMMEDIATE`` in SQLite: no lock upgrade), committed whole or rolled back."""
        con = self.con
        try:
            con.execute("BEGIN" if self.shared else "BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise HistoryError(f"cannot write history database {self.path}: {e}") from None
        try:
            yield con
            con.execute("COMMIT")
        except BaseException as e:
            if not isinstance(e, Unreachable):  # a connection that did not answer is abandoned, not rolled back
                with contextlib.suppress(sqlite3.Error, HistoryError):
                    con.execute("ROLLBACK")
            if isinstance(e, sqlite3.Error):
                raise HistoryError(f"cannot write history database {self.path}: {e}") from None
            raise

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._empty:
            return []
        try:
            return list(self.con.execute(sql, args).fetchall())
        except sqlite3.Error as e:
            if self.readonly and "no such table" in str(e):
                return []  # an empty database: nothing recorded yet
            raise HistoryError(f"cannot read history database {self.path}: {e}") from None

    def _additive(self, con: Any, ddl: str) -> None:
        """A table created on first use in SQLite (older files lack it); the shared schema has them all."""
        if not self.shared:
            con.execute(ddl)

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(HistoryError):
                self._con.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
