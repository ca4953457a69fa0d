"""The pytest plugin's fixtures, in process: a real inner pytest session (pytester) loads the plugin as a user's
project does, and ``firstlight.api.up`` is replaced by a recorder, so what the plugin asks of the API (the
command, the port, the timeout) and what it makes of the answers (a READY server, ``NotReady`` at the start, a
death during the tests) are read without starting a server. The real server behind the same fixtures:
``tests/e2e/pytest_plugin/test_pytest_plugin.py``."""

from __future__ import annotations

import contextlib
import importlib.metadata
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from firstlight import api
from firstlight.result import RunResult

pytest_plugins = ["pytester"]

DEAD = RunResult(verdict="failed", phase="weights_loading", started_at=0.0, ended_at=1.0, engine="vllm",
                 url="http://127.0.0.1:1", failure="oom", evidence=({"signal": "log", "value": "CUDA out of memory"},))


class Recorder:
    """``up`` as the plugin calls it: each call's command and options; ``start`` / ``exit`` say what to raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.exited: list[list[str]] = []
        self.start: BaseException | None = None
        self.exit: BaseException | None = None

    def __call__(self, command: list[str], **options: Any) -> Any:
        self.calls.append((command, options))
        if self.start is not None:
            raise self.start
        return self._context(command)

    @contextlib.contextmanager
    def _context(self, command: list[str]) -> Iterator[Any]:
        yield api.Server(url="http://127.0.0.1:9", result=DEAD, pid=1, launched=True)
        self.exited.append(command)
        if self.exit is not None:
            raise self.exit


@pytest.fixture
def up(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(api, "up", recorder)
    return recorder


def _run(pytester: pytest.Pytester, tests: str, *args: str, ini: str = "") -> pytest.RunResult:
    pytester.makepyfile(test_inner=textwrap.dedent(tests))
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    names = {ep.name for ep in importlib.metadata.entry_points(group="pytest11")}
    load = [] if "firstlight" in names else ["-p", "firstlight.pytest_plugin"]
    return pytester.runpytest_inprocess(*load, "-p", "no:cacheprovider", "-p", "no:xdist", *args)


TWO_TESTS = """
def test_one(firstlight_server):
    assert firstlight_server.url == "http://127.0.0.1:9"

def test_two(firstlight_server):
    assert firstlight_server.pid == 1
