"""The readiness ladder: port -> HTTP -> health -> model listed -> a real generation.

``Ladder.climb`` checks the rungs in order and stops at the first that fails, so no generation is sent while
a lower level fails; each ``Probe`` goes to the caller's sink the moment it is known. All HTTP goes through
:mod:`firstlight.wire` (timeouts, a deadline on every byte, capped bodies, one model-list parser, clean text).
Whatever a server sends, a rung ends as a Probe: an exception inside a check is a failed probe with a note,
never an escaping error. The ladder only observes: it returns ``Probe`` records and leaves their meaning to the
judge.

Run-time state (the endpoints learnt once the engine is known, the model the list named) lives here, never in
the ``ProbeConfig``, which stays as the user gave it: an explicit ``health_path`` always wins.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from firstlight.config import ProbeConfig
from firstlight.engines.profile import Endpoints
from firstlight.probes.identify import IDENTIFY_BUDGET_S, identify_engine, identify_paths
from firstlight.timeline import CollectorBook, CollectorStat, Level, Probe
from firstlight.wire import (
    Answer,
    NotJSON,
    Wire,
    WireError,
    answer_tokens,
    clean_text,
    generated_text,
    model_ids,
    normalise_url,
    says_unhealthy,
    split_url,
)

__all__ = ["Ladder", "normalise_url", "split_url"]

ProbeSink = Callable[[Probe], None]
# One signature for every rung: (the endpoints of this climb, the climb's deadline) -> its probes, lowest first.
Rung = Callable[[Endpoints, float | None], list[Probe]]
# A worker's readiness observed without a request (samplers/ports.worker_listening): (held, what was seen)
Listener = Callable[[], tuple[bool, str]]
RUNG_NAMES = ("port", "health", "models", "generation")  # the rungs in climbing order, as the metrics name them


class Ladder:
    """Climbs the readiness ladder against one server.

    The paths come from the ``ProbeConfig``; ``endpoints`` (at construction, or :meth:`use_endpoints` once the
    engine is known at run time) replace those the user did not set (``cfg.explicit``): an explicit
    ``--health-path`` always wins.

    A worker of a multi-node start (its profile's ``role``) serves no API: given a ``listener``, the ladder is one
    rung, its port, observed by the listener and never connected to; READY is the judge's to say from it.
    """

    def __init__(self, cfg: ProbeConfig, clock: Callable[[], float] = time.time,
                 endpoints: Endpoints | None = None, wire: Wire | None = None,
                 listener: Listener | None = None, logprobs: bool = False) -> None:
        self.cfg = cfg
        # ask the generation for its tokens' log-probabilities (the known answer); dropped for the rest of the run
        # when the engine refuses the field
        self.logprobs = logprobs
        self.clock = clock
        self.wire = wire or Wire(cfg.url, api_key=cfg.api_key, connect_timeout=cfg.connect_timeout)
        self.host, self.port = self.wire.host, self.wire.port
        self._endpoints = Endpoints(health=cfg.health_path, models=cfg.models_path,
                                    completions=cfg.completions_path, chat=cfg.chat_path)
        if endpoints is not None:
            self.use_endpoints(endpoints)
        self.model: str | None = cfg.model
        self._requests: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        # (name, the lowest level it answers, the check): climbed in this order; each check is timed and
        # counted in one place, _check, whichever rung it is
        self.listener = listener
        self._rungs: tuple[tuple[str, Level, Rung], ...] = (
            ("port", Level.PORT, self._port_open), ("health", Level.HTTP, self._health),
            ("models", Level.MODELS, self._models), ("generation", Level.GENERATION, self._generate))
        if listener is not None:
            self._rungs = (("port", Level.PORT, self._listening),)
        self._books = {name: CollectorBook("probe", name) for name, _, _ in self._rungs}

    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> Ladder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- run-time state ----------------------------------------------------------------------------------
    def use_endpoints(self, endpoints: Endpoints) -> None:
        """Probe the engine's own endpoints from the next climb on, except where the user set a path. The
        config is never written; the ladder keeps them in its own state (one reference, swapped whole)."""
        cfg, explicit = self.cfg, self.cfg.explicit
        self._endpoints = Endpoints(
            health=cfg.health_path if "health_path" in explicit else endpoints.health,
            models=cfg.models_path if "models_path" in explicit else endpoints.models,
            completions=cfg.completions_path if "completions_path" in explicit else endpoints.completions,
            chat=cfg.chat_path if "chat_path" in explicit else endpoints.chat,
        )

    @property
    def paths(self) -> Endpoints:
        """The paths the next climb probes."""
        return self._endpoints

    @property
    def health_path(self) -> str:
        return self._endpoints.health

    @property
    def requests(self) -> dict[str, int]:
        """Requests sent so far, by level (for the summary): a copy, safe to read from another thread."""
        with self._count_lock:
            return dict(self._requests)

    def _count(self, what: str, n: int = 1) -> None:
        with self._count_lock:
            self._requests[what] += n

    def stats(self) -> list[CollectorStat]:
        """Each rung's checks so far (blackbox_exporter's probe success and duration): how many, how many did not
        hold, how many failed inside firstlight, the last one's outcome and wall time. Safe from another thread."""
        with self._count_lock:
            return [self._books[name].stat() for name in RUNG_NAMES if name in self._books]

    # -- the rungs -------------------------------------------------------------------------------------
    def climb(self, top: Level = Level.GENERATION, sink: ProbeSink | None = None,
              deadline_at: float | None = None) -> list[Probe]:
        """Check rungs from PORT up to ``top``; stop at the first failure. Each probe goes to ``sink`` as soon
        as it is known; ``deadline_at`` (``time.monotonic``) bounds the whole climb."""
        results: list[Probe] = []
        ep = self._endpoints  # one set of endpoints for the whole climb
        for name, level, rung in self._rungs:
            if level > top:  # a rung above the top is never asked: no generation sent for a lower top
                return results
            for p in self._check(name, level, rung, ep, deadline_at):
                if p.level > top:
                    return results
                results.append(p)
                if sink is not None:
                    sink(p)
                if not p.ok:
                    return results
        return results

    def generate(self, deadline_at: float | None = None) -> Probe:
        """The top rung alone: one generation (the serving checks after READY, with their own max_tokens); a
        worker's: its listening port, observed."""
        if self.listener is not None:
            return self._check("port", Level.PORT, self._listening, self._endpoints, deadline_at)[-1]
        return self._check("generation", Level.GENERATION, self._generate, self._endpoints, deadline_at)[-1]

    def _check(self, name: str, level: Level, rung: Rung, ep: Endpoints, deadline_at: float | None) -> list[Probe]:
        """One rung checked, timed and counted: it held when every probe it gave holds. Whatever a server sends,
        a check ends as probes: an exception inside one is a failed probe with a note, and an error in the count."""
        t0, started = self.clock(), time.monotonic()
        error = False
        try:
            probes = rung(ep, deadline_at)
        except Exception as e:
            error = True
            probes = [Probe(t0, level, False, f"{level.label} check failed inside firstlight: "
                                              f"{type(e).__name__}: {clean_text(str(e), 160)}")]
        with self._count_lock:
            self._books[name].record(bool(probes) and all(p.ok for p in probes), time.monotonic() - started, error)
        return probes

    def _port_open(self, ep: Endpoints, deadline_at: float | None) -> list[Probe]:
        t0 = self.clock()
        self._count("port")
        try:
            took = self.wire.port_open(deadline_at)
        except WireError as e:
            return [Probe(t0, Level.PORT, False, f"connect {self.host}:{self.port}: {e}")]
        return [Probe(self.clock(), Level.PORT, True, f"{self.host}:{self.port} accepts connections",
                      latency_s=took)]

    def _listening(self, ep: Endpoints, deadline_at: float | None) -> list[Probe]:
        assert self.listener is not None
        self._count("port")
        held, seen = self.listener()
        return [Probe(self.clock(), Level.PORT, held, seen)]

    def _health(self, ep: Endpoints, deadline_at: float | None) -> list[Probe]:
        path = self.health_path
        t0 = self.clock()
        self._count("health")
        try:
            r = self.wire.get(path, read_timeout=self.cfg.read_timeout, deadline_at=deadline_at)
        except WireError as e:
            return [Probe(t0, Level.HTTP, False, f"GET {path}: {e}")]
        now = self.clock()
        out = [Probe(now, Level.HTTP, True, f"GET {path} -> {r.status}", status=r.status, latency_s=r.latency_s)]
        if r.status in (404, 405):
            out.append(Probe(now, Level.HEALTH, True, f"GET {path} -> {r.status}: no health endpoint, skipped",
                             status=r.status))
        elif 200 <= r.status < 300 and not says_unhealthy(_json(r)[1]):
            out.append(Probe(now, Level.HEALTH, True, f"GET {path} -> {r.status} {r.text(80)}", status=r.status,
                             latency_s=r.latency_s))
        else:
            out.append(Probe(now, Level.HEALTH, False, f"GET {path} -> {r.status} {r.text(120)}", status=r.status,
                             latency_s=r.latency_s))
        return out

    def _models(self, ep: Endpoints, deadline_at: float | None) -> list[Probe]:
        path = ep.models
        t0 = self.clock()
        if not path:
            return [Probe(t0, Level.MODELS, True, "no models endpoint for this engine, skipped")]
        self._count("models")
        try:
            r = self.wire.get(path, read_timeout=self.cfg.read_timeout, deadline_at=deadline_at)
        except WireError as e:
            return [Probe(t0, Level.MODELS, False, f"GET {path}: {e}")]
        now = self.clock()
        if r.status in (404, 405):
            return [Probe(now, Level.MODELS, True, f"GET {path} -> {r.status}: no models endpoint, skipped",
                          status=r.status)]
        if r.status != 200:
            return [Probe(now, Level.MODELS, False, f"GET {path} -> {r.status} {r.text(120)}", status=r.status)]
        ids = model_ids(_json(r)[1])
        if ids is None:
            return [Probe(now, Level.MODELS, False, f"GET {path} -> 200 but not a model list: {r.text(80)}",
                          status=200, transient=False)]
        if not ids:
            return [Probe(now, Level.MODELS, False, f"GET {path} -> 200 with no model listed", status=200)]
        if self.model is None:
            self.model = ids[0]
        shown = clean_text(", ".join(clean_text(i, 80) for i in ids[:3]), 200)
        return [Probe(now, Level.MODELS, True, f"GET {path} lists {shown}", status=200, latency_s=r.latency_s)]

    def _generate(self, ep: Endpoints, deadline_at: float | None) -> list[Probe]:
        cfg = self.cfg
        chat = cfg.api == "chat"
        path = ep.chat if chat else ep.completions
        body: dict[str, Any] = {"max_tokens": cfg.max_tokens, "temperature": 0, "stream": False}
        if chat:
            body["messages"] = [{"role": "user", "content": cfg.effective_prompt}]
        else:
            body["prompt"] = cfg.effective_prompt
        if self.model:
            body["model"] = self.model
        t0 = self.clock()
        try:
            r = self._post_generation(path, body, chat, deadline_at)
        except WireError as e:
            return [Probe(t0, Level.GENERATION, False, f"POST {path}: {e}", latency_s=self.clock() - t0)]
        now = self.clock()
        if r.status != 200:
            # 4xx other than 408/429 is a definitive "no" (a wrong model name, a bad route); 5xx may be loading.
            definitive = 400 <= r.status < 500 and r.status not in (408, 425, 429)
            return [Probe(now, Level.GENERATION, False, f"POST {path} -> {r.status} {r.text(160)}",
                          status=r.status, latency_s=r.latency_s, transient=not definitive)]
        is_json, data = _json(r)
        text: str | None
        problem: str | None
        if not is_json:
            text, problem = None, f"not JSON: {r.text(60)!r}"
        else:
            text, problem = generated_text(data, chat)
            if problem == "no choices in the answer":
                problem = f"no choices in the answer: {r.text(100)!r}"
        if problem is None and cfg.expect is not None and not re.search(cfg.expect, (text or "")[:65536]):
            problem = f"text {clean_text(text or '', 80)!r} does not match --expect {cfg.expect!r}"
        shown = clean_text(text, 200) if text is not None else None
        if problem is not None:
            return [Probe(now, Level.GENERATION, False, f"POST {path} -> 200 but {problem}", status=200,
                          latency_s=r.latency_s, text=shown, transient=False)]
        tokens, logprobs = answer_tokens(data) if self.logprobs else ((), ())
        return [Probe(now, Level.GENERATION, True, f"POST {path} -> 200 in {r.latency_s:.2f}s: {shown!r}",
                      status=200, latency_s=r.latency_s, text=shown, tokens=tokens, logprobs=logprobs)]

    def _post_generation(self, path: str, body: dict[str, Any], chat: bool, deadline_at: float | None) -> Answer:
        """The generation request, with log-probabilities asked where the known answer wants them (the completions
        API's ``logprobs: 1``; the chat API's ``logprobs: true, top_logprobs: 1``). An engine that refuses the field
        (400 or 422) is asked again without it, and never again this run: the answer is then checked by its text."""
        self._count("generation")
        if not self.logprobs:
            return self.wire.post_json(path, body, read_timeout=self.cfg.generation_timeout, deadline_at=deadline_at)
        asked = {**body, "logprobs": True, "top_logprobs": 1} if chat else {**body, "logprobs": 1}
        r = self.wire.post_json(path, asked, read_timeout=self.cfg.generation_timeout, deadline_at=deadline_at)
        if r.status not in (400, 422):
            return r
        self.logprobs = False
        self._count("generation")
        return self.wire.post_json(path, body, read_timeout=self.cfg.generation_timeout, deadline_at=deadline_at)

    # -- engine identification ---------------------------------------------------------------------------
    def identify(self, budget_s: float = IDENTIFY_BUDGET_S) -> tuple[str, str] | None:
        """Ask the engine-specific endpoints, all at once, who is serving: (engine, "GET path -> status") or
        None; ``budget_s`` bounds it all."""
        self._count("identify", len(identify_paths()))
        return identify_engine(self.wire, budget_s)


def _json(r: Answer) -> tuple[bool, Any]:
    """(True, the answer's JSON) or (False, None) when it is not JSON (hostile nesting included)."""
    try:
        return True, r.json()
    except NotJSON:
        return False, None
