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
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from firstlight.sim.dialects import DIALECTS, Dialect
from firstlight.sim.http import SimHandler, SimHTTPServer
from firstlight.sim.scenarios import (
    SCENARIOS,
    Burn,
    Crash,
    Download,
    DummyHealth,
    Hang,
    Join,
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
        self.dummy = False  # a worker node's dummy health server: /health and /health_generate 200, nothing else


class Sim:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dialect: Dialect = DIALECTS[args.dialect]
        self.port: int = args.port or self.dialect.default_port
        self.state = State(args)
        self.server: ThreadingHTTPServer | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.lineno = 0
        self.peers: list[socket.socket] = []  # a multi-node start's connections: the head's accepted, a node's own
        self.head_socket: socket.socket | None = None
        self.weights_dir: str | None = None  # the downloaded snapshot, once fetched (else --model-path)

    # -- output --------------------------------------------------------------------------------------------
    def say(self, key: str, stream: str = "stderr", end: str = "\n", **kw: Any) -> None:
        if key not in self.dialect.lines or not self.dialect.lines[key]:
            return
        fields = {"model": self.args.model_path or "sim-model", "host": self.args.host, "port": self.port,
                  "head": f"{self.args.master_addr or '127.0.0.1'}:{self.args.master_port}",
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
        if self.args.master_port and not self.args.headless:
            self.serve_head()
        steps = scenario(self.args.scenario, self.args.load_seconds, self.args.workers, self.args.node_rank,
                         headless=self.args.headless)
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
            if step.key == self.args.spin_after:
                self.do(Spin())
        elif isinstance(step, Listen):
            self.listen()
        elif isinstance(step, Download):
            self.download(step)
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
        elif isinstance(step, DummyHealth):
            self.state.dummy = True
            self.listen()
        elif isinstance(step, Join):
            self.join_head()
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

    def serve_head(self) -> None:
        """The head node of a multi-node start: its headless nodes connect to ``--master-addr:--master-port`` (the
        process group's store) and stay connected while the start lives."""
        head = socket.create_server((self.args.master_addr or self.args.host, self.args.master_port))
        self.head_socket = head  # held open for the process's life

        def accept() -> None:
            while True:
                conn, _ = head.accept()
                self.peers.append(conn)

        threading.Thread(target=accept, daemon=True).start()

    def join_head(self) -> None:
        """A headless node connects to its head, retrying until ``--join-timeout``; none: vLLM's handshake error."""
        address = (self.args.master_addr or "127.0.0.1", self.args.master_port)
        deadline = time.monotonic() + self.args.join_timeout
        while True:
            try:
                self.peers.append(socket.create_connection(address, timeout=1.0))
                return
            except OSError:
                if time.monotonic() >= deadline:
                    self.say("no_head")
                    os._exit(1)
                time.sleep(0.2)

    def listen(self) -> None:
        if self.server is not None:
            return
        handler = type("Handler", (SimHandler,), {"sim": self})
        self.server = SimHTTPServer((self.args.host, self.port), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def read_weights(self, step: ReadWeights) -> None:
        files = _weight_files(self.weights_dir or self.args.model_path)
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

    def download(self, step: Download) -> None:
        """The model (``--model-path``, a hub id) fetched into the hub cache as huggingface_hub writes it: a blob
        named by its hash with ``.incomplete`` that grows over ``--download-seconds``, renamed whole, linked from
        ``snapshots/REV/model.safetensors``; its lines are huggingface_hub's tqdm bars."""
        repo = self.args.model_path or "sim-org/sim-model"
        cache = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME") or
                                                            "~/.cache/huggingface").expanduser() / "hub")
        folder = cache / ("models--" + repo.replace("/", "--"))
        blobs = folder / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(repo.encode()).hexdigest()
        part = blobs / f"{digest}.incomplete"
        size, steps = max(1, self.args.download_bytes), 20
        name, total_mb = "model.safetensors", size / 1e6

        def bar(text: str, end: str = "\n") -> None:
            if not step.quiet:
                sys.stderr.write(text + end)
                sys.stderr.flush()

        bar("Fetching 1 files:   0%|          | 0/1 [00:00<?, ?it/s]")
        with open(part, "wb") as fh:
            for i in range(steps):
                if step.stall and i == steps // 2:
                    threading.Event().wait()  # the connection died: no byte, no line, no CPU from here on
                fh.write(b"\0" * (size * (i + 1) // steps - size * i // steps))
                fh.flush()
                pct = (i + 1) * 100 // steps
                bar(f"{name}: {pct:3d}%|{'#' * (pct // 10):<10}| {total_mb * (i + 1) / steps:.1f}M/{total_mb:.1f}M "
                    f"[00:01<00:01, 1.00MB/s]", "\n" if i + 1 == steps else "\r")
                time.sleep(self.args.download_seconds / steps)
        blob = blobs / digest
        part.replace(blob)
        snapshot = folder / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True, exist_ok=True)
        link = snapshot / name
        if not link.exists():
            link.symlink_to(os.path.relpath(blob, snapshot))
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_text("0" * 40)
        bar("Fetching 1 files: 100%|##########| 1/1 [00:02<00:00,  2.00s/it]")
        self.say("download_done", secs=self.args.download_seconds)
        self.weights_dir = str(snapshot)

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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m firstlight.sim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="normal", choices=SCENARIOS)
    ap.add_argument("--dialect", default="sglang", choices=sorted(DIALECTS))
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="default: the dialect's engine default port")
    ap.add_argument("--model-path", help="a directory of weight files to read (see make_weights)")
    ap.add_argument("--served-model-name", default="sim-model")
    ap.add_argument("--load-format", default="auto", help="read as vLLM reads it; the scenario decides what happens")
    ap.add_argument("--load-seconds", type=float, default=float(os.environ.get("FIRSTLIGHT_SIM_LOAD_SECONDS", 1.0)),
                    help="how long reading the weights takes (default: $FIRSTLIGHT_SIM_LOAD_SECONDS or 1; the "
                         "variable slows a start without changing its command line, as a slower disk would)")
    ap.add_argument("--spin-after", default=os.environ.get("FIRSTLIGHT_SIM_SPIN_AFTER") or None,
                    help="after printing this dialect line (e.g. kv_cache), busy-wait forever on one core: a hang "
                         "in that phase (default: $FIRSTLIGHT_SIM_SPIN_AFTER; the variable hangs a start without "
                         "changing its command line, as a deadlock would)")
    ap.add_argument("--download-seconds", type=float, default=2.0,
                    help="download scenarios: how long the weights take to arrive in the hub cache ($HF_HUB_CACHE)")
    ap.add_argument("--download-bytes", type=int, default=4 << 20,
                    help="download scenarios: the size of the weights file fetched (--model-path is the hub id)")
    ap.add_argument("--workers", type=int, default=0, help="worker processes to fork (TP ranks)")
    ap.add_argument("--node-rank", type=int, default=0,
                    help="this node's rank in a multi-node start (SGLang: rank >= 1 serves only a dummy health server)")
    ap.add_argument("--headless", action="store_true",
                    help="vLLM: a worker node that serves no HTTP; it joins --master-addr:--master-port")
    ap.add_argument("--master-addr", default=None, help="the head node's address (default: --host, or 127.0.0.1)")
    ap.add_argument("--master-port", type=int, default=0,
                    help="the head node's process-group port: the head listens there, a --headless node joins it")
    ap.add_argument("--join-timeout", type=float, default=300.0,
                    help="--headless: seconds to reach the head before vLLM's handshake error (exit 1); vLLM's own "
                         "is 5 minutes (HANDSHAKE_TIMEOUT_MINS, v1/engine/core.py)")
    ap.add_argument("--nnodes", type=int, default=1, help="nodes in a multi-node start (as the engine reads it)")
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
