"""Engine profiles as data, and the per-line classifier that reads them.

An :class:`EngineProfile` is pure data: regexes for phase lines, progress bars, failure signatures, the
engine's own ready and listening lines, plus its endpoints and command-line flags. ``classify`` turns one log
line into a :class:`LineMatch`. Adding an engine or a message is a data change in the engine's module.

Conventions for the regex data:

* patterns are searched (not matched) in the line after ANSI colours, timestamps, log levels and
  TP/worker/process prefixes are stripped (``lines.py``, :func:`clean_line`), so ``^`` anchors to the message itself;
* progress patterns use the named groups ``done``, ``total`` and/or ``pct`` (0..100) or ``frac`` (0..1);
* a failure signature is (regex, category, hint, fatal[, rank]); ``fatal`` means the start is dead as soon
  as the line appears; ``rank`` (default: the category's) orders root causes, generic wrappers use 0;
* speed: each regex gets a required literal and, where the regex guarantees it, a whole word (``prefilter.py``);
  lines are tokenised once and only rules whose word occurs are tried (``\b`` around bare identifiers such as
  ``\bncclSystemError\b`` lets a rule use the index; without it the rule still works, just costs a
  substring test per line).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from firstlight.logtext import strip_ansi
from firstlight.timeline import EngineClock
from firstlight.vocab import CATEGORY_RANK, FAILURE_CATEGORIES, FAILURE_PHASES, PHASE_INDEX, PHASES, WRAPPER_RANK

from .lines import clean_line
from .prefilter import WORD, Rule, compile_rules, may_match, required_literal


@dataclass(frozen=True)
class Progress:
    """A progress line: shard counters, graph-capture batches."""

    kind: str  # "shards" | "cuda_graph" | "compile" | "download" | "layers" | ...
    done: int | None
    total: int | None
    fraction: float | None  # 0..1


@dataclass(frozen=True)
class Failure:
    category: str  # one of FAILURE_CATEGORIES
    hint: str  # one-line fix hint
    fatal: bool  # True: the start is dead as soon as this line appears (before the process exits)
    rank: int = 20  # specificity: higher is closer to the root cause
    phase: str | None = None  # the phase this failure happens in (FailureSignature.phase, or its category's)


@dataclass(frozen=True)
class LineMatch:
    phase: str | None = None  # engine-neutral phase this line starts
    progress: Progress | None = None
    failure: Failure | None = None
    ready: bool = False  # the engine's own ready marker
    listening: bool = False  # the engine says its HTTP port is open
    # Extensions (defaults keep the contract): a "weak" phase line only moves the phase forward (an
    # "... end" line echoed by a lagging TP rank must not move it back); ``frame_phase`` is the phase a
    # traceback frame points at (where a crash happened), applied forward-only by the replayer.
    phase_weak: bool = False
    frame_phase: str | None = None
    # a worker that serves no port says its engines are up (vLLM --headless: "init engine ... took"); a server
    # prints the same line long before it serves, so only the judge of a worker reads it as ready
    worker_ready: bool = False

    @property
    def empty(self) -> bool:
        return (
            self.phase is None
            and self.progress is None
            and self.failure is None
            and not self.ready
            and not self.listening
            and self.frame_phase is None
            and not self.worker_ready
        )


NO_MATCH = LineMatch()


# --- data records (NamedTuples so that plain tuples in the data modules read naturally) ---------------


class PhaseMarker(NamedTuple):
    pattern: str
    phase: str
    weak: bool = False  # True: only moves the phase forward (for "... end"/"... done" lines)


class ProgressMarker(NamedTuple):
    pattern: str  # named groups: done, total, pct (0..100) or frac (0..1)
    kind: str
    phase: str | None = None  # phase a progress line implies (applied as a weak phase)


class FailureSignature(NamedTuple):
    pattern: str
    category: str
    hint: str
    fatal: bool
    rank: int | None = None  # None: CATEGORY_RANK[category]
    # the phase the failure happens in, where its words say it (a rendezvous port taken: distributed init);
    # None: its category's (FAILURE_PHASES), if any. Applied forward-only, as a traceback frame's phase is.
    phase: str | None = None


class SpecMetric(NamedTuple):
    # source: "server_info" | "prometheus" | "response_timings" | "response_meta" | "perf_metrics" | "log" | "slots"
    source: str
    name: str  # JSON path, metric name, or (for "log") a regex with a ``value`` group
    meaning: str


class CompileCacheMarker(NamedTuple):
    """The engine's own word on its compile cache: ``hit``, ``miss``, or ``total`` (the compile's own seconds, in a
    ``seconds`` group). Read by the one line interpreter, only on lines that are compile-phase lines."""

    pattern: str
    state: str  # hit | miss | total


class ClockMarker(NamedTuple):
    """The engine's own figure for a stage of its start, in a log line: its seconds in a ``seconds`` group, the
    engine's name for the stage, and firstlight's phases it covers (``("*",)``: the whole start up to the line)."""

    pattern: str
    stage: str
    phases: tuple[str, ...]


class ServingCounters(NamedTuple):
    """The engine's own Prometheus series that tell, after READY, whether it still serves (at no cost to it)."""

    done: tuple[str, ...] = ()  # counters: any rise means requests (or decode steps) completed
    busy: tuple[str, ...] = ()  # gauges: above 0 means requests in flight or waiting
    # A per-slot progress endpoint (llama-server's /slots: each busy slot's tokens decoded so far): tokens still
    # coming for a request in flight are serving, though the one slot makes every check wait behind it.
    slots: str | None = None


