"""The literal pre-filter that keeps a profile's hundreds of regexes cheap per line: each regex gets a literal the
match requires (and, where the regex guarantees it, a whole word), and a rule is only tried on a line that holds
its literal. Read from the regex's own parse tree (``re._parser``), so a pattern needs no hand-kept hint."""

from __future__ import annotations

import importlib
import re
from typing import Any, NamedTuple


def _sre_parser() -> Any:
    try:
        return importlib.import_module("re._parser")  # Python >= 3.11
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse")


_PARSER = _sre_parser()


class _Lit(NamedTuple):
    text: str
    left: bool  # the regex guarantees a word boundary before the literal
    right: bool  # ... and after it


_BOUNDARY_AT = frozenset(
    {
        "AT_BEGINNING",
        "AT_BEGINNING_STRING",
        "AT_BEGINNING_LINE",
        "AT_BOUNDARY",
        "AT_END",
        "AT_END_STRING",
        "AT_END_LINE",
    }
)


def _opname(op: Any) -> str:
    return getattr(op, "name", None) or str(op)


def _is_boundary(item: Any) -> bool:
    """A regex item that guarantees the neighbouring literal starts/ends a word."""
    op, av = item
    name = _opname(op)
    if name == "AT":
        return _opname(av) in _BOUNDARY_AT
    if name == "LITERAL":
        ch = chr(av)
        return not (ch.isalnum() or ch == "_")
    return False


def _candidates(items: Any, out: list[tuple[_Lit, ...]], left: bool = False, right: bool = False) -> None:
    """Collect literal sets every match must contain one member of (conservative): single runs of
    consecutive literal characters, and alternations whose every branch has such a run. ``left``/``right``
    tell whether the items are preceded/followed by a word boundary."""
    seq = list(items)
    n = len(seq)

    def lb(i: int) -> bool:
        return left if i == 0 else _is_boundary(seq[i - 1])

    def rb(i: int) -> bool:
        return right if i == n - 1 else _is_boundary(seq[i + 1])

    run: list[str] = []
    run_start = 0
    for i, (op, av) in enumerate(seq):
        name = _opname(op)
        if name == "LITERAL":
            if not run:
                run_start = i
            run.append(chr(av))
            continue
        if name == "AT" and not run:
            continue
        if run:
            out.append((_Lit("".join(run), lb(run_start), _is_boundary(seq[i])),))
            run = []
        if name == "SUBPATTERN":
            _candidates(av[-1], out, lb(i), rb(i))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, _hi, sub = av
            if lo >= 1:
                _candidates(sub, out)
        elif name == "ATOMIC_GROUP":
            _candidates(av, out, lb(i), rb(i))
        elif name == "BRANCH":
            members: list[_Lit] = []
            for branch in av[1]:
                found: list[tuple[_Lit, ...]] = []
                _candidates(branch, found, lb(i), rb(i))
                best = _best(found)
                if best is None:
                    members = []
                    break
                members.extend(best)
            if members:
                out.append(tuple(dict.fromkeys(members)))
        # IN, ANY, ASSERT, GROUPREF, ...: nothing required we can cheaply rely on
    if run:
        out.append((_Lit("".join(run), lb(run_start), right),))


def _best(cands: list[tuple[_Lit, ...]]) -> tuple[_Lit, ...] | None:
    """Prefer literal sets whose every member implies a whole word (usable by the word index), then the
    longest shortest member, then fewer members."""
    good = [c for c in cands if min(len(x.text) for x in c) >= 3]
    if not good:
        return None

    def key(c: tuple[_Lit, ...]) -> tuple[int, int, int, int]:
        anchors = [_anchor_word(x) for x in c]
        anchored = all(a is not None for a in anchors)
        shortest_anchor = min(len(a) for a in anchors if a is not None) if anchored else 0
        return (anchored, min(shortest_anchor, 8), min(len(x.text) for x in c), -len(c))

    return max(good, key=key)


def _required(pattern: str) -> tuple[tuple[_Lit, ...], bool] | None:
    try:
        parsed = _PARSER.parse(pattern, 0)
    except Exception:  # pragma: no cover - invalid patterns fail at compile time anyway
        return None
    ignore_case = bool(parsed.state.flags & re.IGNORECASE)
    out: list[tuple[_Lit, ...]] = []
    _candidates(parsed, out)
    best = _best(out)
    if best is None:
        return None
    if ignore_case:
        best = tuple(x._replace(text=x.text.lower()) for x in best)
    return best, ignore_case


def required_literal(pattern: str) -> tuple[tuple[str, ...], bool] | None:
    """Literal substrings one of which every match of ``pattern`` contains, and whether they are
    case-insensitive. ``None`` when no literal of 3+ characters is required."""
    req = _required(pattern)
    if req is None:
        return None
    return tuple(x.text for x in req[0]), req[1]


WORD = re.compile(r"\w+")


def _anchor_word(lit: _Lit) -> str | None:
    r"""A word of the literal that any matching line contains as a whole ``\w+`` token: bounded by
    non-word characters inside the literal, or by a boundary the regex guarantees (longest wins)."""
    text = lit.text
    words = [
        m.group()
        for m in WORD.finditer(text)
        if (m.start() > 0 or lit.left) and (m.end() < len(text) or lit.right)
    ]
    return max(words, key=len) if words else None


class Rule(NamedTuple):
    regex: re.Pattern[str]
    literals: tuple[str, ...] | None
    nocase: bool
    payload: Any
    anchors: tuple[str | None, ...] | None  # per literal: a whole-token word it implies, if any


def compile_rules(items: list[tuple[str, Any]]) -> tuple[Rule, ...]:
    rules = []
    for pattern, payload in items:
        req = _required(pattern)
        rules.append(
            Rule(
                re.compile(pattern),
                tuple(x.text for x in req[0]) if req else None,
                req[1] if req else False,
                payload,
                tuple(_anchor_word(x) for x in req[0]) if req else None,
            )
        )
    return tuple(rules)


def may_match(rule: Rule, text: str, lower: list[str]) -> bool:
    lits = rule.literals
    if lits is None:
        return True
    if rule.nocase:
        if not lower:
            lower.append(text.lower())
        text = lower[0]
    if len(lits) == 1:
        return lits[0] in text
    return any(lit in text for lit in lits)


__all__ = ["WORD", "Rule", "compile_rules", "may_match", "required_literal"]
