"""The type of a start, from evidence: how the weights got there and whether the engine compiled.

Labels, each with its evidence (signal, value):

- ``peer_loaded``: the engine said it took its weights from a peer (its profile's ``peer_load`` lines: SGLang's
  ``Loading weights from remote instance ...``), or the command asked for it (``--load-format remote_instance`` /
  ``mx``);
- ``attached``: the command asked the engine to attach weights a weight-cache daemon holds (its ``flags.attach``:
  vLLM ``--load-format ipc_cache`` with ``vllm preload``, SGLang ``--weight-cache-mode client``): no weights read
  from storage, compile and graphs may still run;
- ``woken``: the engine said it woke from sleep before READY (its profile's ``wake`` lines: vLLM's ``It took ...
  seconds to wake up tags``): weights and KV cache put back from host memory, nothing loaded;
- ``restored``: READY within :data:`RESTORED_MAX_S` with no load, compile or graph phase seen at all and at most
  :data:`RESTORED_MAX_LINES` log lines (a CRIU / cuda-checkpoint restore prints none of them);
- ``downloaded``: the engine downloaded its weights during the start (its download progress lines, or the model's
  Hugging Face hub cache growing): a start that fetched the checkpoint first;
- ``warm_page_cache`` / ``cold``: at least / under :data:`firstlight.anatomy.RESIDENT_WARM` of the weights were in
  the page cache at start (``preflight.pagecache``, measured before the launch);
- ``compile_cache_hit`` / ``compile_cache_miss``: the engine's own compile-cache lines (its ``compile_cache``
  markers: vLLM's ``Directly load the compiled graph(s) ... from the cache`` vs ``Compiling a graph for ...``).

The type is the labels joined by ``+`` in that order (``warm_page_cache+compile_cache_hit``); ``None`` when no label
has evidence (no weights file measured, no engine lines). A peer-loaded, attached, woken, restored or downloaded start
carries no page-cache label (its weights were not read from the storage they were measured on at start). The first
label is how the weights got there: what its ETA, baseline and phase budgets are learned by
(``firstlight.history.policy.base_type``), so each kind is judged by its own history, and a phase the kind skips
(an attached start's load, a restored one's compile) is never expected of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from firstlight.anatomy import RESIDENT_WARM, Signals, resident_share, warm_page_cache
from firstlight.engines.command import flag_value
from firstlight.timeline import WeightsTotal

RESTORED_MAX_S = 10.0  # a restore from a snapshot serves in seconds (Dynamo Snapshot: under 5 s)
RESTORED_MAX_LINES = 20  # a restored process prints its server banner at most, never a load line
PEER_LOAD_FORMATS = frozenset({"remote_instance", "mx"})  # SGLang R-Fork, ModelExpress
_WORK_PHASES = frozenset({"distributed_init", "download", "weights_loading", "weights_loaded", "compile", "kv_cache",
                          "cuda_graph"})
ORDER = ("peer_loaded", "attached", "woken", "restored", "downloaded", "warm_page_cache", "cold", "compile_cache_hit",
         "compile_cache_miss")
NOT_FROM_STORAGE = ("peer_loaded", "attached", "woken", "restored", "downloaded")  # no page-cache label with these


def _ev(signal: str, value: str, since: float | None = None) -> dict[str, Any]:
    return {"signal": signal, "value": value, "since": since}


def restored_evidence(phases: Sequence[str], log_lines: int, cold_start_s: float | None,
                      ready: bool) -> list[dict[str, Any]] | None:
    """The evidence that a start was restored from a snapshot, else None."""
    if not ready or cold_start_s is None or cold_start_s > RESTORED_MAX_S:
        return None
    work = sorted(set(phases) & _WORK_PHASES)
    if work or log_lines > RESTORED_MAX_LINES:
        return None
    return [_ev("phases", "no load, compile or graph phase seen (" + (", ".join(phases) or "none") + ")"),
            _ev("log", f"{log_lines} log lines before READY (at most {RESTORED_MAX_LINES})"),
            _ev("ready", f"READY {cold_start_s:.1f}s after the start (at most {RESTORED_MAX_S:g}s)")]


def page_cache_label(resident: float) -> str:
    """``warm_page_cache`` or ``cold``, from the share of the weights resident at start."""
    return "warm_page_cache" if warm_page_cache(resident) else "cold"


def attach_flag(command: Sequence[str] | None, attach: Sequence[tuple[str, str]]) -> str | None:
    """``--flag value`` when ``command`` asks the engine to attach a weight-cache daemon's weights, else None."""
    for flag, value in attach:
        if flag_value(list(command or ()), (flag,)) == value:
            return f"{flag} {value}"
    return None


def predicted_type(weights: WeightsTotal | None, command: Sequence[str] | None = None,
                   attach: Sequence[tuple[str, str]] = ()) -> str | None:
    """A start's type as far as it is known before the engine says more (for its ETA and budgets): ``attached``
    when the command asks for it, else the page cache at start."""
    if attach_flag(command, attach) is not None:
        return "attached"
    resident = resident_share(weights)
    return None if resident is None else page_cache_label(resident)


def classify(*, phases: Sequence[str], signals: Signals, anatomy: dict[str, Any] | None, log_lines: int,
             cold_start_s: float | None, ready: bool, command: Sequence[str] | None = None,
             attach: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """``{"type": "warm_page_cache+compile_cache_hit" | None, "labels": [...], "evidence": {label: [...]}}``.
    ``attach``: the engine's (flag, value) pairs that attach a weight-cache daemon's weights."""
    found: dict[str, list[dict[str, Any]]] = {}
    peer = [_ev("log", text, t) for t, text in signals.peer_lines]
    fmt = flag_value(list(command or ()), ("--load-format",))
    if fmt in PEER_LOAD_FORMATS:
        peer.append(_ev("command", f"--load-format {fmt}"))
    if peer:
        found["peer_loaded"] = peer
    said = attach_flag(command, attach)
    if said is not None and not peer:
        found["attached"] = [_ev("command", said)]
    if signals.wake_lines:  # the engine's own word: a fast, silent start that says it woke is not a restore
        found["woken"] = [_ev("log", text, t) for t, text in signals.wake_lines[:2]]
    restored = restored_evidence(phases, log_lines, cold_start_s, ready) if not found else None
    if restored:
        found["restored"] = restored
    if (signals.downloads or signals.hub) and not found:
        found["downloaded"] = ([_ev("log", f"{len(signals.downloads)} download progress lines", signals.downloads[0])]
                               if signals.downloads else [])
        if signals.hub:
            found["downloaded"].append(_ev("hub_cache", f"{sum(n for _, n in signals.hub) / 1e6:.1f} MB arrived in "
                                                        "the Hugging Face hub cache", signals.hub[0][0]))
    cache = (anatomy or {}).get("cache") or {}
    resident = cache.get("page_cache_resident")
    if not any(x in found for x in NOT_FROM_STORAGE) and isinstance(resident, int | float):
        label = page_cache_label(resident)
        found[label] = [_ev("page_cache", f"{resident:.0%} of the weights resident at start "
                                          f"({'at least' if label != 'cold' else 'under'} {RESIDENT_WARM:.0%})")]
    state = cache.get("compile_cache")
    if state in ("hit", "miss"):
        lines = [(t, text) for t, s, _, text in signals.compile_lines if s == state]
        found[f"compile_cache_{state}"] = [_ev("log", text, t) for t, text in lines[:2]] or [
            _ev("log", f"compile cache {state}")]
    labels = [x for x in ORDER if x in found]
    return {"type": "+".join(labels) or None, "labels": labels, "evidence": {x: found[x] for x in labels}}
