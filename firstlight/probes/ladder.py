"""The readiness ladder: port -> HTTP -> health -> model listed -> a real generation.

``Ladder.climb`` checks the rungs in order and stops at the first that fails, so no generation is sent while
a lower level fails. Every request has connect and read timeouts and an overall deadline (a server that
trickles bytes cannot hold a probe), and bodies are capped. The ladder only observes: it returns ``Probe``
records and leaves their meaning to the judge.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from firstlight.config import ProbeConfig
from firstlight.engines.profile import Endpoints
from firstlight.timeline import Level, Probe

MAX_BODY = 4 << 20
_UNHEALTHY = {"unhealthy", "loading", "initializing", "starting", "error", "unavailable", "not_ready"}


class TooSlow(httpx.ReadTimeout):
    """The answer did not complete by its deadline (a server trickling bytes)."""


def read_capped(resp: httpx.Response, deadline: float, what: str) -> bytes:
    """The body of a streamed response, at most ``MAX_BODY`` bytes, read by ``deadline`` (monotonic) at the
    latest: a read timeout alone bounds each read, not the whole answer."""
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:
            break
        if time.monotonic() > deadline:
            raise TooSlow(f"{what}: answer not complete by its deadline")
    return b"".join(chunks)[:MAX_BODY]


@dataclass(frozen=True)
class _Paths:
    """The endpoints the ladder probes (the engine's, or the user's where set)."""

    health: str
    models: str | None
    completions: str
    chat: str


@dataclass
class _Response:
    status: int
    body: bytes
    latency_s: float

    def text(self, n: int = 160) -> str:
        s = self.body[:n].decode("utf-8", "replace").replace("\n", " ").strip()
        return s + ("…" if len(self.body) > n else "")

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


def split_url(url: str) -> tuple[str, int]:
    """Host and port of an http(s) URL; raises ValueError with a readable message."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url!r}")
    if not parts.hostname:
        raise ValueError(f"no host in URL: {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"bad port in URL: {url!r}") from None
    return parts.hostname, port


def normalise_url(url: str) -> str:
    url = url if "://" in url else f"http://{url}"
    split_url(url)
    return url.rstrip("/")


class Ladder:
    """Climbs the readiness ladder against one server."""

    def __init__(self, cfg: ProbeConfig, clock: Callable[[], float] = time.time,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.cfg = cfg
        self.base = normalise_url(cfg.url)
        self.host, self.port = split_url(self.base)
        self.clock = clock
        headers = {"User-Agent": "firstlight"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        self._client = httpx.Client(base_url=self.base, headers=headers, transport=transport,
                                    follow_redirects=False, trust_env=False)
        self.model: str | None = cfg.model
        self.paths = _Paths(cfg.health_path, cfg.models_path, cfg.completions_path, cfg.chat_path)
        self.requests: Counter[str] = Counter()  # requests sent, by level (for the benchmark)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Ladder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the rungs -------------------------------------------------------------------------------------
    def climb(self, top: Level = Level.GENERATION) -> list[Probe]:
        """Check rungs from PORT up to ``top``; stop at the first failure."""
        results: list[Probe] = []
        for rung in (self.port_open, self.health, self.models, self.generate):
            for p in rung():
                if p.level > top:
                    return results
                results.append(p)
                if not p.ok:
                    return results
        return results

    def port_open(self) -> list[Probe]:
        t0 = self.clock()
        self.requests["port"] += 1
        try:
            with socket.create_connection((self.host, self.port), timeout=self.cfg.connect_timeout):
                pass
        except OSError as e:
            return [Probe(t0, Level.PORT, False, f"connect {self.host}:{self.port}: {_oserror(e)}")]
        return [Probe(self.clock(), Level.PORT, True, f"{self.host}:{self.port} accepts connections",
                      latency_s=self.clock() - t0)]

    def health(self) -> list[Probe]:
        path = self.paths.health
        t0 = self.clock()
        try:
            r = self._get(path, "health")
        except httpx.HTTPError as e:
            return [Probe(t0, Level.HTTP, False, f"GET {path}: {describe_error(e)}")]
        now = self.clock()
        out = [Probe(now, Level.HTTP, True, f"GET {path} -> {r.status}", status=r.status, latency_s=r.latency_s)]
        if r.status in (404, 405):
            out.append(Probe(now, Level.HEALTH, True, f"GET {path} -> {r.status}: no health endpoint, skipped",
                             status=r.status))
        elif 200 <= r.status < 300 and not _says_unhealthy(r):
            out.append(Probe(now, Level.HEALTH, True, f"GET {path} -> {r.status} {r.text(80)}", status=r.status,
                             latency_s=r.latency_s))
        else:
            out.append(Probe(now, Level.HEALTH, False, f"GET {path} -> {r.status} {r.text(120)}", status=r.status,
                             latency_s=r.latency_s))
        return out

    def models(self) -> list[Probe]:
        path = self.paths.models
        t0 = self.clock()
        if not path:
            return [Probe(t0, Level.MODELS, True, "no models endpoint for this engine, skipped")]
        try:
            r = self._get(path, "models")
        except httpx.HTTPError as e:
            return [Probe(t0, Level.MODELS, False, f"GET {path}: {describe_error(e)}")]
        now = self.clock()
        if r.status in (404, 405):
            return [Probe(now, Level.MODELS, True, f"GET {path} -> {r.status}: no models endpoint, skipped",
                          status=r.status)]
        if r.status != 200:
            return [Probe(now, Level.MODELS, False, f"GET {path} -> {r.status} {r.text(120)}", status=r.status)]
        ids = _model_ids(r)
        if ids is None:
            return [Probe(now, Level.MODELS, False, f"GET {path} -> 200 but not a model list: {r.text(80)}",
                          status=200, transient=False)]
        if not ids:
            return [Probe(now, Level.MODELS, False, f"GET {path} -> 200 with no model listed", status=200)]
        if self.model is None:
            self.model = ids[0]
        return [Probe(now, Level.MODELS, True, f"GET {path} lists {', '.join(ids[:3])}", status=200,
                      latency_s=r.latency_s)]

    def generate(self) -> list[Probe]:
        cfg = self.cfg
        chat = cfg.api == "chat"
        path = self.paths.chat if chat else self.paths.completions
        body: dict[str, Any] = {"max_tokens": cfg.max_tokens, "temperature": 0, "stream": False}
        if chat:
            body["messages"] = [{"role": "user", "content": cfg.effective_prompt}]
        else:
            body["prompt"] = cfg.effective_prompt
        if self.model:
            body["model"] = self.model
        t0 = self.clock()
        try:
            r = self._post(path, body, "generation")
        except httpx.HTTPError as e:
            return [Probe(t0, Level.GENERATION, False, f"POST {path}: {describe_error(e)}",
                          latency_s=self.clock() - t0)]
        now = self.clock()
        if r.status != 200:
            # 4xx other than 408/429 is a definitive "no" (a wrong model name, a bad route); 5xx may be loading.
            definitive = 400 <= r.status < 500 and r.status not in (408, 425, 429)
            return [Probe(now, Level.GENERATION, False, f"POST {path} -> {r.status} {r.text(160)}",
                          status=r.status, latency_s=r.latency_s, transient=not definitive)]
        text, problem = _generated_text(r, chat)
        if problem is None and cfg.expect is not None and not re.search(cfg.expect, text or ""):
            problem = f"text {text!r} does not match --expect {cfg.expect!r}"
        if problem is not None:
            return [Probe(now, Level.GENERATION, False, f"POST {path} -> 200 but {problem}", status=200,
                          latency_s=r.latency_s, text=text, transient=False)]
        return [Probe(now, Level.GENERATION, True, f"POST {path} -> 200 in {r.latency_s:.2f}s: {text!r}",
                      status=200, latency_s=r.latency_s, text=text)]

    def identify(self) -> tuple[str, str] | None:
        """Ask the engine-specific endpoints who is serving: (engine, "GET path -> status") or None."""
        from firstlight.engines import DETECTION_ENDPOINTS, detect_from_endpoint

        for path, _ in DETECTION_ENDPOINTS:
            try:
                r = self._get(path, "identify")
            except httpx.HTTPError:
                continue
            name = detect_from_endpoint(path, r.status, r.body[:65536].decode("utf-8", "replace"))
            if name is not None:
                return name, f"GET {path} -> {r.status}"
        return None

    def use_endpoints(self, ep: Endpoints) -> None:
        """The engine became known: its endpoints replace the defaults, never an option the user set. The
        ladder keeps them in its own state (the configuration is read-only)."""
        explicit = self.cfg.explicit
        self.paths = _Paths(
            health=self.paths.health if "health_path" in explicit else ep.health,
            models=self.paths.models if "models_path" in explicit else ep.models,
            completions=self.paths.completions if "completions_path" in explicit else ep.completions,
            chat=self.paths.chat if "chat_path" in explicit else ep.chat,
        )

    # -- HTTP ------------------------------------------------------------------------------------------
    def _timeout(self, read: float) -> httpx.Timeout:
        return httpx.Timeout(connect=self.cfg.connect_timeout, read=read, write=self.cfg.connect_timeout,
                             pool=self.cfg.connect_timeout)

    def _get(self, path: str, what: str) -> _Response:
        self.requests[what] += 1
        return self._send("GET", path, None, self.cfg.read_timeout)

    def _post(self, path: str, body: dict[str, Any], what: str) -> _Response:
        self.requests[what] += 1
        return self._send("POST", path, body, self.cfg.generation_timeout)

    def _send(self, method: str, path: str, body: dict[str, Any] | None, read_timeout: float) -> _Response:
        t0 = time.monotonic()
        deadline = t0 + read_timeout + self.cfg.connect_timeout
        with self._client.stream(method, path, json=body, timeout=self._timeout(read_timeout)) as resp:
            body_bytes = read_capped(resp, deadline, f"{method} {path}")
            return _Response(resp.status_code, body_bytes, time.monotonic() - t0)


def _says_unhealthy(r: _Response) -> bool:
    """A 200 whose JSON says otherwise (Dynamo's frontend, LMDeploy's monitor)."""
    try:
        data = r.json()
    except (ValueError, UnicodeDecodeError):
        return False
    if isinstance(data, dict):
        status = data.get("status")
        return isinstance(status, str) and status.lower() in _UNHEALTHY
    return False


def _model_ids(r: _Response) -> list[str] | None:
    try:
        data = r.json()
    except (ValueError, UnicodeDecodeError):
        return None
    items = data.get("data", data.get("models")) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    ids = []
    for m in items:
        if isinstance(m, dict):
            name = m.get("id") or m.get("name") or m.get("model")
            if isinstance(name, str):
                ids.append(name)
    return ids


def _generated_text(r: _Response, chat: bool) -> tuple[str | None, str | None]:
    """The generated text, or why the answer is not a valid completion."""
    try:
        data = r.json()
    except (ValueError, UnicodeDecodeError):
        return None, f"not JSON: {r.text(60)!r}"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, f"no choices in the answer: {r.text(100)!r}"
    c = choices[0]
    if chat:
        msg = c["message"] if isinstance(c.get("message"), dict) else {}
        text = msg.get("content") or msg.get("reasoning_content") or msg.get("reasoning")
    else:
        text = c.get("text")
    if not isinstance(text, str):
        return None, "no text in the first choice"
    if not text.strip():
        return text, "an empty completion"
    return text, None


def _oserror(e: OSError) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, socket.timeout | TimeoutError):
        return "connect timed out"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve host ({e.strerror})"
    return e.strerror or type(e).__name__


def describe_error(e: Exception) -> str:
    """One line for an HTTP failure, without a traceback."""
    if isinstance(e, httpx.ConnectError):
        cause: BaseException | None = e
        for _ in range(8):  # anyio wraps ConnectionRefusedError in "All connection attempts failed"
            if cause is None:
                break
            if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
                return "connection refused"
            cause = cause.__cause__ or cause.__context__
        return f"cannot connect ({e})"
    if isinstance(e, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(e, TooSlow):
        return str(e)
    if isinstance(e, httpx.TimeoutException):
        return "no answer within the read timeout"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"not a valid HTTP answer ({e})"
    cause = e.__cause__ or e.__context__
    while cause is not None and not str(cause) and (cause.__cause__ or cause.__context__):
        cause = cause.__cause__ or cause.__context__
    if isinstance(e, httpx.ReadError | httpx.WriteError) and isinstance(cause, ConnectionResetError):
        return "connection reset by the server"
    detail = str(e) or (f"{type(cause).__name__}: {cause}" if cause is not None else "")
    return f"{type(e).__name__}: {detail}" if detail else type(e).__name__