NO_SERVING_COUNTERS = ServingCounters()  # an engine without metrics: only active checks tell


@dataclass(frozen=True)
class Endpoints:
    health: str  # e.g. "/health"
    models: str | None  # e.g. "/v1/models"
    completions: str = "/v1/completions"
    chat: str = "/v1/chat/completions"
    metrics: str | None = "/metrics"
    info: tuple[str, ...] = ()  # detection endpoints
    lying_while_loading: tuple[str, ...] = ()  # answer 200 before a generation works
    listens_before_ready: bool = False  # the port opens before the model can serve


class JsonValue(NamedTuple):
    """One value of a JSON answer, by its dotted path (``error.type``; ``data[].owned_by``: that key of any item of
    the list ``data``), and what it must be."""

    key: str
    equals: str | None = None  # a string equal to this (None: any value)
    contains: str = ""  # the value, as text, holds this
    nocase: bool = False  # ``equals`` compares without case
    is_list: bool = False  # a JSON array (empty or not)


class EndpointRule(NamedTuple):
    """What one HTTP answer says of the engine that gave it: the answer names the engine when it is an answer to one
    of ``path`` and every test given holds. Answers that say nothing of any engine (404, 405, a 5xx but 503) are
    never read. The rules of all the registered profiles are weighed highest ``priority`` first, then in the
    registry's order; the identification asks their paths in that order too."""

    path: str | tuple[str, ...]
    status: tuple[int, ...] = ()  # the statuses read (empty: any that says something)
    body_contains: str = ""  # the body, as text, holds this
    json_any: tuple[str, ...] = ()  # a JSON object holding one of these keys at least
    json_all: tuple[str, ...] = ()  # a JSON object holding every one of these keys
    json: tuple[JsonValue, ...] = ()  # values of the JSON answer, every one as given
    json_list: bool = False  # a JSON array
    metric_prefix: str = ""  # Prometheus text with a sample, ``# HELP`` or ``# TYPE`` line whose name starts so
    priority: int = 0
    # the paths the identification asks (None: every one of ``path``; ``()``: the rule only reads an answer it is
    # given, a health check's for instance)
    ask: tuple[str, ...] | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,) if isinstance(self.path, str) else self.path

    @property
    def asked(self) -> tuple[str, ...]:
        return self.paths if self.ask is None else self.ask


