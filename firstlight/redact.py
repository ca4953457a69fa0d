"""Keep secrets out of everything firstlight prints or stores.

Values of secret-looking options in a command line (``--api-key X``, ``--hf-token=X``), the API key
firstlight itself sends, secret-looking environment variables, and token-shaped strings in log lines
(``api_key='...'`` in SGLang's ServerArgs dump, ``Bearer ...``, ``hf_...``, ``sk-...``) become ``***``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

MASK = "***"
# A key is secret when its last word is one of these: api_key, --hf-token, HF_TOKEN, OPENAI_API_KEY, password.
# Not: tokenizer_path, max_tokens, #tokens.
_SECRET_WORDS = r"(?:key|apikey|token|secret|password|passwd|credentials?|auth)"
_SECRET_NAME = re.compile(rf"(?:^|[-_.\s])(?:--?)?{_SECRET_WORDS}$|^(?:--?)?{_SECRET_WORDS}$", re.I)
# The look-behind anchors a key at a word start, which keeps a long unbroken word linear rather than quadratic.
_KEY_VALUE = re.compile(r"""(?<![\w.-])(?P<k>[\w.-]+)(?P<sep>["']?\s*[=:]\s*)(?P<q>["']?)"""
                        r"""(?P<v>(?!None\b|null\b|False\b|True\b|\*\*\*)[^\s"',()}\]=]+)""")
_TOKENS = [
    re.compile(r"(?P<k>\bBearer\s+)(?P<v>[A-Za-z0-9._~+/=-]+)"),
    re.compile(r"(?P<k>)(?P<v>\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{16,})"),
]


def is_secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name.strip("\"' ")) is not None


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = {s for s in secrets if s and len(s) >= 4}

    def add(self, *values: str | None) -> None:
        for v in values:
            if v and len(v) >= 4:
                self.secrets.add(v)

    def add_from_argv(self, argv: Sequence[str]) -> None:
        for i, arg in enumerate(argv):
            if arg.startswith("-"):
                name, eq, value = arg.partition("=")
                if is_secret_name(name):
                    self.add(value if eq else (argv[i + 1] if i + 1 < len(argv) else None))

    def add_from_env(self, env: Mapping[str, str] | None = None) -> None:
        for k, v in (os.environ if env is None else env).items():
            if is_secret_name(k):
                self.add(v)

    def text(self, s: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret in s:
                s = s.replace(secret, MASK)
        s = _KEY_VALUE.sub(lambda m: f"{m['k']}{m['sep']}{m['q']}{MASK}" if is_secret_name(m["k"]) else m[0], s)
        for pat in _TOKENS:
            s = pat.sub(lambda m: f"{m['k']}{MASK}", s)
        return s

    def argv(self, argv: Sequence[str]) -> list[str]:
        out: list[str] = []
        hide_next = False
        for arg in argv:
            if hide_next:
                out.append(MASK)
                hide_next = False
                continue
            name, eq, _ = arg.partition("=")
            if arg.startswith("-") and is_secret_name(name):
                if eq:
                    out.append(f"{name}={MASK}")
                else:
                    out.append(arg)
                    hide_next = True
                continue
            out.append(self.text(arg))
        return out
