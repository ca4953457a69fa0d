"""A start that downloads with the real huggingface_hub (the vLLM venv's, from scripts/setup_vllm.py): a loopback
server answers as the Hub does (``HF_ENDPOINT``: the file's metadata on HEAD, its bytes on GET, paced), the
watched command is ``vllm serve ORG/NAME`` whose program fetches the model with ``hf_hub_download`` into a fresh
``HF_HUB_CACHE`` and then starts the simulated vLLM on the snapshot. The hub cache sampler sees huggingface_hub's own
``.incomplete`` file grow: ``download`` with its bytes, then the load, then READY; and a download whose bytes stop
is ``hung`` in ``download``, the file named."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import REPO, require, run_firstlight

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]
REPO_ID = "sim-org/tiny-hub-model"
COMMIT = "1" * 40
# huggingface_hub writes what arrives in pieces of 10 MiB (constants.DOWNLOAD_CHUNK_SIZE): 32 MiB, sent 1 MiB at a
# time, grows its .incomplete file three times before it is whole
SIZE = 32 << 20
PIECE = 1 << 20
BODY = bytes(range(256)) * (SIZE // 256)
ETAG = hashlib.sha256(BODY).hexdigest()

# The program the watched command runs (named ``vllm`` so that the command reads as vLLM serving a hub id): the real
# huggingface_hub fetches the weights, then the simulated vLLM loads the snapshot and serves.
PROGRAM = """#!{hub_python}
import os, sys
from huggingface_hub import hf_hub_download
path = hf_hub_download(sys.argv[2], "model.safetensors")
port = sys.argv[sys.argv.index("--port") + 1]
os.execv({sim_python!r}, [{sim_python!r}, "-m", "firstlight.sim", "--dialect", "vllm", "--scenario", "normal",
                          "--port", port, "--model-path", os.path.dirname(path), "--load-seconds", "0.5"])
"""


class Hub:
    """The Hub's answers for one file of one repo: HEAD says its commit, etag and size; GET sends its bytes, one
    piece every ``pace`` seconds, and stops after ``stop_after`` bytes (holding the connection) when asked."""

    def __init__(self, pace: float, stop_after: int | None = None) -> None:
        self.pace, self.stop_after = pace, stop_after
        self.release = threading.Event()
        self.gets = 0
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _headers(self) -> bool:
                if self.path.split("?")[0] != f"/{REPO_ID}/resolve/main/model.safetensors":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return False
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{ETAG}"')
                self.send_header("Content-Length", str(SIZE))
                self.end_headers()
                return True

            def do_HEAD(self) -> None:
                self._headers()

            def do_GET(self) -> None:
                if not self._headers():
                    return
                hub.gets += 1
                for at in range(0, SIZE, PIECE):
                    if hub.stop_after is not None and at >= hub.stop_after:
                        hub.release.wait()  # the connection stays open; no byte comes
                        return
                    self.wfile.write(BODY[at:at + PIECE])
                    self.wfile.flush()
                    time.sleep(hub.pace)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hub_python() -> str:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_vllm.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=300)
    python = json.loads(p.stdout)["python"] if p.returncode == 0 else ""
    ok = bool(python) and subprocess.run([python, "-c", "import huggingface_hub"], capture_output=True,
                                         timeout=120).returncode == 0
    require(ok, "huggingface_hub in the vLLM venv (python scripts/setup_vllm.py)")
    return python


def _program(tmp_path: Path, hub_python: str) -> Path:
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(PROGRAM.format(hub_python=hub_python, sim_python=sys.executable))
    exe.chmod(0o755)
    return exe


@pytest.fixture
def hub() -> Iterator[list[Hub]]:
    made: list[Hub] = []
    yield made
    for h in made:
        h.close()


def _env(tmp_path: Path, h: Hub) -> dict[str, str]:
    return {"HF_ENDPOINT": h.url, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "1", "PYTHONPATH": str(REPO)}


def test_huggingface_hubs_own_download_is_the_download_phase_then_ready(tmp_path: Path, hub_python: str,
                                                                         hub: list[Hub]):
    h = Hub(pace=0.1)  # 32 pieces: about 3 s, the file growing every second
    hub.append(h)
    exe = _program(tmp_path, hub_python)
    r = run_firstlight("up", "--json", "--stop-when-ready", "--stall-timeout", "2", *FAST, "--",
                       str(exe), "serve", REPO_ID, "--port", str(free_port()), env=_env(tmp_path, h))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    names = [p["name"] for p in s["phases"]]
    assert "download" in names and names.index("download") < names.index("weights_loading"), names
    statuses = [e for e in r.events if e["event"] == "status" and e["phase"] == "download"]
    assert any(0 < (e["download_bytes"] or 0) < SIZE and (e["download_file"] or "").endswith(".incomplete")
               for e in statuses), statuses
    blob = tmp_path / "hub" / "models--sim-org--tiny-hub-model" / "blobs" / ETAG
    assert blob.read_bytes() == BODY and h.gets == 1  # huggingface_hub's own file, whole


def test_huggingface_hubs_download_whose_bytes_stop_is_hung_naming_its_file(tmp_path: Path, hub_python: str,
                                                                           hub: list[Hub]):
    h = Hub(pace=0.05, stop_after=20 << 20)  # two pieces of 10 MiB written, then no byte
    hub.append(h)
    exe = _program(tmp_path, hub_python)
    r = run_firstlight("up", "--json", "--stall-timeout", "3", *FAST, "--",
                       str(exe), "serve", REPO_ID, "--port", str(free_port()), env=_env(tmp_path, h))
    assert r.rc == 2, r.stderr[-3000:]
    s = r.summary
    assert (s["verdict"], s["phase"]) == ("hung", "download"), s["evidence"]
    first = s["evidence"][0]
    blobs = tmp_path / "hub" / "models--sim-org--tiny-hub-model" / "blobs"
    # huggingface_hub's own name for it: the etag, a per-process suffix, ".incomplete"
    assert first["signal"] == "hub_cache", s["evidence"]
    assert re.search(re.escape(str(blobs / ETAG)) + r"\.[0-9a-f]{8}\.incomplete grew by ", first["value"]), first
