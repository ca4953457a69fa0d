"""Keep secrets out of everything firstlight prints or stores.

Values of secret-looking options in a command line (``--api-key X``, ``--hf-token=X``, lmdeploy's plural
``--api-keys K1 K2``, and the same inside a shell string: ``bash -c "... --api-key X"``), credentials in URLs
(``http://user:pass@host``, ``?api_key=...``), the API key firstlight itself sends, secret-looking environment
variables, and token-shaped strings in log lines (``api_key='...'`` in SGLang's ServerArgs dump,
``--api-key X`` echoed by a server, ``Bearer ...``, ``hf_...``, ``sk-...``) become ``***``.

One ``Redactor`` is applied at every exit: ``observation`` for what the session records and reports (log
lines, probe details such as a 401 body that echoes the Authorization header, notes, URLs), ``data`` for the
summary and the history rows. Masking must not damage evidence: ``key=lambda x: x[0]`` or ``key=len`` in a
traceback is code, not a secret.
"""

from __future__ import annotations

import dataclasses
import keyword
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

from firstlight.files import open_regular

MASK = "***"
# A key is secret when its last word is one of these: api_key, --hf-token, HF_TOKEN, OPENAI_API_KEY, password,
# --api-keys, and any name ending in password (sslpassword, PGPASSWORD) or passphrase. Not: tokenizer_path,
# max_tokens, #tokens.
_SECRET_WORDS = r"(?:keys?|apikeys?|token|secrets?|passwords?|passwd|credentials?|auth)"
# A password's name is secret glued to other words too (libpq's sslpassword, PGPASSWORD): no other word ends
# so. "key" and "token" are not (monkey, ntoken).
_SECRET_NAME = re.compile(rf"(?:^|[-_.\s])(?:--?)?{_SECRET_WORDS}$|^(?:--?)?{_SECRET_WORDS}$"
                          r"|(?:password|passwd|passphrase)s?$", re.I)
# Options that take several values (lmdeploy's --api-keys K1 K2): every following non-option word is secret.
_PLURAL = re.compile(r"(?:keys|secrets|passwords|credentials)$", re.I)
# The look-behind anchors a key at a word start, which keeps a long unbroken word linear rather than quadratic.
_KEY_VALUE = re.compile(r"""(?<![\w.-])(?P<k>[\w.-]+)(?P<sep>["']?\s*(?:=|:(?!//))\s*)(?P<q>["']?)"""
                        r"""(?P<v>(?!None\b|null\b|False\b|True\b|\*\*\*)[^\s"',()}\]=]+)(?P<after>\(?)""")
# ``--api-key VALUE`` printed in a log line (an engine echoing its argv), the value not known beforehand.
_FLAG_VALUE = re.compile(r"""(?<![\w-])(?P<k>--?[\w-]*?(?:key|token|secret|password)s?)(?P<sep>[ =]["']?)"""
                         r"""(?P<v>(?!-)(?!\*\*\*)[^\s"',)\]]+)""", re.I)
# Credentials in a URL's user information: scheme://user:PASSWORD@host
_URL_USERINFO = re.compile(r"(?P<k>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:]*:)(?P<v>[^\s/@]+)(?=@)")
# A URL in text, up to the first space or quote: masked whole by Redactor.url, before the key=value pass (which
# would read ``host:1/v1?api_key`` as one key and value and miss the key).
_URL = re.compile(r"""\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]*[^\s"'<>.,;:)\]]""")
_TOKENS = [
    re.compile(r"(?P<k>\bBearer\s+)(?P<v>[A-Za-z0-9._~+/=-]+)"),
    re.compile(r"(?P<k>)(?P<v>\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{16,})"),
]
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
# An environment variable's name (``-e NAME=VALUE``, ``NAME=VALUE cmd``); the options that name an env file
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_ENV_FILE_OPTIONS = frozenset({"--env-file"})
MAX_ENV_FILE_BYTES = 1 << 20  # an env file is read this far: its secrets come first in any real one

T = TypeVar("T")


def is_secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name.strip("\"' ")) is not None