# The weights of the evidence (EndpointRule.priority) the engines share; an engine may use any other number.
SELF_NAMED = 30  # the server names itself (its model list's owned_by): weighed, and asked, first
WEAK = -10  # an answer another engine may give too (a bare {"version": ...})
METRICS = -20  # its metric names: the last word, asked last


def owned_by(*owners: str) -> tuple[EndpointRule, ...]:
    """The rules of a server whose OpenAI model list (``/v1/models``, and llama.cpp router's ``/models``, which is
    read when given but not asked) names it in ``owned_by``, in any case."""
    return tuple(EndpointRule(("/v1/models", "/models"), json=(JsonValue("data[].owned_by", o, nocase=True),),
                              priority=SELF_NAMED, ask=("/v1/models",)) for o in owners)


def metric_prefix(prefix: str) -> EndpointRule:
    """The rule of a server whose Prometheus metric names start with ``prefix``."""
    return EndpointRule(("/metrics", "/prometheus/metrics"), status=(200,), metric_prefix=prefix, priority=METRICS,
                        ask=("/metrics",))


class ImageEntrypoint(NamedTuple):
    """A container image whose entrypoint is the engine's server: the words after the image in ``docker run`` are
    the server's own arguments. ``pattern`` is searched in the image's name; ``cmd`` stands for the arguments when
    none are given (the image's own CMD)."""

    pattern: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()


ClockReader = Callable[[str, float], Sequence[EngineClock]]


class ClockEndpoint(NamedTuple):
    """An endpoint where the engine publishes its own start timing, asked once after READY: its path, and the
    reader of a 200 answer's body (text, the time it came) into the engine's figures."""

    path: str
    read: ClockReader


START_LINE_KINDS = ("peer", "woken")  # the start types an engine's own lines say (firstlight.starts)
COMPILE_FACTORS = ("env", "cfg", "comp", "code")  # the parts of a compile cache's key an engine may say


@dataclass(frozen=True)
class CommandFlags:
    """How an engine's command line names what the command reader (``engines/command.py``) reads: the model, the
    parallelism, the quantization and llama.cpp's RPC workers. ``--flag V`` and ``--flag=V`` both count; the
    last one given wins, as in argparse."""

    model: tuple[str, ...] = ("--model", "--model-path", "--model-id", "-m")
    # the model as the positional word right after one of these leading words, the program's name included
    # (``vllm serve MODEL``, ``lmdeploy serve api_server MODEL``, ``trtllm-serve [serve] MODEL``); empty: none
    model_after: tuple[str, ...] = ()
    model_env: tuple[str, ...] = ()  # environment variables holding the model (TGI's MODEL_ID)
    tp: tuple[str, ...] = ("--tp", "--tp-size", "--tensor-parallel-size", "-tp")
    pp: tuple[str, ...] = ("--pp", "--pp-size", "--pipeline-parallel-size", "-pp")
    dp: tuple[str, ...] = ("--dp", "--dp-size", "--data-parallel-size", "-dp")
    nnodes: tuple[str, ...] = ("--nnodes",)
    quantization: tuple[str, ...] = ("--quantization",)
    rpc: tuple[str, ...] = ()
    # a worker of a multi-node start: a flag that says so (vLLM's --headless node serves no HTTP), else, for an
    # engine without such a flag, a node rank above 0 (SGLang's worker nodes run only schedulers)
    node_rank: tuple[str, ...] = ()
    worker_flags: tuple[str, ...] = ()
    # a worker that serves no port (vLLM --headless): the flags naming the head node it connects to, every one
    # given counts (TP/PP and DP name it differently); ``head_default`` when none is (the engine's own default)
    head: tuple[str, ...] = ()
    head_default: str | None = None
    # what the forecast's memory fit reads (firstlight/preflight/fit.py): the context asked for, the KV cache's
    # dtype, the share of each GPU the engine takes for itself (vLLM --gpu-memory-utilization); and whether the
    # engine shrinks a context left unset until it fits (llama.cpp's --fit), so that an unset one cannot fail
    context: tuple[str, ...] = ()
    context_env: tuple[str, ...] = ()
    kv_dtype: tuple[str, ...] = ()
    memory_share: tuple[str, ...] = ()
    memory_share_default: float | None = None
    fits_unset_context: bool = False
    # (flag, value) pairs that make the engine attach weights a weight-cache daemon holds (firstlight.starts)
    attach: tuple[tuple[str, str], ...] = ()
    # the engine refuses to start unless one sequence of the whole context fits its KV cache (vLLM's "To serve at
    # least one request with the models's max seq len", llama.cpp's cells allocated up front); others size the
    # pool to what is left and only warn
    context_must_fit: bool = False


