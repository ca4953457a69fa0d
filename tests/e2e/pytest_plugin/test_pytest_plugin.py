"""The pytest plugin (firstlight.pytest_plugin): registered as an entry point, free for projects that do not use
it, a session's server from the real llama-server, and a server that never becomes READY as a clean error.

Each run is a real pytest in a temporary directory (a subprocess, as a user's project runs it), importing this
checkout's firstlight.

The process-starting tests of this subject; the others: ``tests/unit/pytest_plugin/test_pytest_plugin.py``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.support.common import REPO, pids_in_group
from tests.support.llama_server import llama  # noqa: F401  (llama: the fixture)

FIXTURES = ("firstlight_server", "firstlight_up")


def _plugin_args() -> list[str]:
    """Load the plugin by name unless this environment's install already registers it (twice is an error)."""
    names = {ep.name for ep in importlib.metadata.entry_points(group="pytest11")}
    return [] if "firstlight" in names else ["-p", "firstlight.pytest_plugin"]


def _pytest(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "pytest", *_plugin_args(), "-p", "no:cacheprovider", "-q", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_loading_the_plugin_imports_nothing_of_the_api():
    code = ("import json, sys; import firstlight.pytest_plugin; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('firstlight', 'httpx', 'psutil', 'rich', 'click', 'prometheus_client'))))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    # the package's version leaf is the one module besides the plugin (it imports nothing)
    assert json.loads(p.stdout) == ["firstlight", "firstlight._version", "firstlight.pytest_plugin"]


def test_the_plugin_neither_clashes_with_this_suite_nor_disturbs_it_under_xdist():
    conftest = ast.parse((REPO / "tests" / "conftest.py").read_text())
    defined = {n.name for n in ast.walk(conftest) if isinstance(n, ast.FunctionDef)}
    assert not defined & set(FIXTURES)
    p = _pytest(REPO, "-n", "2", "tests/unit/test_vocab.py")  # the suite's own conftest, its scheduler, the plugin
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert re.search(r"\d+ passed", p.stdout), p.stdout[-500:]


def test_firstlight_server_gives_the_session_one_real_llama_server_at_ready_and_stops_it(
        tmp_path: Path, llama: dict[str, str]):  # noqa: F811
    command = [llama["llama_server"], "-m", llama["model"], "--host", "127.0.0.1", "--port", "{port}", "-np", "1",
               "-c", "2048"]
    (tmp_path / "pytest.ini").write_text(f"[pytest]\nfirstlight_command = {shlex.join(command)}\n"
                                         "firstlight_timeout = 300\n")
    (tmp_path / "test_served.py").write_text(textwrap.dedent("""
        import httpx

        def _seen(server):
            with open("seen.txt", "a") as f:
                f.write(f"{server.pid} {server.url}\\n")

        def test_ready_after_a_real_generation(firstlight_server):
            _seen(firstlight_server)
            assert firstlight_server.result.verdict == "ready"
            assert firstlight_server.result.first_generation["text"].strip()

        def test_it_serves(firstlight_server):
            _seen(firstlight_server)
            r = httpx.post(firstlight_server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                           timeout=60)
            assert r.status_code == 200
    """))
    p = _pytest(tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "2 passed" in p.stdout
    seen = (tmp_path / "seen.txt").read_text().splitlines()
    assert len(seen) == 2 and seen[0] == seen[1], seen  # one server for the session
    pid, url = seen[0].split()
    assert "{port}" not in url and url.startswith("http://127.0.0.1:")
    assert not pids_in_group(int(pid))  # stopped at the session's end, its whole group


def test_a_server_that_never_becomes_ready_errors_the_tests_with_its_reason_once(tmp_path: Path):
    starts = tmp_path / "starts"
    crash = (f"import sys; open({str(starts)!r}, 'a').write('x'); "
             "print('torch.OutOfMemoryError: CUDA out of memory', file=sys.stderr); sys.exit(1)")
    (tmp_path / "test_unserved.py").write_text(textwrap.dedent("""
        def test_one(firstlight_server):
            raise AssertionError("ran without a server")

        def test_two(firstlight_server):
            raise AssertionError("ran without a server")
    """))
    p = _pytest(tmp_path, "--firstlight-cmd", shlex.join([sys.executable, "-c", crash, "--port", "{port}"]),
                "--firstlight-timeout", "60")
    assert p.returncode == 1, p.stdout[-3000:]
    assert "2 errors" in p.stdout and "ran without a server" not in p.stdout
    reasons = [line for line in p.stdout.splitlines() if "firstlight: the server did not become READY: " in line]
    assert reasons and all("failed (oom)" in line and "CUDA out of memory" in line for line in reasons), p.stdout
    assert "Traceback" not in p.stdout
    assert starts.read_text() == "x"  # started once for the session, not once per test


def test_an_option_of_the_wrong_type_errors_the_test_in_one_line_without_a_traceback(tmp_path: Path):
    (tmp_path / "test_typed.py").write_text(textwrap.dedent("""
        def test_it(firstlight_up):
            firstlight_up(["python", "-c", "pass"], port="8000")
    """))
    p = _pytest(tmp_path)
    assert p.returncode == 1 and "1 failed" in p.stdout, p.stdout[-2000:]
    assert "firstlight: up: port must be an int or None, not str" in p.stdout, p.stdout[-2000:]
    assert "Traceback" not in p.stdout


def test_firstlight_server_without_a_command_errors_saying_how_to_give_one(tmp_path: Path):
    (tmp_path / "test_nothing.py").write_text("def test_it(firstlight_server):\n    pass\n")
    p = _pytest(tmp_path)
    assert p.returncode == 1 and "1 error" in p.stdout, p.stdout[-2000:]
    assert "no server command: pass --firstlight-cmd or set firstlight_command" in p.stdout


def test_firstlight_timeout_is_honoured_a_server_that_never_serves_errors_at_it(tmp_path: Path):
    never = "import time\nwhile True:\n    print('loading', flush=True)\n    time.sleep(0.5)"
    (tmp_path / "test_slow.py").write_text("def test_it(firstlight_server):\n    pass\n")
    started = time.monotonic()
    p = _pytest(tmp_path, "--firstlight-cmd", shlex.join([sys.executable, "-c", never, "--port", "{port}"]),
                "--firstlight-timeout", "3", timeout=150)  # the default (600 s) would outlive this bound
    assert p.returncode == 1 and "1 error" in p.stdout, p.stdout[-3000:]
    assert "firstlight: the server did not become READY: timeout" in p.stdout, p.stdout[-3000:]
    assert time.monotonic() - started < 150


def test_a_server_that_dies_during_the_session_is_reported_and_the_run_fails(tmp_path: Path):
    (tmp_path / "test_dies.py").write_text(textwrap.dedent("""
        import os, signal, time

        def test_the_server_dies_under_the_tests(firstlight_server):
            os.kill(firstlight_server.pid, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while firstlight_server.alive and time.monotonic() < deadline:
                time.sleep(0.05)
            assert firstlight_server.alive is False
    """))
    server = [sys.executable, "-m", "firstlight.sim", "--scenario", "normal", "--port", "{port}",
              "--load-seconds", "0.5"]
    p = _pytest(tmp_path, "--firstlight-cmd", shlex.join(server), "--firstlight-timeout", "120")
    assert "1 passed" in p.stdout, p.stdout[-3000:]
    assert p.returncode != 0, p.stdout[-3000:]  # the run fails though every test passed
    assert "firstlight: the server stopped serving during the tests: failed" in p.stdout, p.stdout[-3000:]