_PLAIN_NAME = re.compile(r"[a-z_]+(?:\.[a-z_]+)*")


def _is_code(name: str, value: str, after: str) -> bool:
    """A value that is code in a traceback, not a secret: ``key=lambda x: x[0]``, ``key=f(x)``, and for a
    bare ``key`` (``sorted(..., key=len)``) a plain lower-case name such as ``len`` or ``str.lower``."""
    if keyword.iskeyword(value) or after == "(":
        return True
    return name == "key" and _PLAIN_NAME.fullmatch(value) is not None


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = {s for s in secrets if s and len(s) >= 4}
        self._sorted: list[str] | None = None

    def add(self, *values: str | None) -> None:
        for v in values:
            if v and len(v) >= 4:
                self.secrets.add(v)

    def add_from_argv(self, argv: Sequence[str]) -> None:
        """Learn the values of secret options, also inside shell strings (``bash -c "... --api-key X"``), and of
        secret-named environment assignments: ``HF_TOKEN=X cmd``, a container's ``-e HF_TOKEN=X``,
        ``--env=HF_TOKEN=X`` and the files of ``--env-file F``, whose values the server may print."""
        i = 0
        while i < len(argv):
            arg = argv[i]
            if arg.startswith("-"):
                name, eq, value = arg.partition("=")
                if name in _ENV_FILE_OPTIONS:
                    path = value if eq else argv[i + 1] if i + 1 < len(argv) else None
                    self.add_from_env_file(path)
                    i += 0 if eq else 1
                elif eq:
                    self._add_assignment(value)
                if is_secret_name(name):
                    if eq:
                        self.add(value)
                    else:
                        values = self._values_after(argv, i, plural=bool(_PLURAL.search(name)))
                        self.add(*values)
                        i += len(values)
            elif any(c.isspace() for c in arg):  # a shell string, or a quoted command in one argument
                self.add_from_argv(_split(arg))
            else:
                self._add_assignment(arg)
            i += 1

    def _add_assignment(self, word: str) -> None:
        """``NAME=VALUE`` with a secret-looking NAME (an environment variable given to the server): its value."""
        name, eq, value = word.partition("=")
        if eq and _ENV_NAME.fullmatch(name) and is_secret_name(name):
            self.add(value)

    def add_from_env_file(self, path: str | None) -> None:
        """The secret-named values of a ``--env-file`` (``NAME=VALUE`` lines, as docker and podman read them);
        a file that cannot be read (or is not a regular file: a FIFO never blocks) teaches nothing."""
        if not path:
            return
        try:
            with open_regular(path) as f:
                text = f.read(MAX_ENV_FILE_BYTES).decode("utf-8", "replace")
        except OSError:
            return
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                self._add_assignment(line.removeprefix("export "))

    @staticmethod
    def _values_after(argv: Sequence[str], i: int, plural: bool) -> list[str]:
        out: list[str] = []
        for v in argv[i + 1:]:
            if v.startswith("-") or (out and not plural):
                break
            out.append(v)
        return out

    def add_from_env(self, env: Mapping[str, str] | None = None) -> None:
        for k, v in (os.environ if env is None else env).items():
            if is_secret_name(k):
                self.add(v)

    def add_from_url(self, url: str | None) -> None:
        """Learn a URL's password and the values of its secret query parameters."""
        if not url:
            return
        try:
            parts = urlsplit(url)
            self.add(parts.password)
            for k, v in parse_qsl(parts.query, keep_blank_values=False):
                if is_secret_name(k):
                    self.add(v)
        except ValueError:
            return

    def _longest_first(self) -> list[str]:
        """The known secrets, longest first (a secret that contains another is masked whole); cached."""
        if self._sorted is None or len(self._sorted) != len(self.secrets):
            self._sorted = sorted(self.secrets, key=len, reverse=True)
        return self._sorted

    def _known(self, s: str) -> str:
        for secret in self._longest_first():
            if secret in s:
                s = s.replace(secret, MASK)
        return s

    def url(self, url: str) -> str:
        """A URL as every command shows it: the password of ``user:password@`` masked, the values of
        secret-looking query parameters (``api_key``, ``token``: :func:`is_secret_name`) masked, the rest intact."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return _URL_USERINFO.sub(lambda m: f"{m['k']}{MASK}", self._known(url))
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user, colon, _ = userinfo.partition(":")
            netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"  # a lone userinfo is a token
        query = "&".join(_masked_pair(p) for p in parts.query.split("&")) if parts.query else ""
        return self._known(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))

    def text(self, s: str) -> str:
        s = self._known(s)
        if "://" in s:
            s = _URL.sub(lambda m: self.url(m[0]), s)
            s = _URL_USERINFO.sub(lambda m: f"{m['k']}{MASK}", s)
        s = _KEY_VALUE.sub(self._key_value, s)
        if "-" in s:
            s = _FLAG_VALUE.sub(lambda m: f"{m['k']}{m['sep']}{MASK}" if is_secret_name(m["k"]) else m[0], s)
        for pat in _TOKENS:
            s = pat.sub(lambda m: f"{m['k']}{MASK}", s)
        return s

    @staticmethod
    def _key_value(m: re.Match[str]) -> str:
        if not is_secret_name(m["k"]) or _is_code(m["k"], m["v"], m["after"]):
            return m[0]
        return f"{m['k']}{m['sep']}{m['q']}{MASK}{m['after']}"

    def argv(self, argv: Sequence[str]) -> list[str]:
        out: list[str] = []
        hide = 0  # values still to hide after a secret option; -1: all up to the next option
        for arg in argv:
            if hide and not arg.startswith("-"):
                out.append(MASK)
                hide = hide - 1 if hide > 0 else -1
                continue
            hide = 0
            name, eq, _ = arg.partition("=")
            if arg.startswith("-") and is_secret_name(name):
                if eq:
                    out.append(f"{name}={MASK}")
                else:
                    out.append(arg)
                    hide = -1 if _PLURAL.search(name) else 1
                continue
            out.append(self.text(arg))
        return out

    def data(self, obj: T) -> T:
        """A JSON-like value (a summary, a history row) with every string redacted and the values of
        secret-named keys masked."""
        return self._data(obj)

    def _data(self, obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: MASK if isinstance(v, str) and v and is_secret_name(str(k)) else self._data(v)
                    for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._data(v) for v in obj]
        if isinstance(obj, str):
            return self.text(obj)
        return obj

    def observation(self, obs: T) -> T:
        """An observation (any frozen dataclass of ``firstlight.timeline``) with its text fields redacted:
        log lines, probe details and generated text (and its tokens), notes, the URL, the weights' path."""
        if not dataclasses.is_dataclass(obs) or isinstance(obs, type):
            return obs
        changes: dict[str, object] = {}
        for f in dataclasses.fields(obs):
            v = getattr(obs, f.name)
            if isinstance(v, str) and f.name in ("text", "detail", "message", "url", "command", "path"):
                red = self.text(v)
                if red != v:
                    changes[f.name] = red
            elif f.name == "tokens" and isinstance(v, tuple):  # a generation's tokens, one by one
                tokens = tuple(self.text(x) for x in v)
                if tokens != v:
                    changes[f.name] = tokens
        return dataclasses.replace(obs, **changes) if changes else obs


def _masked_pair(pair: str) -> str:
    """One ``key=value`` of a query string, its value masked when the key names a secret."""
    key, eq, value = pair.partition("=")
    return f"{key}={MASK}" if eq and value and is_secret_name(unquote_plus(key)) else pair


def _split(command: str) -> list[str]:
    """Words of a shell string; plain whitespace when its quotes do not balance."""
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def redactor_for(command: Sequence[str] = (), api_key: str | None = None, url: str | None = None,
                 env: Mapping[str, str] | None = None) -> Redactor:
    """The one redactor of a run: what the command, firstlight's own key, the URL and the environment hold."""
    r = Redactor()
    r.add_from_argv(command)
    r.add_from_env(env)
    r.add(api_key)
    r.add_from_url(url)
    return r


__all__ = ["MASK", "Redactor", "is_secret_name", "redactor_for"]
