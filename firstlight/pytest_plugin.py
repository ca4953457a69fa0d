"""pytest plugin: a real LLM server for a test session, started once and given to tests only at READY.

Registered as the ``firstlight`` entry point (``pytest11``), so every pytest run in an environment with
firstlight loads it: loading costs two options and two fixtures, nothing else (the API and what it imports
load when a fixture is first requested; no hook, no autouse fixture).

- ``firstlight_server`` (session): the server of ``--firstlight-cmd`` / ini ``firstlight_command``.
- ``firstlight_up`` (session): a factory, ``firstlight_up(command, **options_of_firstlight_up)``.

Both return a :class:`firstlight.api.Server` (``url``, ``result``); the servers are stopped at the end of the
session. A server that does not become READY makes the tests that asked for it error with the one-line
reason. ``{port}`` in a command is replaced by a free port: under pytest-xdist each worker starts its own
server, on a port of its own.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from firstlight.api import Server

_HELP_CMD = "the server command for the firstlight_server fixture ({port}: a free port)"


class Up(Protocol):
    def __call__(self, command: Sequence[str] | str, **options: Any) -> Server: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    # argparse's own defaults where they serve: dest firstlight_cmd / firstlight_timeout, default None; the
    # "args" ini type's default, []
    group = parser.getgroup("firstlight", "firstlight: an LLM server for the test session")
    group.addoption("--firstlight-cmd", metavar="COMMAND",
                    help=f"{_HELP_CMD}, one shell-quoted string (overrides the ini's firstlight_command)")
    group.addoption("--firstlight-timeout", type=float, metavar="SECONDS",
                    help="how long the server may take to become READY (default: ini firstlight_timeout, 600)")
    parser.addini("firstlight_command", f"{_HELP_CMD}, shell-quoted", type="args")
    parser.addini("firstlight_timeout", "how long the server may take to become READY, seconds", default="600")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _command(command: Sequence[str] | str) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if any("{port}" in a for a in argv):
        port = str(_free_port())
        argv = [a.replace("{port}", port) for a in argv]
    return argv


def _timeout(config: pytest.Config) -> float:
    given = config.getoption("firstlight_timeout")
    if given is not None:
        return float(given)
    raw = config.getini("firstlight_timeout")
    try:
        return float(raw)
    except ValueError:
        why = f"ini firstlight_timeout: not a number of seconds: {raw!r}"
    # the tests that asked error with this one line (a UsageError raised in a fixture prints a traceback)
    pytest.fail(f"firstlight: {why}", pytrace=False)


@pytest.fixture(scope="session")
def firstlight_up(pytestconfig: pytest.Config) -> Iterator[Up]:
    """Start a server with ``firstlight_up(command, **options)`` (the options of ``firstlight.up``); it is
    returned at READY and stopped at the end of the session."""
    from firstlight.api import NotReady, up  # only here: loading the plugin must not load the API

    timeout = _timeout(pytestconfig)
    with contextlib.ExitStack() as stack:
        def start(command: Sequence[str] | str, **options: Any) -> Server:
            options.setdefault("timeout", timeout)
            try:
                return stack.enter_context(up(_command(command), **options))
            except TypeError as e:  # an option of the wrong type: said as the API says it, in one line
                why = str(e)
            except (NotReady, ValueError) as e:
                why = f"the server did not become READY: {e}"
            # failed outside the except: the report shows the reason, not a chain of exceptions
            pytest.fail(f"firstlight: {why}", pytrace=False)

        try:
            yield start
        finally:
            died = None
            try:
                stack.close()
            except NotReady as e:  # it died while the tests ran
                died = str(e)
            if died is not None:
                pytest.fail(f"firstlight: the server stopped serving during the tests: {died}", pytrace=False)


@pytest.fixture(scope="session")
def firstlight_server(pytestconfig: pytest.Config, firstlight_up: Up) -> Server:
    """The server of ``--firstlight-cmd`` (or ini ``firstlight_command``), READY, for the whole session."""
    given = pytestconfig.getoption("firstlight_cmd")
    command = shlex.split(given) if given else list(pytestconfig.getini("firstlight_command"))
    if not command:
        pytest.fail("firstlight_server: no server command: pass --firstlight-cmd or set firstlight_command in "
                    "the ini file", pytrace=False)
    return firstlight_up(command)
