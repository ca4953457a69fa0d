"""Where the history lives: a SQLite file (a path, the default) or a PostgreSQL database that many nodes share (a
``postgresql://`` or ``postgres://`` URL), as ``--history`` and ``FIRSTLIGHT_HISTORY`` give it.

A URL is shown only masked (:func:`mask`): its password and the values of its secret query parameters
(``password``, ``sslpassword`` and any name :func:`firstlight.redact.is_secret_name` calls secret) become ``***``.
A password may also come from ``FIRSTLIGHT_HISTORY_PASSWORD_FILE`` (its first line) or from libpq's own
``PGPASSWORD`` / ``~/.pgpass``. Runs carry the node that made them: ``FIRSTLIGHT_NODE``, else the host name.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

import platformdirs

from firstlight.redact import MASK, Redactor, is_secret_name

SCHEMES = ("postgresql", "postgres")
# libpq's query parameters that hold a secret beside those is_secret_name knows ("password").
PG_SECRET_PARAMS = frozenset({"password", "sslpassword"})
PASSWORD_FILE_ENV = "FIRSTLIGHT_HISTORY_PASSWORD_FILE"
NODE_ENV = "FIRSTLIGHT_NODE"
MAX_NODE_CHARS = 200

Where = Path | str  # a SQLite file, or a PostgreSQL URL (kept as text: a Path would fold its "//")


def is_url(value: object) -> bool:
    """A PostgreSQL URL (``postgresql://`` or ``postgres://``), not a path."""
    if not isinstance(value, str):
        return False
    scheme, sep, _ = value.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def where(value: str | os.PathLike[str] | None) -> Where | None:
    """``--history``'s value as the history reads it: a URL stays text, anything else is a path."""
    if value is None:
        return None
    if isinstance(value, str) and is_url(value):
        return value
    return Path(value).expanduser()


def default_where() -> Where:
    """$FIRSTLIGHT_HISTORY (a path or a URL), else ``history.sqlite3`` in the per-user data directory."""
    env = os.environ.get("FIRSTLIGHT_HISTORY")
    if env:
        w = where(env)
        assert w is not None
        return w
    return Path(platformdirs.user_data_dir("firstlight")) / "history.sqlite3"


def secrets(url: str) -> list[str]:
    """The secrets a URL holds: its password and the values of its secret query parameters, as given and decoded."""
    out: list[str] = []
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo = netloc.rpartition("@")[0]
            if ":" in userinfo:
                raw = userinfo.partition(":")[2]
                out += [raw, unquote(raw)]
        for pair in parts.query.split("&"):
            k, eq, v = pair.partition("=")
            if eq and v and _secret_param(unquote(k)):
                out += [v, unquote(v)]
        out += [v for k, v in parse_qsl(parts.query) if _secret_param(k) and v]
    except ValueError:
        pass
    return sorted({s for s in out if s}, key=len, reverse=True)


def _secret_param(name: str) -> bool:
    return name.lower() in PG_SECRET_PARAMS or is_secret_name(name)


def mask(value: Where) -> str:
    """A history location as every message shows it: a path as it is, a URL with its secrets ``***``."""
    if not isinstance(value, str) or not is_url(value):
        return str(value)
    r = Redactor(secrets(value))
    out = r.url(value)
    try:
        parts = urlsplit(out)
    except ValueError:
        return out
    if parts.query:  # libpq's secret parameters (PG_SECRET_PARAMS) masked here whatever the redactor's rules
        pairs = []
        for pair in parts.query.split("&"):
            k, eq, v = pair.partition("=")
            pairs.append(f"{k}={MASK}" if eq and v and _secret_param(unquote(k)) else pair)
        out = out.replace(parts.query, "&".join(pairs), 1)
    return out


def redactor_with(url: str, r: Redactor | None = None) -> Redactor:
    """``r`` (or a new redactor) that also masks the URL's secrets and the password file's."""
    r = r if r is not None else Redactor()
    r.add(*secrets(url))
    r.add(password_from_file())
    return r


def password_from_file() -> str | None:
    """The first line of ``$FIRSTLIGHT_HISTORY_PASSWORD_FILE`` (a mounted Secret), None when unset or unreadable."""
    name = os.environ.get(PASSWORD_FILE_ENV)
    if not name:
        return None
    try:
        with open(name, encoding="utf-8") as f:
            line = f.read(4096).splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return line[0].strip() if line and line[0].strip() else None


def node() -> str:
    """This node's name in the fleet's history: $FIRSTLIGHT_NODE, else the host name."""
    name = os.environ.get(NODE_ENV, "").strip() or socket.gethostname() or "unknown"
    return name[:MAX_NODE_CHARS]


def spool_dir(value: Where) -> Path:
    """Where runs wait while the database does not answer: under the user's state directory, one folder per
    database (host, port, database and user: never the password)."""
    assert isinstance(value, str)
    try:
        p = urlsplit(value)
        ident = f"{p.hostname}:{p.port}/{p.path.lstrip('/')}?{p.username}"
    except ValueError:
        ident = mask(value)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return Path(platformdirs.user_state_dir("firstlight")) / "spool" / digest


__all__ = ["NODE_ENV", "PASSWORD_FILE_ENV", "SCHEMES", "Where", "default_where", "exists", "is_url", "mask", "node",
           "password_from_file", "redactor_with", "secrets", "spool_dir", "where"]


def exists(value: Where) -> bool:
    """Whether there is a history to read: a file that exists; a database is always asked."""
    return isinstance(value, str) or value.exists()
