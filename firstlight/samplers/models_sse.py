"""llama.cpp's router (``llama-server --models-dir DIR``) streams its model loads at ``GET /models/sse``: this
source follows that stream during the start and puts each stage's begin and end on the sink as
:class:`firstlight.timeline.EngineClock` marks (parsed by ``firstlight.engines.clocks.ModelsStream``).

It only observes, on its own thread, through the one HTTP layer (``firstlight.wire``): the answer's headers come
by a deadline, a failed connect is retried with a doubling back-off (up to BACKOFF_MAX_S), a quiet stream is
reconnected after READ_TIMEOUT_S, lines are capped (SSELines) and so is one connection's body (MAX_STREAM_BYTES,
and MAX_BYTES_WITHOUT_EVENT of anything but events: dropped, read again after the back-off),
and it stops at the model's ``loaded`` event, after MAX_EVENTS events, or when stopped. The driver never waits on
it; what escapes its loop is a failed note (the guard of every thread), and the loop starts again.
An event sent while it reconnects is not seen (the stream does not replay): its stage then has no figure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from firstlight.engines.clocks import ModelsStream
from firstlight.samplers.base import Guard, Sink
from firstlight.timeline import SourceNote
from firstlight.wire import LineTooLong, SSELines, Wire, WireError
from firstlight.wire.client import Stream

PATH = "/models/sse"
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 10.0  # a load's stages can be quiet this long (SmolLM2's 18 s on a loaded machine): reconnect
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 5.0
MAX_EVENTS = 10_000  # a stream that never says "loaded" stops costing anything after these
MAX_STREAM_BYTES = 64 << 20  # one connection's body; then it is read again from a new one
# A connection that sends this much and no event (comments, other fields: a keep-alive gone wild) is dropped and
# read again after the back-off, so that a chattering stream costs a moment each time, not a core
MAX_BYTES_WITHOUT_EVENT = 1 << 20
ROUTER_FLAGS = ("--models-dir", "--models-preset")  # llama-server's router mode (common/arg.cpp)
ROUTER_ENV = ("LLAMA_ARG_MODELS_DIR", "LLAMA_ARG_MODELS_PRESET")


def is_router(argv: list[str] | None, env: dict[str, str] | None = None) -> bool:
    """The command starts llama-server in router mode (its models from a directory or a preset file)."""
    if not argv:
        return False
    flagged = any(a in ROUTER_FLAGS or a.split("=", 1)[0] in ROUTER_FLAGS for a in argv)
    return flagged or any((env or {}).get(k) for k in ROUTER_ENV)


class ModelsSSE:
    """Follows ``base_url``'s /models/sse on a daemon thread until the model has loaded or ``stop``."""

    name = "models-sse"

    def __init__(self, base_url: str, api_key: str | None = None, clock: Callable[[], float] = time.time,
                 read_timeout: float = READ_TIMEOUT_S) -> None:
        self.base = base_url.rstrip("/")
        self.url = self.base + PATH
        self.api_key = api_key
        self.clock = clock
        self.read_timeout = read_timeout
        self.stream = ModelsStream()
        self.events = 0
        self.connects = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Stream | None = None
        self._guard = Guard("engine_clock", f"the reader of {PATH}", clock=clock)

    def start(self, sink: Sink) -> None:
        self._thread = threading.Thread(target=self._run, args=(sink,), name="firstlight-models-sse", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            resp.abort()  # a read in progress ends at once

    def sync(self, timeout: float) -> None:
        """Nothing to wait for: each event goes to the sink as it is read."""

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _done(self) -> bool:
        return self._stop.is_set() or self.stream.loaded or self.events >= MAX_EVENTS

    def _run(self, sink: Sink) -> None:
        self._guard.run(lambda: self._read_all(sink), sink, stop=self._stop, again_s=BACKOFF_MAX_S)

    def _read_all(self, sink: Sink) -> None:
        wait = BACKOFF_MIN_S
        noted = chatter_noted = False
        with Wire(self.base, api_key=self.api_key, connect_timeout=CONNECT_TIMEOUT_S) as wire:
            while not self._done():
                try:
                    before = self.events
                    chatter = self._follow(wire, sink)
                    if chatter is not None and not chatter_noted:
                        sink(SourceNote(self.clock(), "engine_clock", chatter))
                        chatter_noted = True
                    if self.events > before and chatter is None:  # it streamed: again at once (else the back-off)
                        wait = BACKOFF_MIN_S
                        continue
                except LineTooLong as e:
                    if not noted:
                        sink(SourceNote(self.clock(), "engine_clock", f"{PATH}: {e}; reconnecting"))
                        noted = True
                except WireError as e:
                    if e.timed_out:
                        continue  # quiet, not gone (a timeout took its seconds: no spin)
                    # not up yet, or cut by stop(): tried again after the back-off
                finally:
                    self._resp = None
                if self._stop.wait(wait):
                    return
                wait = min(wait * 2, BACKOFF_MAX_S)

    def _follow(self, wire: Wire, sink: Sink) -> str | None:
        """Reads one connection; what it says when it let go of a stream that sends bytes but no event."""
        with wire.stream("GET", PATH, read_timeout=self.read_timeout, headers={"Accept": "text/event-stream"},
                         max_body=MAX_STREAM_BYTES) as resp:
            self._resp = resp
            if resp.status == 404:  # not a router, or a build without it: nothing to follow
                sink(SourceNote(self.clock(), "engine_clock", f"{PATH} -> 404: no model-load stream to read"))
                self._stop.set()
                return None
            if resp.status != 200:
                raise WireError(f"{PATH} -> {resp.status}")
            self.connects += 1
            lines = SSELines()
            chatter = 0  # bytes since the last event
            for chunk in resp.chunks():
                chatter += len(chunk)
                for line in lines.feed(chunk):
                    if not line.startswith("data:"):
                        continue
                    chatter = 0
                    self.events += 1
                    for mark in self.stream.feed(line[5:].strip(), self.clock()):
                        sink(mark)
                    if self._done():
                        return None
                if chatter > MAX_BYTES_WITHOUT_EVENT:
                    return f"{PATH}: {chatter} bytes without an event; read again after a pause"
        return None
