"""What the history compares and how: the metrics of a run, which runs may be a baseline, the regression rule and
the ETA of a start from past starts of the same type.

Start types (``firstlight.starts``): a start's ETA is the median time to READY of the last good starts of the same
deployment and the same type; with none of that type, of all its good starts, with a note that says so ("no
warm_page_cache starts yet: ETA from 3 cold starts"). A start is compared with the starts of its own type (a warm
start is never the baseline of a cold one); when the baseline's starts ran another engine version, a regression
names both versions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from firstlight.bench.metrics import median
from firstlight.bounded import number

KINDS = ("up", "watch", "bench")
STARTS = ("up", "watch")  # the kinds that are starts of a server (a bench run is not)
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
ETA_WINDOW = 10  # the last good starts an ETA is the median of


@dataclass
class Regression:
    """A metric worse than its baseline by more than the margin; carries both numbers (and, for a start, its type
    and the engine versions of the baseline and of this run when they differ)."""

    metric: str
    value: float
    baseline: float
    ratio: float  # value / baseline
    margin: float
    baseline_runs: int  # how many runs the baseline is the median of (1 when pinned)
    pinned_run: int | None
    start_type: str | None = None
    baseline_version: str | None = None
    version: str | None = None

    @property
    def version_changed(self) -> bool:
        return bool(self.baseline_version and self.version and self.baseline_version != self.version)

    @property
    def message(self) -> str:
        worse = "slower" if DIRECTION.get(self.metric, True) else "lower"
        kind = f" {self.start_type}" if self.start_type else ""
        base = f"pinned run {self.pinned_run}" if self.pinned_run else f"median of {self.baseline_runs}{kind} runs"
        text = (f"{self.metric} {self.value:.4g} vs baseline {self.baseline:.4g} ({base}): {self.ratio:.2f}x, "
                f"{abs(self.ratio - 1) * 100:.0f}% {worse} (margin {self.margin * 100:.0f}%)")
        if self.version_changed:
            text += f"; after an engine upgrade: {self.baseline_version} -> {self.version}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.message}


@dataclass(frozen=True)
class StartEstimate:
    """An ETA from past starts: the seconds, how many starts of which types it is from, and a note when they are
    not of the type asked for."""

    seconds: float
    runs: int
    start_type: str | None  # the type it was asked for
    from_types: dict[str, int]
    note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def base_type(start_type: str | None) -> str | None:
    """How the weights got there, the first label (``warm_page_cache`` of ``warm_page_cache+compile_cache_hit``):
    what an ETA and a regression compare on (a compile-cache miss after an upgrade is a regression to report)."""
    return start_type.split("+", 1)[0] if start_type else None


def estimate(starts: Sequence[tuple[str | None, float]], start_type: str | None) -> StartEstimate | None:
    """The ETA from ``starts`` (type, seconds to READY), newest first, for a start of ``start_type`` (compared by
    :func:`base_type`)."""
    start_type = base_type(start_type)
    same = [s for t, s in starts if base_type(t) == start_type][:ETA_WINDOW] if start_type is not None else []
    if start_type is not None and same:
        return StartEstimate(median(same), len(same), start_type, {start_type: len(same)},
                             f"ETA from {len(same)} {start_type} start{'s' if len(same) != 1 else ''}")
    used = list(starts[:ETA_WINDOW])
    if not used:
        return None
    counts = Counter(base_type(t) or "untyped" for t, _ in used)
    said = ", ".join(f"{n} {t} start{'s' if n != 1 else ''}" for t, n in counts.most_common())
    note = f"ETA from {said}" if start_type is None else f"no {start_type} starts yet: ETA from {said}"
    return StartEstimate(median([s for _, s in used]), len(used), start_type, dict(counts), note)


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
    found: dict[str, object] = {"cold_start_s": cold}
    if bench:
        found.update({k: bench.get(k) for k in ("output_throughput", "request_throughput", "total_token_throughput")})
        found.update({f"{k}_median_ms": (bench.get(f"{k}_ms") or {}).get("median") for k in ("ttft", "tpot", "itl",
                                                                                              "e2el")})
    for k, raw in found.items():  # numbers only (never their text), each a metric a baseline can take
        if isinstance(raw, int | float) and (v := metric_value(raw)) is not None:
            out[k] = v
    return out


def is_good(kind: str, summary: dict[str, Any], bench: dict[str, Any] | None) -> bool:
    """A run fit to be a baseline: the server got ready, and a benchmark (if any) had no failed request."""
    if kind in ("up", "watch") and summary.get("verdict") != "ready":
        return False
    if bench is not None:
        return bool(bench.get("completed")) and not bench.get("errors") and not bench.get("timeouts")
    return True


def start_type_of(summary: dict[str, Any]) -> str | None:
    """The start type a summary carries (``start_type.type``), else None (older runs, bench runs)."""
    st = summary.get("start_type")
    t = st.get("type") if isinstance(st, dict) else None
    return t if isinstance(t, str) and t else None


def version_of(summary: dict[str, Any]) -> str | None:
    v = summary.get("engine_version")
    return v if isinstance(v, str) and v else None


MAX_METRIC = 1e12  # no start (seconds) or benchmark figure (ms, tokens/s) reaches this: beyond is a damaged row


def metric_value(raw: object) -> float | None:
    """A metric as stored: a finite number from 0 to :data:`MAX_METRIC`, else None (a damaged or hand-edited row:
    text, infinity, a negative start, 300 digits)."""
    return number(raw, 0.0, MAX_METRIC)


def numbers(rows: list[tuple[Any, ...]], col: int) -> list[float]:
    """The column's values that are metrics (a damaged row's value is left out)."""
    return [v for r in rows if (v := metric_value(r[col])) is not None]


VERSION_MARGIN = 0.2  # `history`: a type's median start this much slower on a newer version is a regression


def start_groups(starts: Sequence[tuple[str, str | None, str | None, float]]) -> list[dict[str, Any]]:
    """Good starts (deployment, start type, engine version, seconds), oldest first, grouped by deployment, type
    (:func:`base_type`) and version, in the order each group first appears."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for dep, kind, version, seconds in starts:
        groups.setdefault((dep, base_type(kind) or "untyped", version or "unknown"), []).append(seconds)
    return [{"deployment": d, "start_type": t, "version": v, "starts": len(s), "median_s": median(s),
             "min_s": min(s), "max_s": max(s)} for (d, t, v), s in groups.items()]