@dataclass(frozen=True)
class EngineProfile:
    name: str
    display_name: str
    default_port: int
    command_patterns: tuple[str, ...]
    endpoints: Endpoints
    # identification from the engine's HTTP answers (detect.detect_from_endpoint; the probes ask their paths)
    endpoint_rules: tuple[EndpointRule, ...] = ()
    images: tuple[ImageEntrypoint, ...] = ()  # container images that run its server (engines/command.py)
    # its OpenAI-compatible API accepts the ``ignore_eos`` extension (others may reject an unknown field)
    ignore_eos: bool = False
    # where it publishes its own start timing, asked in order after READY until one answers with figures
    clock_endpoints: tuple[ClockEndpoint, ...] = ()
    phase_markers: tuple[PhaseMarker, ...] = ()
    progress_markers: tuple[ProgressMarker, ...] = ()
    failure_signatures: tuple[FailureSignature, ...] = ()
    ready_markers: tuple[str, ...] = ()
    listening_markers: tuple[str, ...] = ()
    spec_decoding: tuple[SpecMetric, ...] = ()
    serving: ServingCounters = NO_SERVING_COUNTERS
    port_flags: tuple[str, ...] = ("--port",)
    host_flags: tuple[str, ...] = ("--host",)
    port_env: tuple[str, ...] = ()  # environment variables holding the port (or host:port)
    host_env: tuple[str, ...] = ()
    default_host: str | None = None
    flags: CommandFlags = CommandFlags()  # the rest of the command line: model, parallelism, quantization
    # log-based detection: (regex, weight); an engine needs a total weight of DETECT_THRESHOLD
    detect_patterns: tuple[tuple[str, int], ...] = ()
    # engines whose log lines can appear inside this engine's log (SGLang prints vLLM-style loader
    # lines, Ollama runs llama.cpp): when both are detected, this one wins
    embeds: tuple[str, ...] = ()
    # a daemon that loads each model on demand (Ollama): the lines that say a model was asked for (its runner
    # started). A log that ends with the daemon listening, none of these seen and nothing failed, is a daemon serving
    # (its listening line is its ready line); a model asked for is the start, to its own ready line
    on_demand: tuple[str, ...] = ()
    # traceback frames that tell in which phase a crash happened: (regex, phase), applied forward-only
    frame_markers: tuple[PhaseMarker, ...] = ()
    compile_cache: tuple[CompileCacheMarker, ...] = ()
    engine_clock: tuple[ClockMarker, ...] = ()  # its own startup figures in its log (firstlight.anatomy.compare_clocks)
    # the engine's lines that say its weights come from a peer (another running instance), not from storage
    peer_load: tuple[str, ...] = ()
    # ... that say a sleeping engine woke up (its weights and KV cache put back, nothing loaded)
    wake: tuple[str, ...] = ()
    # the engine's lines that name its compile cache's key: a ``key`` group (the cache directory's hash), or the
    # factors that make it (``env``, ``cfg``, ``comp``, ``code`` groups): what changed when a miss follows hits
    compile_key: tuple[str, ...] = ()
    # the engine's line that says its version, its version in a ``version`` group ("" when it prints none)
    version_line: str = ""
    # "server": serves the API, READY after a real generation; "worker": a member of a multi-node start that
    # serves no API (llama.cpp's RPC server): READY when its process tree listens on its port, observed in /proc
    role: str = "server"
    # a worker that serves no port (vLLM --headless) is READY when one of these lines said its engines are up and
    # its process tree holds a connection to its head node (``CommandFlags.head``)
    worker_ready_markers: tuple[str, ...] = ()
    notes: str = ""
    # the engine's releases whose real server the test suite starts and watches (the set-up scripts pin them);
    # ``firstlight --version`` names them. Empty: the profile was checked against recorded logs only
    checked_versions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # accept plain tuples in the data: (regex, phase[, weak]), (regex, kind[, phase]),
        # (regex, category, hint, fatal[, rank]), (source, name, meaning)
        def norm(name: str, cls: Any) -> None:
            items = getattr(self, name)
            if any(not isinstance(x, cls) for x in items):
                object.__setattr__(self, name, tuple(x if isinstance(x, cls) else cls(*x) for x in items))

        norm("phase_markers", PhaseMarker)
        norm("progress_markers", ProgressMarker)
        norm("failure_signatures", FailureSignature)
        norm("frame_markers", PhaseMarker)
        norm("spec_decoding", SpecMetric)
        norm("compile_cache", CompileCacheMarker)
        norm("engine_clock", ClockMarker)
        norm("images", ImageEntrypoint)
        norm("clock_endpoints", ClockEndpoint)

    def compile_cache_state(self, text: str) -> tuple[str, float | None] | None:
        """(hit | miss | total, seconds) for one of the engine's compile-cache lines (cleaned), else None."""
        for rx, state in self._compile_cache_rx:
            m = rx.search(text)
            if m:
                secs = next((v for k, v in m.groupdict().items() if k.startswith("seconds") and v), None)
                return state, float(secs) if secs else None
        return None

    def start_line(self, text: str) -> tuple[str, str] | None:
        """("peer" | "woken", text) for a line that says how this start got its weights, ("version",
        V) for a version line (cleaned), else None."""
        rx = self._start_rx
        if rx is None:
            return None
        m = rx.search(text)
        if m is None:
            return None
        found = m.groupdict()
        kind = next((k for k in START_LINE_KINDS if found.get(f"_{k}") is not None), None)
        if kind is not None:
            return kind, text
        if found.get("_compile_key") is not None:
            said = [f"{f}={found[f]}" for f in ("key", *COMPILE_FACTORS) if found.get(f)]
            return ("compile_key", " ".join(said)) if said else None
        v = found.get("version")
        return ("version", v) if v else None

    @cached_property
    def _start_rx(self) -> re.Pattern[str] | None:
        kinds = {"peer": self.peer_load, "woken": self.wake}
        alts = [f"(?P<_{k}>" + "|".join(f"(?:{p})" for p in kinds[k]) + ")" for k in START_LINE_KINDS if kinds[k]]
        if self.compile_key:
            alts.append("(?P<_compile_key>" + "|".join(f"(?:{p})" for p in self.compile_key) + ")")
        alts += [f"(?:{self.version_line})"] if self.version_line else []
        return re.compile("|".join(alts)) if alts else None

    def asks_a_model(self, text: str) -> bool:
        """One of the ``on_demand`` lines (a cleaned line): the daemon was asked for a model."""
        return self._on_demand_rx is not None and self._on_demand_rx.search(text) is not None

    @cached_property
    def _on_demand_rx(self) -> re.Pattern[str] | None:
        return re.compile("|".join(f"(?:{p})" for p in self.on_demand)) if self.on_demand else None

    @cached_property
    def _compile_cache_rx(self) -> tuple[tuple[re.Pattern[str], str], ...]:
        return tuple((re.compile(m.pattern), m.state) for m in self.compile_cache)

    def clock_reading(self, text: str) -> tuple[ClockMarker, float] | None:
        """(marker, the engine's seconds) for one of the engine's own startup figures (a cleaned line), else None."""
        for lits, rx, marker in self._clock_rx:
            if lits and not any(lit in text for lit in lits):  # a literal the regex needs: most lines cost no regex
                continue
            m = rx.search(text)
            if m:
                try:
                    return marker, float(m.group("seconds"))
                except (IndexError, ValueError):
                    return None
        return None

    @cached_property
    def _clock_rx(self) -> tuple[tuple[tuple[str, ...], re.Pattern[str], ClockMarker], ...]:
        return tuple(((required_literal(m.pattern) or ((), False))[0], re.compile(m.pattern), m)
                     for m in self.engine_clock)

    def classify(self, line: str) -> LineMatch:
        """Classify one log line (pure; strips ANSI colours and TP/worker/time prefixes)."""
        return self._matcher.classify(clean_line(line))

    def classify_clean(self, text: str) -> LineMatch:
        """Classify a line that has already been through :func:`clean_line`."""
        return self._matcher.classify(text)

    @cached_property
    def _matcher(self) -> _Matcher:
        return _Matcher(self)

    @cached_property
    def detect_rules(self) -> tuple[Rule, ...]:
        """``detect_patterns`` compiled once per profile: a detector is made for every log read."""
        return compile_rules(list(self.detect_patterns))


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.replace(",", ""))
    except ValueError:
        return None


