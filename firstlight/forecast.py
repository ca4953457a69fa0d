"""A start's forecast, said before the launch and graded after it.

The duration of each phase and of the whole start comes from the first source that has it:

1. ``history``: this deployment's earlier good starts of the same type (a shared PostgreSQL history holds the
   fleet's): each phase's median and the whole start's ETA (``firstlight.history.policy.estimate``);
2. ``bytes``: with no history, the weights' bytes not in the page cache over the read rate the preflight measured
   (the other phases are not known before a first start, and the forecast says so).

The memory side is the preflight's ``fit`` check (``firstlight.preflight.fit``): the weights and the KV cache of
one sequence of the context against each device, said beside the durations.

After the run, :func:`grade` sets the forecast against what happened: per phase and in all, the seconds forecast,
the seconds taken and the error (taken - forecast, and that as a share of the forecast). The graded forecast is
kept with the run, so the history can say how good a deployment's forecasts have been.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

from firstlight.budgets import Budgets, learn
from firstlight.formats import duration
from firstlight.formats import size as human_bytes
from firstlight.history import DeploymentKey, History, HistoryError
from firstlight.history.policy import StartEstimate
from firstlight.preflight.disk import device_id
from firstlight.starts import NOT_FROM_STORAGE, page_cache_label
from firstlight.vocab import PHASE_INDEX

HISTORY = "history"
BYTES = "bytes"
SHOWN_PHASES = 3  # the longest phases the forecast line names
LOAD_PHASE = "weights_loading"


@dataclass(frozen=True)
class Forecast:
    """What a start is expected to take and whether it fits, before it begins."""

    source: str | None  # HISTORY, BYTES, or None (nothing to forecast from)
    note: str  # where it comes from, as the output says it
    total_s: float | None = None
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds, in the phases' order
    fit: dict[str, Any] | None = None  # the preflight's fit facts (devices, context, KV per token)
    fit_status: str | None = None  # the fit check's status: ok, warn, fail

    def line(self) -> str:
        """``forecast: about 9m40s (weights_loading 7m, compile 1m, cuda_graph 50s) from 5 cold starts; fits: ...``"""
        longest = sorted(self.phases.items(), key=lambda kv: -kv[1])[:SHOWN_PHASES]
        said = ", ".join(f"{p} {duration(s)}" for p, s in sorted(longest, key=lambda kv: PHASE_INDEX.get(kv[0], 99)))
        if self.total_s is not None:
            text = f"about {duration(self.total_s)}" + (f" ({said})" if said else "") + f" {self.note}"
        elif said:
            text = f"{said} {self.note}"
        else:
            text = self.note
        fit = self.fit_line()
        return text + (f"; {fit}" if fit else "")

    def fit_line(self) -> str | None:
        """``KV cache fits with 6.0 GB to spare on each of 8 GPUs`` / ``does not fit: GPU 0 2.1 GB short``."""
        devices = (self.fit or {}).get("devices") or []
        if not devices:
            return None
        short = [d for d in devices if d["spare_bytes"] < 0]
        if short:
            return "does not fit: " + ", ".join(f"{d['device']} {human_bytes(-d['spare_bytes'])} short"
                                                for d in short)
        least = min(devices, key=lambda d: d["spare_bytes"])
        each = f"each of {len(devices)} devices" if len(devices) > 1 else least["device"]
        return f"fits with {human_bytes(least['spare_bytes'])} to spare on {each}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "note": self.note,
                "total_s": None if self.total_s is None else round(self.total_s, 3),
                "phases": {p: round(s, 3) for p, s in self.phases.items()}, "fit": self.fit,
                "fit_status": self.fit_status}


def _ordered(phases: dict[str, float]) -> dict[str, float]:
    return dict(sorted(phases.items(), key=lambda kv: PHASE_INDEX.get(kv[0], len(PHASE_INDEX))))


def from_history(budgets: Budgets | None, eta: StartEstimate | None) -> tuple[dict[str, float], float | None, str]:
    """(phase medians, the whole start's ETA, the note) from this deployment's earlier starts; empty when none."""
    phases = {n: b.median_s for n, b in (budgets.phases.items() if budgets else ())}
    if eta is None and not phases:
        return {}, None, ""
    note = f"from history: {eta.note}" if eta is not None else (
        f"from history: {budgets.starts if budgets else 0} earlier starts' phases")
    return _ordered(phases), eta.seconds if eta is not None else None, note


def from_bytes(weights: dict[str, Any] | None, disk_rate: float | None = None) -> tuple[dict[str, float], str]:
    """(the weights phase, the note) from the preflight's measured bytes and read rate, else the rate the history
    keeps for the weights' filesystem (``firstlight preflight --disk``); empty when neither was measured."""
    w = weights or {}
    rate, uncached, total = w.get("read_rate") or disk_rate, w.get("uncached_bytes"), w.get("weights_bytes")
    if not isinstance(total, int) or total <= 0:
        return {}, ""
    if not isinstance(uncached, int) or uncached <= 0:
        return {}, (f"from bytes: the weights' {human_bytes(total)} are in the page cache; no history yet for "
                    "the other phases")
    if not isinstance(rate, int | float) or rate <= 0:
        return {}, f"from bytes: {human_bytes(uncached)} to read, the read rate not measured; no history yet"
    return ({LOAD_PHASE: uncached / rate},
            f"from bytes: {human_bytes(uncached)} not in the page cache at {rate / 1e6:.0f} MB/s measured; no "
            "history yet for the other phases")


def make(budgets: Budgets | None, eta: StartEstimate | None, facts: dict[str, Any] | None,
         fit_status: str | None = None, disk_rate: float | None = None, kind: str | None = None) -> Forecast:
    """The forecast from the first source that has one (module docstring), with the preflight's fit. ``kind``: the
    start's type as known before it begins; a start whose weights do not come from storage (``attached``) is not
    forecast from their bytes."""
    facts = facts or {}
    phases, total, note = from_history(budgets, eta)
    source: str | None = HISTORY if note else None
    if not note and kind in NOT_FROM_STORAGE:
        note = f"nothing to forecast from yet: no earlier {kind} start, and an {kind} start reads no weights"
    if not note:
        phases, note = from_bytes(facts.get("weights"), disk_rate)
        source = BYTES if phases else None
        note = note or "nothing to forecast from yet: no earlier start and no measured weights"
    return Forecast(source, note, total, phases, facts.get("fit"), fit_status)


def from_store(history: History | None, key: DeploymentKey, facts: dict[str, Any] | None,
               fit_status: str | None = None, weights_path: str | None = None, kind: str | None = None) -> Forecast:
    """The forecast of a start of deployment ``key``: from its history (of ``kind``, the type its command says, else
    the one the preflight's page-cache reading predicts), else from the weights' bytes over the read rate the
    preflight sampled or the one the history keeps for their filesystem (``weights_path``'s); a history that cannot
    be read is no history."""
    resident = ((facts or {}).get("weights") or {}).get("resident")
    if kind is None and isinstance(resident, int | float):
        kind = page_cache_label(resident)
    budgets, eta, disk = None, None, None
    if history is not None:
        with contextlib.suppress(HistoryError):
            eta = history.expected_start(key, kind)
            budgets = learn(history.start_anatomies(key), kind)
        with contextlib.suppress(OSError, HistoryError):  # no weights on this machine: no filesystem to name
            disk = history.disk(device_id(weights_path)) if weights_path else None
    return make(budgets, eta, facts, fit_status, (disk or {}).get("rate"), kind)


def _error(forecast: float | None, actual: float | None) -> dict[str, Any] | None:
    if forecast is None or actual is None:
        return None
    err = actual - forecast
    return {"forecast_s": round(forecast, 3), "actual_s": round(actual, 3), "error_s": round(err, 3),
            "error": round(err / forecast, 4) if forecast > 0 else None}


def actual_phases(anatomy: dict[str, Any] | None) -> dict[str, float]:
    """Each phase's seconds as the anatomy measured them."""
    out: dict[str, float] = {}
    for p in (anatomy or {}).get("phases") or ():
        if isinstance(p, dict) and isinstance(p.get("name"), str) and isinstance(p.get("seconds"), int | float):
            out[p["name"]] = out.get(p["name"], 0.0) + float(p["seconds"])
    return out


def grade(forecast: dict[str, Any], anatomy: dict[str, Any] | None, cold_start_s: float | None) -> dict[str, Any]:
    """The forecast with what happened beside it: ``graded`` holds the total's and each phase's error."""
    actual = actual_phases(anatomy)
    phases = {p: e for p, s in (forecast.get("phases") or {}).items() if (e := _error(s, actual.get(p)))}
    return {**forecast, "graded": {"total": _error(forecast.get("total_s"), cold_start_s), "phases": phases}}


def graded_line(forecast: dict[str, Any] | None) -> str | None:
    """``expected 9m40s, took 10m02s (+4%); weights_loading 7m vs 7m20s (+5%)`` for the end of a run."""
    g = forecast.get("graded") if isinstance(forecast, dict) else None
    if not isinstance(g, dict):
        return None
    phases = g.get("phases")
    phases = phases if isinstance(phases, dict) else {}
    parts = [said for said in (_graded("expected ", ", took ", g.get("total")),
                               *(_graded(f"{p} ", " vs ", e) for p, e in phases.items())) if said]
    return "; ".join(parts) or None


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _graded(head: str, between: str, e: Any) -> str | None:
    """One graded figure in words; None for a damaged one (a hand-edited history row may hold anything)."""
    said, took = (_num(e.get("forecast_s")), _num(e.get("actual_s"))) if isinstance(e, dict) else (None, None)
    if said is None or took is None:
        return None
    err = _num(e.get("error"))
    return f"{head}{duration(said)}{between}{duration(took)}" + (f" ({err:+.0%})" if err is not None else "")