"""


def test_the_session_server_starts_once_on_a_free_port_and_stops_at_the_end(pytester: pytest.Pytester, up: Recorder):
    result = _run(pytester, TWO_TESTS, "--firstlight-cmd", "srv --port {port} --name 'a b' --again {port}")
    result.assert_outcomes(passed=2)
    assert len(up.calls) == 1 and up.exited == [up.calls[0][0]]
    command, options = up.calls[0]
    port = command[2]
    assert command == ["srv", "--port", port, "--name", "a b", "--again", port] and port.isdigit()
    assert 0 < int(port) < 65536 and options == {"timeout": 600.0}


def test_the_timeout_option_wins_over_the_ini_and_the_ini_over_600_s(pytester: pytest.Pytester, up: Recorder):
    _run(pytester, TWO_TESTS, "--firstlight-cmd", "srv", "--firstlight-timeout", "42",
         ini="firstlight_timeout = 7").assert_outcomes(passed=2)
    _run(pytester, TWO_TESTS, "--firstlight-cmd", "srv", ini="firstlight_timeout = 7.5").assert_outcomes(passed=2)
    assert [options["timeout"] for _, options in up.calls] == [42.0, 7.5]


def test_a_timeout_in_the_ini_that_is_not_a_number_errors_the_tests_in_one_line(pytester: pytest.Pytester,
                                                                               up: Recorder):
    result = _run(pytester, TWO_TESTS, "--firstlight-cmd", "srv", ini="firstlight_timeout = ten")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*firstlight: ini firstlight_timeout: not a number of seconds: 'ten'*"])
    out = result.stdout.str()
    assert "Traceback" not in out and "pytest.fail(" not in out and up.calls == []  # no code shown


def test_a_timeout_option_that_is_not_a_number_is_a_usage_error(pytester: pytest.Pytester, up: Recorder):
    result = _run(pytester, TWO_TESTS, "--firstlight-cmd", "srv", "--firstlight-timeout", "soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and up.calls == []
    result.stderr.fnmatch_lines(["*--firstlight-timeout: invalid float value: 'soon'*"])


def test_the_options_and_ini_keys_say_what_they_are_in_help(pytester: pytest.Pytester):
    out = _run(pytester, "", "--help").stdout.str()
    flat = " ".join(out.split())  # help wraps to the terminal's width
    assert "firstlight: an LLM server for the test session:" in flat
    assert ("--firstlight-cmd=COMMAND the server command for the firstlight_server fixture ({port}: a free port), "
            "one shell-quoted string (overrides the ini's firstlight_command)") in flat
    assert ("--firstlight-timeout=SECONDS how long the server may take to become READY (default: ini "
            "firstlight_timeout, 600)") in flat
    assert ("firstlight_command (args): the server command for the firstlight_server fixture ({port}: a free "
            "port), shell-quoted") in flat
    assert "firstlight_timeout (string): how long the server may take to become READY, seconds" in flat


def test_the_command_comes_from_the_option_else_the_ini(pytester: pytest.Pytester, up: Recorder):
    ini = "firstlight_command = from-ini --model 'my model'"
    _run(pytester, TWO_TESTS, ini=ini).assert_outcomes(passed=2)
    _run(pytester, TWO_TESTS, "--firstlight-cmd", "from-cli -x", ini=ini).assert_outcomes(passed=2)
    assert [command for command, _ in up.calls] == [["from-ini", "--model", "my model"], ["from-cli", "-x"]]


def test_no_command_fails_the_tests_that_ask_with_what_to_do(pytester: pytest.Pytester, up: Recorder):
    result = _run(pytester, TWO_TESTS)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*no server command: pass --firstlight-cmd or set firstlight_command*"])
    assert up.calls == []


@pytest.mark.parametrize("error", [api.NotReady(DEAD), ValueError("up: no command to launch")],
                         ids=["not-ready", "bad-input"])
def test_a_server_that_never_serves_errors_its_tests_with_the_one_line_reason(
        pytester: pytest.Pytester, up: Recorder, error: BaseException):
    up.start = error
    result = _run(pytester, TWO_TESTS, "--firstlight-cmd", "srv")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([f"*firstlight: the server did not become READY: {error}*"])
    assert "Traceback" not in result.stdout.str() and "During handling" not in result.stdout.str()


def test_a_server_that_dies_during_the_tests_fails_the_run(pytester: pytest.Pytester, up: Recorder):
    up.exit = api.NotReady(DEAD)
    result = _run(pytester, TWO_TESTS, "--firstlight-cmd", "srv")
    assert result.ret != 0
    result.assert_outcomes(passed=2, errors=1)  # the session fixture's teardown
    result.stdout.fnmatch_lines(["*firstlight: the server stopped serving during the tests: failed (oom)*"])


def test_the_factory_passes_options_and_lets_a_test_set_its_own_timeout(pytester: pytest.Pytester, up: Recorder):
    result = _run(pytester, """
        from pathlib import Path

        def test_factory(firstlight_up):
            first = firstlight_up([Path("/bin/srv"), "--port", 8123], engine="vllm", timeout=5)
            second = firstlight_up("other --port {port}", served_model="m")
            third = firstlight_up("serve-on-{port}")  # every word holds {port}
            assert first.url == second.url == third.url == "http://127.0.0.1:9"
        """, "--firstlight-timeout", "99")
    result.assert_outcomes(passed=1)
    assert len(up.calls) == 3
    assert up.calls[0] == (["/bin/srv", "--port", "8123"], {"engine": "vllm", "timeout": 5})
    (command, options) = up.calls[1]
    assert command[:2] == ["other", "--port"] and command[2].isdigit() and options == {"served_model": "m",
                                                                                        "timeout": 99.0}
    assert int(command[2]) >= 1024  # a port the kernel chose, not a fixed one
    (word,) = up.calls[2][0]
    assert word.startswith("serve-on-") and word.removeprefix("serve-on-").isdigit()
    assert up.exited == [up.calls[2][0], up.calls[1][0], up.calls[0][0]]  # every server stopped, last first