# rule kinds, in classification order
_PHASE, _PROGRESS, _FAILURE, _READY, _LISTEN, _FRAME, _WORKER_READY = range(7)


class _Matcher:
    """All of a profile's regexes behind a word index: a line only runs the rules whose anchor word it
    contains (plus the few rules without one, behind a substring test)."""

    def __init__(self, profile: EngineProfile) -> None:
        for marker in profile.phase_markers:
            if marker.phase not in PHASE_INDEX:
                raise ValueError(f"{profile.name}: unknown phase {marker.phase!r}")
        for sig in profile.failure_signatures:
            if sig.category not in CATEGORY_RANK:
                raise ValueError(f"{profile.name}: unknown failure category {sig.category!r}")
            if sig.phase is not None and sig.phase not in PHASE_INDEX:
                raise ValueError(f"{profile.name}: unknown phase {sig.phase!r}")
        items: list[tuple[str, int, Any]] = []
        items += [(m.pattern, _PHASE, m) for m in profile.phase_markers]
        items += [(m.pattern, _PROGRESS, m) for m in profile.progress_markers]
        items += [
            (
                s.pattern,
                _FAILURE,
                Failure(s.category, s.hint, s.fatal, CATEGORY_RANK[s.category] if s.rank is None else s.rank,
                        s.phase or FAILURE_PHASES.get(s.category)),
            )
            for s in profile.failure_signatures
        ]
        items += [(p, _READY, True) for p in profile.ready_markers]
        items += [(p, _LISTEN, True) for p in profile.listening_markers]
        items += [(p, _WORKER_READY, True) for p in profile.worker_ready_markers]
        items += [(m.pattern, _FRAME, m) for m in profile.frame_markers]
        self.rules = compile_rules([(pattern, (kind, payload)) for pattern, kind, payload in items])
        self.index: dict[str, list[int]] = {}
        self.nocase_index: dict[str, list[int]] = {}
        always: list[int] = []
        for rid, rule in enumerate(self.rules):
            words = list(rule.anchors) if rule.anchors else [None]
            if any(w is None for w in words):
                always.append(rid)
                continue
            target = self.nocase_index if rule.nocase else self.index
            for w in words:
                assert w is not None
                target.setdefault(w, []).append(rid)
        self.always = frozenset(always)
        self.keys = frozenset(self.index)
        self.nocase_keys = frozenset(self.nocase_index)

    def candidates(self, text: str) -> list[int]:
        tokens = set(WORD.findall(text))
        active = set(self.always)
        for w in tokens & self.keys:
            active.update(self.index[w])
        if self.nocase_keys:
            for w in set(WORD.findall(text.lower())) & self.nocase_keys:
                active.update(self.nocase_index[w])
        return sorted(active)

    def classify(self, text: str) -> LineMatch:
        if not text:
            return NO_MATCH
        phase: str | None = None
        weak = False
        progress: Progress | None = None
        best: Failure | None = None
        fatal = False
        ready = listening = worker_ready = False
        frame_phase: str | None = None
        progress_phase: str | None = None
        lower: list[str] = []
        for rid in self.candidates(text):
            rule = self.rules[rid]
            kind, payload = rule.payload
            if kind == _PHASE and phase is not None:
                continue
            if kind == _PROGRESS and progress is not None:
                continue
            if (kind == _READY and ready) or (kind == _LISTEN and listening):
                continue
            if kind == _WORKER_READY and worker_ready:
                continue
            if kind == _FRAME and frame_phase is not None:
                continue
            if not may_match(rule, text, lower):
                continue
            m = rule.regex.search(text)
            if m is None:
                continue
            if kind == _PHASE:
                phase, weak = payload.phase, payload.weak
            elif kind == _PROGRESS:
                progress = _progress(payload, m)
                progress_phase = payload.phase
            elif kind == _FAILURE:
                fatal = fatal or payload.fatal
                if best is None or payload.rank > best.rank:
                    best = payload
            elif kind == _READY:
                ready = True
            elif kind == _LISTEN:
                listening = True
            elif kind == _WORKER_READY:
                worker_ready = True
            else:
                frame_phase = payload.phase
        if phase is None and progress_phase is not None:
            phase, weak = progress_phase, True  # a progress bar implies its phase (forward only)
        if best is not None and fatal and not best.fatal:
            # a wrapper line that quotes its root cause ("runner process has terminated: ... out of memory")
            best = Failure(best.category, best.hint, True, best.rank, best.phase)
        if (
            phase is None
            and progress is None
            and best is None
            and not ready
            and not listening
            and frame_phase is None
            and not worker_ready
        ):
            return NO_MATCH
        return LineMatch(phase, progress, best, ready, listening, weak, frame_phase, worker_ready)


