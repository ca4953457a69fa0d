"""The set-up scripts' shared modules (scripts/setup_procs.py, scripts/setup_fetch.py), with real processes, a real
HTTP server on loopback and real archives."""

from __future__ import annotations

import http.server
import io
import json
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.common import REPO

sys.path.insert(0, str(REPO / "scripts"))
import setup_fetch
import setup_procs
from setup_common import SetupError


def test_a_checked_command_fails_with_its_last_error_line_and_its_deadline() -> None:
    assert setup_procs.run_checked([sys.executable, "-c", "print('ok')"], "printing", 60) == "ok\n"
    script = "import sys; print('ERROR: first'); print('ERROR: the last one', file=sys.stderr); sys.exit(3)"
    with pytest.raises(SetupError, match=r"^installing failed: exit 3: ERROR: the last one$"):
        setup_procs.run_checked([sys.executable, "-c", script], "installing", 60)
    t0 = time.monotonic()
    with pytest.raises(SetupError, match=r"^waiting failed: timed out after 1 s$"):
        setup_procs.run_checked([sys.executable, "-c", "import time; time.sleep(60)"], "waiting", 1)
    assert time.monotonic() - t0 < 30
    with pytest.raises(SetupError, match=r"^running failed: .*No such file"):
        setup_procs.run_checked(["/nonexistent/tool"], "running", 60)


def _start(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)


def test_a_group_stop_gives_sigterm_its_grace_then_sigkills() -> None:
    polite = _start("import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
                    "print('up', flush=True)\ntime.sleep(60)")
    assert polite.stdout is not None and polite.stdout.readline() == b"up\n"
    setup_procs.stop_group(polite, grace=30.0)
    assert polite.returncode == 7  # it had its SIGTERM and exited by itself
    stubborn = _start("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "print('up', flush=True)\ntime.sleep(60)")
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"up\n"
    t0 = time.monotonic()
    setup_procs.stop_group(stubborn, grace=0.5)
    assert stubborn.returncode == -signal.SIGKILL and time.monotonic() - t0 < 30
    at_once = _start("import time; time.sleep(60)")
    setup_procs.stop_group(at_once)  # no grace: SIGKILL
    assert at_once.returncode == -signal.SIGKILL


class _Completions(http.server.BaseHTTPRequestHandler):
    answer = " Paris"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"choices": [{"text": self.answer}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def completions() -> Iterator[tuple[str, type[_Completions]]]:
    handler = type("Handler", (_Completions,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/completions", handler
    server.shutdown()
    server.server_close()


def test_the_first_completion_is_its_text_or_one_line_of_why_not(completions: tuple[str, type[_Completions]],
                                                                  tmp_path: Path) -> None:
    url, handler = completions
    alive = _start("import time; time.sleep(60)")
    try:
        assert setup_procs.first_completion(alive, url, {}, "srv", tmp_path, 30, 5, 0.1) == (" Paris", None)
        handler.answer = "  "
        assert setup_procs.first_completion(alive, url, {}, "srv", tmp_path, 30, 5, 0.1) == (
            None, f"srv answered an empty completion ({tmp_path})")
        nobody = "http://127.0.0.1:9/v1/completions"  # refused: it retries until its deadline
        assert setup_procs.first_completion(alive, nobody, {}, "srv", tmp_path, 0.5, 5, 0.1) == (
            None, f"srv did not serve a completion within 0 s ({tmp_path})")
    finally:
        setup_procs.stop_group(alive)
    crashed = _start("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    crashed.wait(timeout=30)
    text, why = setup_procs.first_completion(crashed, url, {}, "srv", tmp_path, 30, 5, 0.1)
    assert text is None and why is not None and why.startswith("srv ") and "SIGSEGV" in why, why


def test_an_archive_member_outside_its_folder_is_never_written(tmp_path: Path) -> None:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    data.seek(0)
    dest = tmp_path / "src"
    dest.mkdir()
    with tarfile.open(fileobj=data) as tar, pytest.raises((SetupError, tarfile.TarError)):
        setup_fetch.safe_extract(tar, dest, "evil.tar")
    assert not (tmp_path / "escaped.txt").exists()


def test_a_pinned_download_with_another_hash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip saved the file, but its bytes are not the pinned ones: never trusted (pip itself stands in here by a
    function that writes the file, so no network is needed)."""
    def saved(args: list[str], dest: Path, what: str) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "pkg.whl").write_bytes(b"not the pinned bytes")

    monkeypatch.setattr(setup_fetch, "pip_download", saved)
    said: list[str] = []
    with pytest.raises(SetupError, match=r"^sha256 mismatch for pkg\.whl: expected 0+, got [0-9a-f]{64}$"):
        setup_fetch.fetch_pinned(["pkg==1"], "pkg.whl", "0" * 64, "pkg==1", tmp_path / "dl", said.append)
    with pytest.raises(SetupError, match=r"^download of pkg==1 failed: expected other\.whl, pip saved pkg\.whl$"):
        setup_fetch.fetch_pinned(["pkg==1"], "other.whl", "0" * 64, "pkg==1", tmp_path / "dl", said.append)
    assert said[0] == "downloading pkg==1 with pip ..."


def test_a_second_set_up_waits_for_the_cache_lock_and_says_so(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    said: list[str] = []
    with setup_fetch.CacheLock(lock, said.append):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import setup_fetch, pathlib\n"
                "with setup_fetch.CacheLock(pathlib.Path(sys.argv[2]), lambda m: print(m, flush=True)):\n"
                "    print('got it', flush=True)\n")
        other = subprocess.Popen([sys.executable, "-c", code, str(REPO / "scripts"), str(lock)],
                                 stdout=subprocess.PIPE, text=True)
        assert other.stdout is not None
        assert other.stdout.readline() == f"waiting for another setup run holding {lock} ...\n"
    assert other.stdout.readline() == "got it\n"  # the first one let go
    assert other.wait(timeout=30) == 0
