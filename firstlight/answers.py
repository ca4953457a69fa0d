"""The known answer: is the answer a start gives now the one this deployment gave before?

At temperature 0 the same weights on the same engine give the same tokens, whatever the load: greedy decoding
takes the most likely token each step. Their log-probabilities move only with the order of floating-point sums
(the batch, the threads, the kernels chosen), by less than :data:`LOGPROB_TOLERANCE`. Other weights (a stale
weight cache, another checkpoint, another quantization of the same model) move them by more, or change a token.
So: the same tokens, each log-probability within the tolerance of the recorded one, is the same answer; where
either answer has no log-probabilities (an engine that returns none), the same tokens; with no tokens either,
the same text.

Pure: the judge asks it (``firstlight.judge``), the session builds the summary's entry with it; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from firstlight.config import KNOWN_ANSWER_MODES, ProbeConfig
from firstlight.timeline import KnownAnswer, Probe

# Nats, per token, absolute. Same weights: only the order of floating-point sums moves a log-probability (batch,
# threads, kernels), in the third or fourth decimal; other weights change a token or move them by far more. 0.1
# leaves the reordering a wide margin (docs/history.md#the-known-answer).
LOGPROB_TOLERANCE = 0.1

__all__ = ["KNOWN_ANSWER_MODES", "LOGPROB_TOLERANCE", "Comparison", "answer_dict", "compare", "known_from",
           "request_fingerprint", "shown"]

_SHOWN_TOKENS = 16  # tokens an evidence line quotes


@dataclass(frozen=True)
class Comparison:
    same: bool
    by: str  # logprobs | tokens | text: what was compared
    why: str  # in words, for the evidence


def request_fingerprint(cfg: ProbeConfig) -> str:
    """The request a known answer answers (API, prompt, max tokens, model named): an answer to another request
    is no reference. A hash: the prompt itself is never stored."""
    raw = json.dumps([cfg.api, cfg.effective_prompt, cfg.max_tokens, cfg.model], separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def compare(known: KnownAnswer, p: Probe, tolerance: float = LOGPROB_TOLERANCE) -> Comparison:
    """The answer of probe ``p`` against the ``known`` one (the rule of the module's docstring)."""
    if known.tokens and p.tokens:
        for i, (a, b) in enumerate(zip(known.tokens, p.tokens, strict=False)):
            if a != b:
                return Comparison(False, "tokens", f"token {i + 1} is {b!r}, was {a!r}")
        if len(known.tokens) != len(p.tokens):
            return Comparison(False, "tokens", f"{len(p.tokens)} tokens, were {len(known.tokens)}")
        if not (known.logprobs and p.logprobs):
            return Comparison(True, "tokens", f"the same {len(p.tokens)} tokens (no log-probabilities to compare)")
        drift = [abs(a - b) for a, b in zip(known.logprobs, p.logprobs, strict=True)]
        worst = max(range(len(drift)), key=drift.__getitem__)
        if drift[worst] > tolerance:
            return Comparison(False, "logprobs",
                              f"the same tokens, but the log-probability of token {worst + 1} ({p.tokens[worst]!r}) "
                              f"is {p.logprobs[worst]:.4f}, was {known.logprobs[worst]:.4f}: "
                              f"{drift[worst]:.4f} apart, over the tolerance of {tolerance:g}")
        return Comparison(True, "logprobs", f"the same {len(p.tokens)} tokens, log-probabilities at most "
                                            f"{drift[worst]:.4f} apart (tolerance {tolerance:g})")
    if known.text == p.text:
        return Comparison(True, "text", "the same text (no tokens to compare)")
    return Comparison(False, "text", f"the text is {p.text!r}, was {known.text!r}")


def shown(text: str | None, tokens: tuple[str, ...], logprobs: tuple[float, ...]) -> str:
    """One answer as an evidence line quotes it: its tokens with their log-probabilities, else its text."""
    if not tokens:
        return f"text {text!r}"
    if logprobs:
        parts = [f"{t!r} {lp:.4f}" for t, lp in zip(tokens[:_SHOWN_TOKENS], logprobs, strict=False)]
    else:
        parts = [repr(t) for t in tokens[:_SHOWN_TOKENS]]
    more = f", … {len(tokens) - _SHOWN_TOKENS} more" if len(tokens) > _SHOWN_TOKENS else ""
    return f"tokens [{', '.join(parts)}{more}]"


def answer_dict(p: Probe, request: str) -> dict[str, Any]:
    """An answer as the run's summary keeps it (and :func:`known_from` reads it back)."""
    return {"text": p.text, "tokens": list(p.tokens), "logprobs": list(p.logprobs), "request": request}


def known_from(run: int | None, recorded_at: float, answer: Any, t: float) -> KnownAnswer | None:
    """A stored answer (:func:`answer_dict`), recorded by ``run`` at ``recorded_at``, as the observation the judge
    compares with, looked up at ``t`` (this start's clock: never the earlier run's, which would move the judge's
    timeline to it); None when damaged."""
    if not isinstance(answer, dict):
        return None
    text, tokens, logprobs = answer.get("text"), answer.get("tokens"), answer.get("logprobs")
    if not (text is None or isinstance(text, str)) or not isinstance(tokens, list) or not isinstance(logprobs, list):
        return None
    if not all(isinstance(x, str) for x in tokens):
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in logprobs):
        return None
    if logprobs and len(logprobs) != len(tokens):
        return None
    return KnownAnswer(t, run=run, recorded_at=recorded_at, text=text, tokens=tuple(tokens),
                       logprobs=tuple(float(x) for x in logprobs), request=str(answer.get("request") or ""))