def _progress(marker: ProgressMarker, m: re.Match[str]) -> Progress:
    groups = m.groupdict()
    done = _int(groups.get("done"))
    total = _int(groups.get("total"))
    pct = groups.get("pct")
    frac = groups.get("frac")
    fraction: float | None = None
    try:
        if done is not None and total:
            fraction = min(1.0, done / total)
        elif pct is not None:
            fraction = min(1.0, float(pct) / 100.0)
        elif frac is not None:
            fraction = min(1.0, float(frac))
    except ValueError:
        fraction = None
    return Progress(marker.kind, done, total, fraction)


__all__ = [
    "CATEGORY_RANK",
    "FAILURE_CATEGORIES",
    "METRICS",
    "NO_MATCH",
    "PHASES",
    "PHASE_INDEX",
    "SELF_NAMED",
    "WEAK",
    "WRAPPER_RANK",
    "ClockEndpoint",
    "ClockMarker",
    "EndpointRule",
    "Endpoints",
    "EngineProfile",
    "Failure",
    "FailureSignature",
    "ImageEntrypoint",
    "JsonValue",
    "LineMatch",
    "PhaseMarker",
    "Progress",
    "ProgressMarker",
    "ServingCounters",
    "SpecMetric",
    "clean_line",
    "metric_prefix",
    "owned_by",
    "strip_ansi",
]