def version_regressions(groups: Sequence[dict[str, Any]], margin: float = VERSION_MARGIN) -> list[dict[str, Any]]:
    """Per deployment and start type, each version whose median start is slower than the version before it by
    more than ``margin``: a regression that names both versions (never across types: a cold start after a warm
    one is no regression)."""
    out: list[dict[str, Any]] = []
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for g in groups:
        key = (g["deployment"], g["start_type"])
        before = last.get(key)
        if before is not None and g["version"] != before["version"] and before["median_s"] > 0:
            ratio = g["median_s"] / before["median_s"]
            if ratio > 1 + margin:
                out.append({"deployment": g["deployment"], "start_type": g["start_type"],
                            "from_version": before["version"], "to_version": g["version"], "ratio": ratio,
                            "message": f"{g['start_type']} starts {ratio:.2f}x slower after {before['version']} -> "
                                       f"{g['version']}: median {g['median_s']:.1f}s ({g['starts']}) vs "
                                       f"{before['median_s']:.1f}s ({before['starts']})"})
        last[key] = g
    return out


SLOW_NODE_MARGIN = 0.2  # `history`: a node whose median start is this much slower than the rest of the fleet's
SLOW_NODE_STARTS = 3  # starts each side needs (the node's, the rest's) before a node is named


