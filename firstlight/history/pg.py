"""The history in PostgreSQL: one database that every node of a fleet writes its starts to (psycopg 3, the
``postgres`` extra).

Every call has a deadline the caller keeps: the connection :data:`CONNECT_TIMEOUT_S` (libpq's
``connect_timeout``), each statement :data:`QUERY_TIMEOUT_S` (the server's ``statement_timeout``, and the client
stops waiting :data:`SLACK_S` later: a server that stopped answering altogether, a frozen postmaster or a cut
network, cancels nothing by itself). The first call that misses its deadline, loses its connection or is refused
makes the database :class:`Unreachable` for the rest of the process: every later call fails at once, so a start
waits at most :data:`BOUND_S` on a database that does not answer. A database that is slow but answers each call
within its deadline is held to a :class:`Budget` for the whole start (:data:`START_BOUND_S`): every call of the
start (the connection, the reads before the watch, the spool's send, the comparison and the run's record after
it) spends from it, each waits no longer than what is left, and once it is spent the database is Unreachable
for the start (its run is spooled). Errors are one line with the URL's secrets masked.

The schema is the SQLite file's (``firstlight.history.db``), in PostgreSQL's types, its version in
``firstlight_schema``; the first writer of a version creates or migrates it under an advisory lock, in one
transaction. A database of a newer schema is not used (it is Unreachable: the runs wait in the spool).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from firstlight.history.errors import HistoryError, Unreachable
from firstlight.history.location import mask, password_from_file
from firstlight.redact import Redactor

CONNECT_TIMEOUT_S = 3  # libpq counts whole seconds (and at least 2)
QUERY_TIMEOUT_S = 2.0
SLACK_S = 0.5  # the client's deadline beyond the server's own: its timeout error comes first when it can
BOUND_S = CONNECT_TIMEOUT_S + SLACK_S + QUERY_TIMEOUT_S + SLACK_S  # the most a start waits on the database: 6 s
START_BOUND_S = 10.0  # all of a start's calls together, on a database that answers each call slowly

SCHEMA_VERSION = 3
_LOCK = 0x6669727374  # "first": the advisory lock under which the schema is created or migrated

# Version 3 (the first in PostgreSQL): the SQLite schema 3's tables. A device number names a filesystem on one
# machine only: in a shared database the store keys ``disks`` by node and device.
_SCHEMA_3 = (
    """CREATE TABLE IF NOT EXISTS runs (
  id BIGSERIAL PRIMARY KEY,
  created_at DOUBLE PRECISION NOT NULL,
  kind TEXT NOT NULL,
  deployment TEXT NOT NULL,
  engine TEXT, model TEXT, command TEXT, gpu_count INTEGER,
  ok INTEGER NOT NULL,
  pinned INTEGER NOT NULL DEFAULT 0,
  summary TEXT NOT NULL,
  bench TEXT,
  start_type TEXT, engine_version TEXT, legacy_deployment TEXT,
  node TEXT, uid TEXT UNIQUE
)""",
    "CREATE INDEX IF NOT EXISTS runs_deployment ON runs(deployment, id)",
    "CREATE INDEX IF NOT EXISTS runs_legacy ON runs(legacy_deployment)",
    """CREATE TABLE IF NOT EXISTS metrics (
  run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (run_id, name)
)""",
    """CREATE TABLE IF NOT EXISTS timelines (
  run_id BIGINT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  data BYTEA NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS serving (
  run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  t DOUBLE PRECISION NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS serving_run ON serving(run_id)",
    """CREATE TABLE IF NOT EXISTS disks (
  device TEXT PRIMARY KEY,
  mount TEXT NOT NULL,
  fstype TEXT NOT NULL,
  rate DOUBLE PRECISION NOT NULL,
  cache_rate DOUBLE PRECISION,
  bytes BIGINT NOT NULL,
  measured_at DOUBLE PRECISION NOT NULL
)""",
)

# Each version's statements, applied in order from the database's version to SCHEMA_VERSION.
MIGRATIONS: dict[int, tuple[str, ...]] = {3: _SCHEMA_3}

T = TypeVar("T")


class _Rows:
    """A statement's answer, read whole inside the deadline (the sqlite3 cursor's methods the store uses)."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


def _first_line(e: BaseException) -> str:
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    return lines[0] if lines else type(e).__name__


class Budget:
    """The time a start may spend on its history, all calls together (:data:`START_BOUND_S`): what each call
    took is spent from it, and each call may wait no longer than what is left."""

    def __init__(self, seconds: float = START_BOUND_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.spent = 0.0

    def left(self) -> float:
        return max(self.seconds - self.spent, 0.0)

    def spend(self, seconds: float) -> None:
        self.spent += max(seconds, 0.0)


class Connection:
    """One connection to the fleet's database, with the sqlite3 connection's ``execute`` (``?`` placeholders)."""

    def __init__(self, url: str, redactor: Redactor, *, connect_timeout: float = CONNECT_TIMEOUT_S,
                 query_timeout: float = QUERY_TIMEOUT_S, readonly: bool = False, budget: Budget | None = None
                 ) -> None:
        """``readonly``: every transaction of the session is read-only (the server refuses a write). ``budget``:
        the start's, that every call spends from (none: each call has its own deadline only)."""
        self.name = mask(url)
        self.budget = budget
        self.redactor = redactor
        self.query_timeout = query_timeout
        self.down: str | None = None  # why it is Unreachable, once it is
        try:
            import psycopg
        except ImportError:
            raise HistoryError("a postgresql:// history needs psycopg: pip install 'firstlight[postgres]'") from None
        self._psycopg = psycopg
        kw: dict[str, Any] = {"connect_timeout": max(2, int(connect_timeout)), "autocommit": True,
                              "cursor_factory": psycopg.ClientCursor, "application_name": "firstlight",
                              "options": f"-c statement_timeout={int(query_timeout * 1000)}"
                                         + (" -c default_transaction_read_only=on" if readonly else "")}
        password = password_from_file()
        if password:
            kw["password"] = password
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            raise HistoryError(f"history URL {self.name} cannot be read (see libpq's connection URIs)") from None
        self._con: Any = self._call(lambda: psycopg.connect(url, **kw), connect_timeout + SLACK_S, "connect")

    # -- every call, with its deadline -----------------------------------------------------------------------
    def _call(self, fn: Callable[[], T], deadline: float, what: str) -> T:
        """``fn`` in a thread of its own, waited for ``deadline`` seconds at most; a call left behind is abandoned
        (its thread ends when its socket does) and the database is Unreachable from then on."""
        if self.down is not None:
            raise Unreachable(self.down)
        budget = self.budget
        bounded = budget is not None and budget.left() < deadline  # what is left of the start's time cuts it short
        if budget is not None:
            if budget.left() <= 0:
                self._fail(self._spent(budget))
            deadline = min(deadline, budget.left())
        began = budget.clock() if budget is not None else 0.0
        out: list[T] = []
        err: list[BaseException] = []

        def run() -> None:
            try:
                out.append(fn())
            except BaseException as e:
                err.append(e)

        t = threading.Thread(target=run, name="firstlight-history-pg", daemon=True)
        t.start()
        t.join(deadline)
        if budget is not None:
            budget.spend(budget.clock() - began)
        if t.is_alive():
            if bounded and budget is not None:
                self._fail(self._spent(budget))
            self._fail(f"history {self.name} not reached: no answer to {what} in {deadline:g} s")
        if err:
            e = err[0]
            if isinstance(e, self._psycopg.OperationalError):  # down, refused, timed out, connection lost
                self._fail(f"history {self.name} not reached: {self.redactor.text(_first_line(e))}")
            if isinstance(e, self._psycopg.Error):
                raise HistoryError(f"history {self.name}: {self.redactor.text(_first_line(e))}") from None
            raise e
        return out[0]

    def _spent(self, budget: Budget) -> str:
        return (f"history {self.name} too slow: this start's calls to it took its bound of {budget.seconds:g} s "
                "in all")

    def _fail(self, why: str) -> None:
        self.down = why
        raise Unreachable(why)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> _Rows:
        """One statement (``?`` placeholders, as sqlite3's); its rows read whole within the deadline."""
        query = sql.replace("%", "%%").replace("?", "%s")

        def run() -> _Rows:
            cur = self._con.execute(query, list(args))
            return _Rows([tuple(r) for r in cur.fetchall()] if cur.description else [])
        return self._call(run, self.query_timeout + SLACK_S, "a query")

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        query = sql.replace("%", "%%").replace("?", "%s")
        if rows:
            self._call(lambda: self._con.cursor().executemany(query, [list(r) for r in rows]),
                       self.query_timeout + SLACK_S, "a query")

    def close(self) -> None:
        con, self._con = self._con, None
        if con is not None and self.down is None:  # a connection left in a stuck call is not waited for
            self._call(con.close, SLACK_S, "close")

    # -- the schema ------------------------------------------------------------------------------------------
    def init_schema(self) -> int:
        """Create or migrate the schema to :data:`SCHEMA_VERSION` (one transaction, under the advisory lock);
        Unreachable when the database is newer. Returns the version."""
        version = self._version()
        if version > SCHEMA_VERSION:
            self._fail(f"history {self.name} was written by a newer firstlight (schema {version}); this run is not "
                       "recorded there")
        if version == SCHEMA_VERSION:
            return version
        self.execute("BEGIN")
        try:
            self.execute("SELECT pg_advisory_xact_lock(?)", (_LOCK,))
            self.execute("CREATE TABLE IF NOT EXISTS firstlight_schema (version INTEGER NOT NULL)")
            row = self.execute("SELECT max(version) FROM firstlight_schema").fetchone()
            version = int(row[0]) if row and row[0] is not None else 0  # another writer may have done it meanwhile
            for v in sorted(MIGRATIONS):
                if version < v <= SCHEMA_VERSION:
                    for stmt in MIGRATIONS[v]:
                        self.execute(stmt)
            if version < SCHEMA_VERSION:
                self.execute("DELETE FROM firstlight_schema")
                self.execute("INSERT INTO firstlight_schema (version) VALUES (?)", (SCHEMA_VERSION,))
            self.execute("COMMIT")
        except BaseException:
            if self.down is None:
                self.execute("ROLLBACK")
            raise
        return SCHEMA_VERSION

    def schema_version(self) -> int:
        """The database's schema version, 0 before the first writer made it."""
        return self._version()

    def _version(self) -> int:
        row = self.execute("SELECT to_regclass('firstlight_schema') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return 0
        got = self.execute("SELECT max(version) FROM firstlight_schema").fetchone()
        return int(got[0]) if got and got[0] is not None else 0


__all__ = ["BOUND_S", "CONNECT_TIMEOUT_S", "MIGRATIONS", "QUERY_TIMEOUT_S", "SCHEMA_VERSION", "START_BOUND_S", "Budget",
           "Connection"]
