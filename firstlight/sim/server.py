"""The simulated LLM server: a real process on a real socket that cold-starts like an engine.

It prints the engine's own log lines (``dialects``), reads real weight files at a throttled rate, burns CPU,
forks worker processes, opens its port when that engine would (early with /health 503 for llama.cpp and
SGLang-style loading, only at the end for vLLM), makes the first generation slow if asked, and then serves
OpenAI-compatible completions and chat completions (streaming too) at a configured token rate.

It is a test fixture and the demo, never evidence that firstlight works with a real engine.
Run: ``python -m firstlight.sim --scenario normal --port 8000 --model-path DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from firstlight.sim.dialects import DIALECTS, Dialect
from firstlight.sim.scenarios import (
    SCENARIOS,
    Burn,
    Crash,
    Hang,
    KillWorker,
    Listen,
    Log,
    ReadWeights,
    Ready,
    Sleep,
    Spin,
    Step,
    Workers,
    scenario,
)
from firstlight.timestamps import TimestampParser

REAL_LOG = Path(__file__).parent / "data" / "sglang-eagle-llama2-specdec.log"
WORDS = ("Paris", ".", " The", " capital", " of", " France", " is", " Paris", ",", " a", " city", " on", " the",
         " Seine", ".")


_PORT_LOCKS: list[int] = []  # descriptors of the port reservations this process holds (until it exits)
_PORT_LOCK_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "firstlight-ports"


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (for the demo, tests and benchmarks), that cannot race: it lies
    below the kernel's ephemeral range (where every outgoing connection takes its source port, so a port from
    there can be taken between this call and the server's bind), and it is reserved for this process by a lock
    file, so parallel test workers never get the same one."""
    import fcntl
    import random
    import socket

    low, top = 20000, _ephemeral_low()
    if top - low >= 1000:
        _PORT_LOCK_DIR.mkdir(exist_ok=True)
        for port in random.sample(range(low, top), 200):
            fd = os.open(_PORT_LOCK_DIR / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            try:
                with socket.socket() as s:
                    s.bind((host, port))
            except OSError:
                os.close(fd)
                continue
            _PORT_LOCKS.append(fd)
            return port
    with socket.socket() as s:  # no room below the ephemeral range: the kernel's choice
        s.bind((host, 0))
        return int(s.getsockname()[1])


def make_weights(directory: Path, total_bytes: int, shards: int = 4) -> list[Path]:
    """Sparse safetensors files of ``total_bytes`` in all: real files to read, nothing to write. Each holds a
    valid safetensors header (one U8 tensor filling the file), so a checkpoint check finds them complete."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(shards):
        p = directory / f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        size = total_bytes // shards
        header, previous = b"", None
        while len(header) != previous:  # the header's length changes the data length it states; settle it
            previous, data = len(header), size - 8 - len(header)
            text = json.dumps({f"layer{i}.weight": {"dtype": "U8", "shape": [data], "data_offsets": [0, data]}})
            header = text.encode().ljust(-(-len(text) // 8) * 8)
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            f.truncate(size)
        paths.append(p)
    return paths


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.lock = threading.Lock()
        self.ready = False
        self.ready_at: float | None = None
        self.first_request_s = 0.0
        self.first_served = False
        self.gen_lock = threading.Lock()
        self.token_rate: float = args.token_rate
        self.spec_accept: float | None = args.spec_accept
        self.spec_draft_tokens = 0
        self.spec_accepted_tokens = 0
        self.spec_drafts = 0
        self.tokens_out = 0
        self.requests = 0


class Sim:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dialect: Dialect = DIALECTS[args.dialect]
        self.port: int = args.port or self.dialect.default_port
        self.state = State(args)
        self.server: ThreadingHTTPServer | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.lineno = 0

    # -- output --------------------------------------------------------------------------------------------
    def say(self, key: str, stream: str = "stderr", end: str = "\n", **kw: Any) -> None:
        if key not in self.dialect.lines or not self.dialect.lines[key]:
            return
        fields = {"model": self.args.model_path or "sim-model", "host": self.args.host, "port": self.port,
                  "tp": max(1, len(self.workers)), "pid": os.getpid(), "api_key": self.args.api_key,
                  "spec": "EAGLE" if self.state.spec_accept is not None else None, "secs": 1.0, "mb": 98.0,
                  "tokens": 0, "accept": self.state.spec_accept or 0.0, "rate": self.state.token_rate}
        fields.update(kw)
        out = sys.stderr if stream == "stderr" else sys.stdout
        out.write(self.dialect.line(key, **fields) + end)
        out.flush()

    # -- steps ---------------------------------------------------------------------------------------------
    def run(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN if self.args.ignore_term else self._on_term)
        if self.args.replay_log:
            self.replay_log(Path(self.args.replay_log), self.args.speed)
            return
        steps = scenario(self.args.scenario, self.args.load_seconds, self.args.workers)
        if self.dialect.listens_early:
            self.say("args")
            self.listen()
            self.say("listening")
        for step in steps:
            self.do(step)
        threading.Event().wait()  # serve until stopped

    def do(self, step: Step) -> None:
        if isinstance(step, Log):
            if self.dialect.listens_early and step.key in ("args", "listening"):
                return
            self.say(step.key, step.stream)
        elif isinstance(step, Listen):
            self.listen()
        elif isinstance(step, ReadWeights):
            self.read_weights(step)
        elif isinstance(step, Burn):
            self.burn(step)
        elif isinstance(step, Sleep):
            time.sleep(step.seconds)
        elif isinstance(step, Workers):
            for _ in range(step.count):
                self.workers.append(subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.DEVNULL))
        elif isinstance(step, KillWorker):
            if self.workers:
                w = self.workers.pop()
                w.send_signal(signal.SIGUSR1)
                w.wait()
        elif isinstance(step, Ready):
            self.listen()
            with self.state.lock:
                self.state.first_request_s = step.first_request_s
                self.state.ready = True
                self.state.ready_at = time.time()
            if self.args.ready_file:
                tmp = Path(self.args.ready_file + ".tmp")
                tmp.write_text(repr(self.state.ready_at))
                tmp.replace(self.args.ready_file)
        elif isinstance(step, Crash):
            for key in step.keys:
                self.say(key)
            self.stop_workers()
            os._exit(step.code)
        elif isinstance(step, Hang):
            threading.Event().wait()
        elif isinstance(step, Spin):
            while True:
                pass

    def replay_log(self, path: Path, speed: float) -> None:
        """Print a real startup log with its original timing (divided by ``speed``), opening the port and
        flipping /health where that engine does: at its listening line, and at its ready line."""
        from firstlight.engines import detect_from_lines, get_profile

        raw = path.read_bytes().decode("utf-8", "replace").split("\n")
        profile = get_profile(self.args.engine or detect_from_lines(raw) or "generic")
        self.dialect = DIALECTS.get(profile.name, self.dialect)
        stamps = TimestampParser()
        last: float | None = None
        failed = ready = False
        for line in raw:
            t = stamps.parse(line)
            if t is not None:
                # Waits only for plausible forward gaps: year-less formats and clock jumps must not stall.
                if last is not None and 0 < t - last <= 3600:
                    gap = (t - last) / speed
                    time.sleep(gap if self.args.max_gap is None else min(gap, self.args.max_gap))
                last = t
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            m = profile.classify(line)
            if m.listening or (m.ready and not ready):
                self.listen()
            if m.ready and not ready:
                ready = True
                self.do(Ready())
            if m.failure is not None and m.failure.fatal and not ready:
                failed = True
        end = self.args.end
        if end == "exit" or (end == "auto" and failed and not ready):
            self.stop_workers()
            os._exit(1)
        threading.Event().wait()  # ready: serve; incomplete: stay as the log left it

    def listen(self) -> None:
        if self.server is not None:
            return
        handler = type("Handler", (_Handler,), {"sim": self})
        self.server = _Server((self.args.host, self.port), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def read_weights(self, step: ReadWeights) -> None:
        files = _weight_files(self.args.model_path)
        total = sum(f.stat().st_size for f in files)
        if not files or total == 0:
            time.sleep(step.seconds)
            return
        rate = total / max(step.seconds, 1e-3)
        t0 = time.monotonic()
        done_bytes = 0
        if step.progress:
            self.say("shards", end="\r", pct=0, done=0, total=len(files), elapsed=0)
        for i, f in enumerate(files):
            with open(f, "rb", buffering=0) as fh:
                while chunk := fh.read(1 << 20):
                    done_bytes += len(chunk)
                    lag = done_bytes / rate - (time.monotonic() - t0)
                    if lag > 0 and step.spin:
                        while done_bytes / rate > time.monotonic() - t0:
                            pass
                    elif lag > 0:
                        time.sleep(lag)
            if step.progress:
                pct = (i + 1) * 100 // len(files)
                self.say("shards", end="\n" if i + 1 == len(files) else "\r", pct=pct, done=i + 1,
                         total=len(files), elapsed=int(time.monotonic() - t0))

    def burn(self, step: Burn) -> None:
        t0 = time.monotonic()
        for i in range(step.steps):
            if step.progress_key:
                self.say(step.progress_key, bs=2 ** (step.steps - i), pct=(i + 1) * 100 // step.steps, done=i + 1,
                         total=step.steps)
            end = t0 + step.seconds * (i + 1) / step.steps
            while time.monotonic() < end:
                sum(range(1000))
        if step.progress_key == "graph_progress":
            self._graph_secs = time.monotonic() - t0

    def stop_workers(self) -> None:
        for w in self.workers:
            if w.poll() is None:
                w.terminate()
        for w in self.workers:
            try:
                w.wait(timeout=2)
            except subprocess.TimeoutExpired:
                w.kill()

    def _on_term(self, signum: int, frame: object) -> None:
        self.stop_workers()
        os._exit(0)

    # -- serving -------------------------------------------------------------------------------------------
    def generate(self, max_tokens: int) -> list[str]:
        st = self.state
        with st.gen_lock:
            if not st.first_served:
                st.first_served = True
                time.sleep(st.first_request_s)
        n = max(1, min(max_tokens, 512))
        return [WORDS[i % len(WORDS)] for i in range(n)]

    def count_spec(self, tokens: int) -> dict[str, Any]:
        st = self.state
        if st.spec_accept is None:
            return {}
        # Mean acceptance length L (bonus token included): tokens/L verify steps, each drafting 3 tokens.
        steps = max(1, round(tokens / max(st.spec_accept, 1.0)))
        accepted = max(0, tokens - steps) if st.spec_accept > 1.0 else 0
        with st.lock:
            st.spec_drafts += steps
            st.spec_draft_tokens += 3 * steps
            st.spec_accepted_tokens += accepted
        return {"draft_n": 3 * steps, "draft_n_accepted": accepted}


_WORKER = """
import os, signal, sys, time
signal.signal(signal.SIGUSR1, lambda *a: os._exit(1))
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.2)
"""


def _weight_files(model_path: str | None) -> list[Path]:
    if not model_path:
        return []
    p = Path(model_path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        return []
    return sorted(f for f in p.iterdir() if f.suffix in (".safetensors", ".gguf", ".bin"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # socketserver's default backlog of 5 resets connections under a concurrent bench


class _Handler(BaseHTTPRequestHandler):
    sim: Sim
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _access(self, status: int) -> None:
        self.sim.say("access", cport=self.client_address[1], method=self.command, path=self.path, status=status,
                     reason="OK" if status == 200 else "Service Unavailable")

    def _json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._access(status)

    def _loading(self) -> None:
        self._json(503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}})

    def _authorized(self) -> bool:
        key = self.sim.args.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}" and self.path not in ("/health",):
            self._json(401, {"error": {"message": "Invalid API Key", "type": "invalid_request_error"}})
            return False
        return True

    def do_GET(self) -> None:
        sim, st = self.sim, self.sim.state
        path = self.path.split("?")[0]
        dialect = sim.dialect.name
        if path in ("/health", "/v1/health", "/health_generate"):
            if st.ready:
                self._json(200, {"status": "ok"} if dialect == "llamacpp" else {})
            else:
                self._loading()
        elif path == "/v1/models":
            if not self._authorized():
                return
            self._json(200, {"object": "list", "data": [{"id": sim.args.served_model_name, "object": "model",
                                                          "owned_by": dialect}]})
        elif path in ("/model_info", "/get_model_info") and dialect == "sglang":
            self._json(200, {"model_path": sim.args.model_path, "is_generation": True})
        elif path in ("/server_info", "/get_server_info") and dialect == "sglang":
            states = [{"avg_spec_accept_length": st.spec_accept}] if st.spec_accept is not None else [{}]
            extra = _json_file(sim.args.server_info) if st.ready else {}  # the engine's answer once it is up
            self._json(200, {"version": "0.5.23-sim", "internal_states": states,
                             "speculative_algorithm": "EAGLE" if st.spec_accept is not None else None, **extra})
        elif path == "/props" and dialect == "llamacpp":
            if st.ready:
                self._json(200, {"model_path": sim.args.model_path, "total_slots": 1, "build_info": "b11434-sim"})
            else:
                self._loading()
        elif path == "/version" and dialect == "vllm":
            self._json(200, {"version": "0.11.0-sim"})
        elif path == "/metrics":
            body = _metrics(sim).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        sim, st = self.sim, self.sim.state
        path = self.path.split("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "invalid JSON"}})
            return
        if path not in ("/v1/completions", "/v1/chat/completions", "/completion"):
            self._json(404, {"detail": "Not Found"})
            return
        if not self._authorized():
            return
        if not st.ready:
            self._loading()
            return
        chat = path == "/v1/chat/completions"
        max_tokens = int(req.get("max_tokens") or req.get("n_predict") or 16)
        t0 = time.time()
        words = sim.generate(max_tokens)
        prompt_tokens = len(str(req.get("prompt") or req.get("messages") or "").split())
        if req.get("stream"):
            self._stream(words, chat, prompt_tokens, t0, bool((req.get("stream_options") or {}).get("include_usage")))
            return
        time.sleep(len(words) / st.token_rate)
        text = "".join(words)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(words),
                 "total_tokens": prompt_tokens + len(words)}
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        with st.lock:
            st.tokens_out += len(words)
            st.requests += 1
        out: dict[str, Any] = {"id": "cmpl-sim", "object": "chat.completion" if chat else "text_completion",
                               "model": sim.args.served_model_name, "choices": [choice], "usage": usage}
        spec = sim.count_spec(len(words))
        if sim.dialect.name == "llamacpp":
            dt = time.time() - t0
            out["timings"] = {"predicted_n": len(words), "predicted_ms": dt * 1000,
                              "predicted_per_second": len(words) / dt if dt else None, **spec}
        self._json(200, out)

    def _stream(self, words: list[str], chat: bool, prompt_tokens: int, t0: float, include_usage: bool) -> None:
        sim, st = self.sim, self.sim.state
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for w in words:
            time.sleep(1.0 / st.token_rate)
            delta: dict[str, Any] = {"delta": {"content": w}} if chat else {"text": w}
            chunk = {"id": "cmpl-sim", "choices": [{"index": 0, **delta, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        spec = sim.count_spec(len(words))
        final: dict[str, Any] = {"id": "cmpl-sim", "choices": [{"index": 0, **({"delta": {}} if chat else {"text": ""}),
                                                                 "finish_reason": "length"}]}
        if include_usage:
            final["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": len(words),
                              "total_tokens": prompt_tokens + len(words)}
        if sim.dialect.name == "llamacpp":
            dt = time.time() - t0
            final["timings"] = {"predicted_n": len(words), "predicted_ms": dt * 1000, **spec}
        self.wfile.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        with st.lock:
            st.tokens_out += len(words)
            st.requests += 1
        self._access(200)


def _json_file(path: str | None) -> dict[str, Any]:
    """--server-info: a captured answer's fields, served as they are."""
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}