def slow_nodes(starts: Sequence[tuple[str, str | None, str | None, float]], margin: float = SLOW_NODE_MARGIN,
               min_starts: int = SLOW_NODE_STARTS) -> list[dict[str, Any]]:
    """Good starts (deployment, start type, node, seconds): per deployment and start type (:func:`base_type`), each
    node whose median start is slower than the median of the other nodes' starts by more than ``margin``, with at
    least ``min_starts`` starts on each side (a slower disk, a throttled GPU: the node, not the deployment)."""
    by_group: dict[tuple[str, str], dict[str, list[float]]] = {}
    for dep, kind, where, seconds in starts:
        if where:
            by_group.setdefault((dep, base_type(kind) or "untyped"), {}).setdefault(where, []).append(seconds)
    out: list[dict[str, Any]] = []
    for (dep, kind), nodes in by_group.items():
        for where, own in nodes.items():
            rest = [x for other, xs in nodes.items() if other != where for x in xs]
            if len(own) < min_starts or len(rest) < min_starts:
                continue
            mine, theirs = median(own), median(rest)
            if theirs > 0 and mine / theirs > 1 + margin:
                out.append({"deployment": dep, "start_type": kind, "node": where, "ratio": mine / theirs,
                            "median_s": mine, "starts": len(own), "fleet_median_s": theirs, "fleet_starts": len(rest),
                            "message": f"node {where}: {kind} starts {mine / theirs:.2f}x slower than the rest of the "
                                       f"fleet: median {mine:.1f}s ({len(own)}) vs {theirs:.1f}s ({len(rest)})"})
    return out


FORECAST_GOOD = 0.25  # `history`: a whole-start forecast within 25 % of what the start took counts as good


def forecast_accuracy(graded: Sequence[tuple[str, float | None]]) -> list[dict[str, Any]]:
    """How good each deployment's whole-start forecasts have been: from (deployment, error) of its graded starts
    (``error``: (taken - forecast) / forecast, ``firstlight.forecast.grade``), the median of the absolute errors,
    the median error (its bias: above 0, starts take longer than forecast) and the share within
    :data:`FORECAST_GOOD`."""
    by: dict[str, list[float]] = {}
    for dep, err in graded:
        if isinstance(err, int | float) and not isinstance(err, bool) and math.isfinite(err):
            by.setdefault(dep, []).append(float(err))
    out = []
    for dep, errs in by.items():
        typical, bias = median([abs(e) for e in errs]), median(errs)
        good = sum(abs(e) <= FORECAST_GOOD for e in errs) / len(errs)
        out.append({"deployment": dep, "starts": len(errs), "median_abs_error": typical, "median_error": bias,
                    "within": good, "message": f"forecasts of {len(errs)} start{'s' if len(errs) != 1 else ''}: "
                    f"typically off by {typical:.0%} (bias {bias:+.0%}), {good:.0%} within {FORECAST_GOOD:.0%}"})
    return out


def compile_key_change(cache: dict[str, Any] | None,
                       earlier: Sequence[tuple[str | None, dict[str, Any] | None]]) -> str | None:
    """Why this start's compile cache missed, when its deployment's newest earlier start that hit it said its key
    (the anatomy's ``cache.compile_key``: the cache directory's hash, and the factors where the engine logs them):
    the parts of the key that changed, or that none did (the cache emptied, or not on this node's disk). None when
    this start did not miss, or no earlier hit says its key."""
    mine = (cache or {}).get("compile_key")
    if (cache or {}).get("compile_cache") != "miss" or not isinstance(mine, dict) or not mine:
        return None
    for _, anat in earlier:
        past = (anat or {}).get("cache") if isinstance(anat, dict) else None
        theirs = past.get("compile_key") if isinstance(past, dict) else None
        if not isinstance(past, dict) or past.get("compile_cache") != "hit" or not isinstance(theirs, dict):
            continue
        both = [k for k in ("key", "env", "cfg", "comp", "code") if mine.get(k) and theirs.get(k)]
        if not both:
            return None
        changed = [f"{k} {theirs[k]} -> {mine[k]}" for k in both if theirs[k] != mine[k]]
        if changed:
            return ("compile cache miss: its key changed since the last start that hit it (" + ", ".join(changed)
                    + "): a changed engine version, config, compiler or environment")
        return (f"compile cache miss with the key the last hit had ({', '.join(f'{k} {mine[k]}' for k in both)}): "
                "the cache was emptied, or is not on this node's disk")
    return None
