"""A throwaway PostgreSQL server for the history's tests: Debian's postgresql 15 binaries, a cluster in a temporary
directory, listening on 127.0.0.1 (a free port) and on a unix socket in that directory, run as ``nobody``
(PostgreSQL refuses to run as root), stopped by its PID at the end. Skipped where the binaries are missing,
except under CI."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.support.common import require, wait_for

BIN = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "s3cret-pw-for-tests"  # a real password: the tests check that it is never shown
USER = "fleet"
SLOW_USER = "slowfleet"  # the role Postgres.slow holds to a slow answer


def available() -> bool:
    return (BIN / "postgres").exists() and (BIN / "initdb").exists()


def _as_nobody(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Postgres:
    """A running server: ``url`` with the password, ``proc`` the postmaster."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    def url_with(self, password: str) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - the server's for its life
        self.proc = subprocess.Popen(
            _as_nobody([str(BIN / "postgres"), "-D", str(self.root / "data"), "-p", str(self.port),
                        "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.root}",
                        "-c", "fsync=off", "-c", "max_connections=50"]),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        wait_for(self._answers, 60, "postgres to accept connections")

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"postgres exited: {(self.root / 'server.log').read_text()[-2000:]}")
        import psycopg

        try:
            psycopg.connect(self.url, connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """Fast shutdown (SIGINT) of the postmaster started here, by its PID."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGCONT)
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.wait(10)

    @contextmanager
    def slow(self, seconds: float) -> Iterator[str]:
        """The database as a slow one answers: every statement that reads the history's tables (runs, metrics, its
        schema version) takes ``seconds`` longer (``pg_sleep``, once per statement, from a row-level security
        policy), each still within its deadline. Yields the URL of the role it is slow for (a superuser, the
        owner, is never held to a policy)."""
        import psycopg

        url = f"postgresql://{SLOW_USER}:{PASSWORD}@127.0.0.1:{self.port}/postgres"
        tables = ("runs", "metrics", "firstlight_schema")
        with psycopg.connect(self.url, connect_timeout=5, autocommit=True) as admin:
            if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (SLOW_USER,)).fetchone() is None:
                admin.execute(f"CREATE ROLE {SLOW_USER} LOGIN PASSWORD '{PASSWORD}'")
            admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {SLOW_USER}")
            admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {SLOW_USER}")
            admin.execute(f"""CREATE OR REPLACE FUNCTION firstlight_test_slow() RETURNS boolean LANGUAGE plpgsql
                VOLATILE AS $$ BEGIN
                  IF current_setting('firstlight_test.at', true) IS DISTINCT FROM statement_timestamp()::text THEN
                    PERFORM set_config('firstlight_test.at', statement_timestamp()::text, false);
                    PERFORM pg_sleep({seconds});
                  END IF;
                  RETURN true;
                END $$""")
            for t in tables:
                admin.execute(f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY")
                admin.execute(f"CREATE POLICY slow ON {t} TO {SLOW_USER} USING (firstlight_test_slow()) "
                              "WITH CHECK (true)")
        try:
            yield url
        finally:
            with psycopg.connect(self.url, connect_timeout=5, autocommit=True) as admin:
                for t in tables:
                    admin.execute(f"DROP POLICY IF EXISTS slow ON {t}")
                    admin.execute(f"ALTER TABLE {t} DISABLE ROW LEVEL SECURITY")

    def freeze(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A fresh cluster with the user ``fleet`` (password :data:`PASSWORD`, md5/scram over TCP), running."""
    require(available(), f"PostgreSQL 15 ({BIN}; Debian's postgresql package)")
    require(shutil.which("setpriv") is not None or os.geteuid() != 0, "setpriv")
    import pytest

    pytest.importorskip("psycopg")
    root = Path(tempfile.mkdtemp(prefix="firstlight-pg-"))
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "nobody", "nogroup")
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, "nobody", "nogroup")
    subprocess.run(_as_nobody([str(BIN / "initdb"), "-D", str(root / "data"), "-U", USER, "--pwfile", str(pwfile),
                               "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync"]),
                   check=True, capture_output=True, timeout=120, cwd=root)
    server = Postgres(root, _free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


__all__ = ["PASSWORD", "USER", "Postgres", "available", "postgres_server"]