def _metrics(sim: Sim) -> str:
    st = sim.state
    lines = []
    if sim.args.extra_metrics and st.ready:  # a captured exposition (the engine's startup gauges)
        with open(sim.args.extra_metrics, encoding="utf-8") as f:
            lines += f.read().splitlines()
    if sim.dialect.name == "vllm":
        lines += [f"vllm:generation_tokens_total {st.tokens_out}", f"vllm:request_success_total {st.requests}"]
        if st.spec_accept is not None:
            lines += [f"vllm:spec_decode_num_drafts_total {st.spec_drafts}",
                      f"vllm:spec_decode_num_draft_tokens_total {st.spec_draft_tokens}",
                      f"vllm:spec_decode_num_accepted_tokens_total {st.spec_accepted_tokens}"]
    elif sim.dialect.name == "sglang":
        lines += [f"sglang:generation_tokens_total {st.tokens_out}"]
        if st.spec_accept is not None:
            lines += [f"sglang:spec_accept_length {st.spec_accept}",
                      f"sglang:spec_verify_calls_total {st.spec_drafts}"]
    else:
        lines += [f"llamacpp:tokens_predicted_total {st.tokens_out}", "llamacpp:requests_processing 0"]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m firstlight.sim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="normal", choices=SCENARIOS)
    ap.add_argument("--dialect", default="sglang", choices=sorted(DIALECTS))
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="default: the dialect's engine default port")
    ap.add_argument("--model-path", help="a directory of weight files to read (see make_weights)")
    ap.add_argument("--served-model-name", default="sim-model")
    ap.add_argument("--load-seconds", type=float, default=float(os.environ.get("FIRSTLIGHT_SIM_LOAD_SECONDS", 1.0)),
                    help="how long reading the weights takes (default: $FIRSTLIGHT_SIM_LOAD_SECONDS or 1; the "
                         "variable slows a start without changing its command line, as a slower disk would)")
    ap.add_argument("--workers", type=int, default=0, help="worker processes to fork (TP ranks)")
    ap.add_argument("--token-rate", type=float, default=200.0, help="output tokens per second per request")
    ap.add_argument("--spec-accept", type=float, default=None,
                    help="speculative decoding: mean acceptance length to report (1.0: nothing accepted)")
    ap.add_argument("--ready-file", help="write the moment it can first serve (epoch seconds) here")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--server-info", metavar="FILE", help="JSON fields to add to SGLang's /server_info once ready "
                                                          "(a captured answer: its startup_time)")
    ap.add_argument("--extra-metrics", metavar="FILE", help="Prometheus text to add to /metrics once ready")
    ap.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM (to test escalation to SIGKILL)")
    ap.add_argument("--replay-log", metavar="FILE", help="print a real startup log with its timing instead of a "
                    "scenario; the port opens and /health flips where that engine's log says so")
    ap.add_argument("--speed", type=float, default=1.0, help="--replay-log: time compression factor")
    ap.add_argument("--engine", default=None, help="--replay-log: the engine (default: detect from the log)")
    ap.add_argument("--max-gap", type=float, default=None,
                    help="--replay-log: wait at most this long between two lines (long logs in seconds)")
    ap.add_argument("--end", choices=["auto", "exit", "hang"], default="auto",
                    help="--replay-log: after the last line, exit 1 (a failed start), stay silent (a stuck one), or "
                         "auto: exit 1 after a fatal line, else stay (and serve, once the log said ready)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        Sim(args).run()
    except OSError as e:
        sys.stderr.write(f"ERROR: couldn't bind HTTP server socket: {e}\n")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
