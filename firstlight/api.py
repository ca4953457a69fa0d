"""The Python API, for people who start servers from Python (test harnesses, notebooks, orchestration).

``up`` launches a server and ``watch`` attaches to one; both are context managers that enter when the server is
READY (a real generation returned, exactly what ``firstlight up`` / ``firstlight watch`` decide) and raise
:class:`NotReady`, carrying the typed :class:`~firstlight.result.RunResult`, when it is not. ``run_preflight``
runs the checks before launch (``firstlight.preflight`` is their package) and ``replay`` gives a startup log's
verdict. Nothing here prints: the run is told to a reporter that renders nothing, unless the caller passes one
(``reporter=``).

The run is the CLI's own: the same :class:`~firstlight.config.Config`, :class:`~firstlight.runner.session.Session`
and after-READY policy, on a thread of its own so that the caller's thread is free once the server serves
(the CLI supervises in the foreground; a ``with`` block cannot). While the block runs, that thread supervises
the launched server: the serving checks (``serving_interval``) and its death, read through ``Server.alive``,
``Server.serving`` and ``Server.result``. The thread installs no signal handler: Ctrl-C stays the caller's
KeyboardInterrupt, and the block's exit (whatever the way) stops the server's whole process group.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
import time
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

import psutil

from firstlight import settings
from firstlight.config import HistoryConfig
from firstlight.engines import ServerCommand
from firstlight.errors import FirstlightError
from firstlight.logreplay import ReplayReport, replay_lines, replay_log
from firstlight.preflight import DEADLINE_S, PreflightOptions, PreflightReport, read_target
from firstlight.preflight import run_preflight as run_checks
from firstlight.redact import Redactor
from firstlight.report.artifacts import RunArtifacts
from firstlight.report.base import ForwardingReporter, QuietReporter, Reporter
from firstlight.result import RunResult
from firstlight.runner.outcome import Outcome
from firstlight.runner.session import Session
from firstlight.serving import ServingStatus
from firstlight.settings import Plan
from firstlight.timeline import Interrupted
from firstlight.vocab import INTERRUPTED

__all__ = ["NotReady", "Server", "replay", "run_preflight", "up", "watch"]

P = ParamSpec("P")
T = TypeVar("T")

Word = str | os.PathLike[str] | int  # one word of a command: made a str, as exec wants


def _typed(fn: Callable[P, T]) -> Callable[P, T]:
    """Each argument checked against its annotation before anything is built: a wrong type is a one-line
    TypeError naming the function, the argument and the type expected, not an error from deep inside."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)

    @functools.wraps(fn)
    def checked(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn.__name__}: {e}") from None
        for name, value in bound.arguments.items():
            tp = hints.get(name)
            if tp is not None and not _is(value, tp):
                raise TypeError(f"{fn.__name__}: {name} must be {_named(tp)}, not {type(value).__name__}"
                                + (" (a command is a list of its words: shlex.split a string)"
                                   if name == "command" and isinstance(value, str) else ""))
        return fn(*args, **kwargs)

    return checked


def _is(value: Any, tp: Any) -> bool:
    """``value`` is of the annotated type: the scalars exactly (a bool is no number), a path any os.PathLike, a
    sequence or an iterable anything but a str (an iterable's items are not consumed to look), a protocol
    anything."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_is(value, a) for a in args)
    if tp is type(None):
        return value is None
    if tp in (int, float):
        return isinstance(value, (int, float) if tp is float else int) and not isinstance(value, bool)
    if tp is Path or origin is os.PathLike:
        return isinstance(value, os.PathLike)
    if origin is Sequence:
        return (isinstance(value, Sequence) and not isinstance(value, (str, bytes))
                and all(_is(v, args[0]) for v in value))
    if origin is Iterable:
        return isinstance(value, Iterable) and not isinstance(value, (str, bytes))
    try:
        return isinstance(value, tp)
    except TypeError:  # a protocol that cannot be checked at run time (Reporter): its use will tell
        return True


_NAMES = {str: "a str", int: "an int", float: "a number", bool: "True or False", type(None): "None"}


def _named(tp: Any) -> str:
    """The annotated type as the error names it: ``a str or a path or None``, ``a list of (a str or an int)``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_named(a) for a in args)
    if tp is Path or origin is os.PathLike:
        return "a path"
    if origin in (Sequence, Iterable):
        inner = _named(args[0])
        return f"a list of ({inner})" if " or " in inner else f"a list of {inner.removeprefix('a ')}s"
    return _NAMES.get(tp, getattr(tp, "__name__", str(tp)))


# What the caller's stop looks like to the run: the evidence of the final result reads "<this> received ...".
_EXIT = "the with-block's exit"
_RESOLVE_S = 10.0  # getaddrinfo has no timeout of its own


class NotReady(FirstlightError):
    """The server did not become READY (failed, hung, timeout, interrupted), or died while the block ran.
    ``result`` is the run's typed result: verdict, phase, failure category, hint and evidence."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        super().__init__(reason(result))


def reason(result: RunResult) -> str:
    """One line: the verdict, the failure category, and what says so (the first evidence, else the detail)."""
    head = result.verdict + (f" ({result.failure})" if result.failure and result.failure != "none" else "")
    why = next((str(e.get("value")) for e in result.evidence if e.get("value")), None) or result.detail
    where = "" if why and f"phase {result.phase}" in why else f" in phase {result.phase}"
    line = head + where + (f": {why}" if why else "")
    if result.hint:
        line += f"; hint: {result.hint}"
    return " ".join(line.split())  # one line, whatever the evidence quotes


@dataclass(repr=False)
class Server:
    """What ``up`` and ``watch`` enter with. ``result`` is the READY result while the server serves; once the
    run has ended (the server died in the block, or the block exited) it is the final one."""

    url: str
    result: RunResult
    pid: int | None
    launched: bool
    _run: _Run | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        # Masked as every output is: pytest prints a failing assertion's objects, and the URL may hold a password.
        state = self.serving.state if self.serving is not None else None
        return (f"Server(url={Redactor().url(self.url)!r}, pid={self.pid}, launched={self.launched}, "
                f"verdict={self.result.verdict!r}, serving={state!r})")

    @property
    def written(self) -> list[Path]:
        """The files the run wrote when it ended (its ``report`` and ``trace``); empty while the block runs."""
        return list(self._run.written) if self._run is not None else []

    @property
    def serving(self) -> ServingStatus | None:
        """The serving checks' state now (``up`` only): live in the block, the last one once it has exited;
        None before the first check (it was set only on exit: None for the whole block)."""
        return self._run.tracker.status_now if self._run is not None else None

    @property
    def alive(self) -> bool | None:
        """``up``: the launched server still runs (supervision goes on). ``watch``: the watched process still
        lives; None without a pid (nothing to tell it by)."""
        if self._run is not None and self.launched:
            return self._run.thread.is_alive()
        if self.pid is None:
            return None
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


class _Tracker(ForwardingReporter):
    """The session's reporter: hands what the API needs to the waiting thread, and everything on to the
    caller's reporter (none by default: nothing is rendered)."""

    def __init__(self, inner: Reporter | None, ready: threading.Event) -> None:
        super().__init__(inner or QuietReporter())
        self.ready = ready
        self.serving_result: RunResult | None = None
        self.status_now: ServingStatus | None = None

    def summary(self, result: RunResult) -> None:
        # Supervision tells the READY result before it starts: the moment the block may run.
        if result.serving and self.serving_result is None:
            self.serving_result = result
            self.ready.set()
        super().summary(result)

    def serving(self, status: ServingStatus, changed: bool) -> None:
        self.status_now = status
        super().serving(status, changed)


class _Run:
    """One Session on its own thread, and what it writes (the CLI's RunArtifacts: the record as it runs, the
    report and the trace when it ends)."""

    def __init__(self, plan: Plan, reporter: Reporter | None, preflight: bool = False) -> None:
        cfg = self.cfg = plan.config
        self.plan, self.profile, self.redactor, self.preflight = plan, plan.profile, plan.redactor, preflight
        self.ready = threading.Event()
        self.tracker = _Tracker(reporter, self.ready)
        out = plan.outputs
        try:
            self.artifacts = RunArtifacts(cfg, out.record, out.report, out.trace, warn=self.tracker.message)
        except OSError as e:
            raise settings.SettingError("record", out.record, f"cannot write ({e.strerror or e})") from None
        record = self.artifacts.stream(self.tracker.message)
        self.session = Session(cfg, plan.profile, self.tracker, plan.redactor, record, plan=plan)
        self.written: list[Path] = []
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="firstlight-session", daemon=True)
        # The longest the session can take to a verdict and to stop the server: a bound on waiting for it.
        self.bound = cfg.judge.timeout + 2 * cfg.grace + 60.0

    def _main(self) -> None:
        try:
            self.outcome = self.session.run()
        except BaseException as e:  # handed to the caller's thread
            self.error = e
        finally:
            try:  # whatever the verdict: the report and trace are what a failed start is read by
                self.written = self.artifacts.finish(self.outcome.summary if self.outcome else None)
            finally:
                self.artifacts.close()
                self.ready.set()
                self.tracker.close()

    def start(self) -> RunResult:
        """Start the session; return the READY result, or raise NotReady with the final one."""
        if self.preflight:  # as `up` does: a failed check ends the run before launch, no process started
            cfg = self.cfg
            self.session.preflight = _preflight(cfg.command, cfg.engine, cfg.model_path, True, self.redactor,
                                                min(DEADLINE_S, cfg.judge.timeout), self.plan.server)
        try:  # the start too: a Ctrl-C may be raised as start() returns, the session already launching
            self.thread.start()
            self._wait_ready()
        except BaseException:  # KeyboardInterrupt while waiting: the server is stopped, then it propagates
            self.stop()
            raise
        if self.tracker.serving_result is not None:
            return self.tracker.serving_result
        return self.final()  # the run ended without serving: final() raises NotReady

    def _wait_ready(self) -> None:
        # In short waits: a process-directed SIGINT may be delivered to another of this process's threads, and
        # then a lock wait of the main thread is not interrupted; Python raises KeyboardInterrupt only when the
        # main thread next runs bytecode (one long wait missed a Ctrl-C for its whole length).
        deadline = time.monotonic() + self.bound
        while not self.ready.wait(0.1):
            if time.monotonic() > deadline:
                raise RuntimeError(f"firstlight: no verdict within {self.bound:g}s (a bug of firstlight)")

    def stop(self) -> None:
        """Tell the session to stop (as a stop signal would) and wait for it to have stopped the server."""
        if self.thread.is_alive():
            self.session.q.put(Interrupted(time.time(), _EXIT))
            self.thread.join(self.bound)

    def final(self) -> RunResult:
        """The run's final result; NotReady when it did not serve, or stopped serving on its own."""
        if self.error is not None:
            raise self.error
        if self.outcome is None:
            raise RuntimeError("firstlight: the session did not end")
        result = self.outcome.result
        asked = any(str(e.get("value", "")).startswith(_EXIT) for e in result.evidence)
        if result.verdict == INTERRUPTED and asked and self.tracker.serving_result is not None:
            return self.tracker.serving_result.stopped(result.server_stopped or "stopped")  # the caller's stop
        if result.serving:
            return result
        raise NotReady(result)


class _Context:
    """The context manager ``up`` and ``watch`` return."""

    def __init__(self, run: _Run, url: str, launched: bool) -> None:
        self._run, self._url, self._launched = run, url, launched
        self.server: Server | None = None

    def __enter__(self) -> Server:
        result = self._run.start()
        self.server = Server(url=self._url, result=result, pid=result.pid, launched=self._launched, _run=self._run)
        return self.server

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        server = self.server
        assert server is not None
        self._run.stop()
        try:
            server.result = self._run.final()
        except NotReady as e:  # the server died in the block: said, unless the block already raises
            server.result = e.result
            if kind is None:
                raise


@_typed
def up(command: Sequence[Word], *, url: str | None = None, port: int | None = None, engine: str | None = None,
       model: str | Path | None = None, served_model: str | None = None, api: str = "completions",
       prompt: str | None = None, expect: str | None = None, max_tokens: int = 8, api_key: str | None = None,
       timeout: float = 3600.0, stall_timeout: float = 120.0, spin_timeout: float = 900.0,
       connect_timeout: float = 1.0, read_timeout: float = 5.0, generation_timeout: float = 120.0,
       serving_interval: float = 10.0, grace: float = 10.0, no_preflight: bool = False,
       history: bool | str | Path = True, record: str | Path | None = None, report: str | Path | None = None,
       trace: str | Path | None = None, reporter: Reporter | None = None) -> AbstractContextManager[Server]:
    """Launch ``command`` (its own process group) and enter once it is READY; raise :class:`NotReady` when it
    fails, hangs or times out (the server is then stopped). The block's exit stops the whole process group.

    ``url`` (or ``port`` on 127.0.0.1) is where to probe; by default the command's ``--host``/``--port``, else
    the engine's default port. ``model`` is the weights on disk (default: from the command line); ``served_model``
    the name sent in requests. ``api_key`` is sent as a bearer token and masked everywhere. ``history``: True
    (the user's run history, or $FIRSTLIGHT_HISTORY), False (none), or a database path. ``record``, ``report``
    and ``trace`` are ``firstlight up``'s ``--record``, ``--report`` and ``--trace``: every observation as JSON
    Lines while the run goes, its HTML report and its Chrome trace when it ends (after the block's exit, or at a
    NotReady), whatever the verdict; ``Server.written`` lists them. Raises ValueError on bad input (one line),
    before anything is started."""
    argv = [str(c) for c in command]
    if not argv or not argv[0]:
        raise ValueError("up: no command to launch")
    server = settings.read_server(argv, engine, launched=True)  # the run's one reading of its command
    profile = settings.profile(engine, argv, server)
    out = settings.outputs(record=record, report=report, trace=trace)
    probe = settings.probe(settings.where(url, port) or settings.url_from_command(argv, profile, server),
                           profile, api=api, prompt=prompt, expect=expect, max_tokens=max_tokens,
                           served_model=served_model, api_key=api_key, connect_timeout=connect_timeout,
                           read_timeout=read_timeout, generation_timeout=generation_timeout)
    cfg = settings.config(probe=probe, judge=settings.judge(timeout, stall_timeout, spin_timeout), command=argv,
                          engine=engine, server=server, model_path=Path(model) if model else None,
                          history=_history(history), grace=grace, serving_interval=serving_interval,
                          after_ready="supervise")
    plan = settings.plan(cfg, profile, server, api_key=api_key, outputs=out)
    return _Context(_Run(plan, reporter, preflight=not no_preflight), probe.url, launched=True)


@_typed
def watch(url: str, *, pid: int | None = None, log: str | Path | None = None, log_from_start: bool = False,
          engine: str | None = None, model: str | Path | None = None, served_model: str | None = None,
          api: str = "completions", prompt: str | None = None, expect: str | None = None, max_tokens: int = 8,
          api_key: str | None = None, timeout: float = 3600.0, stall_timeout: float = 120.0,
          spin_timeout: float = 900.0, connect_timeout: float = 1.0, read_timeout: float = 5.0,
          generation_timeout: float = 120.0, history: bool | str | Path = True, record: str | Path | None = None,
          report: str | Path | None = None, trace: str | Path | None = None,
          reporter: Reporter | None = None) -> AbstractContextManager[Server]:
    """Attach to a server someone else started and enter once it is READY; raise :class:`NotReady` otherwise.
    Nothing is stopped, on failure or on exit: firstlight did not start it. ``pid`` (its process tree's reads,
    CPU and death) and ``log`` (its log file, followed) make a slow start tell from a hung one. ``record``,
    ``report`` and ``trace``: as :func:`up`'s, written when the watch ends."""
    if pid is not None and not psutil.pid_exists(pid):
        raise ValueError(f"watch: no process with pid {pid}")
    command = settings.watched_command(pid) if pid is not None else []  # none: gone, or another user's
    server = settings.read_server(command, engine, launched=False) if command else None
    profile = settings.profile(engine, command, server)
    out = settings.outputs(record=record, report=report, trace=trace)
    probe = settings.probe(url, profile, api=api, prompt=prompt, expect=expect, max_tokens=max_tokens,
                           served_model=served_model, api_key=api_key, connect_timeout=connect_timeout,
                           read_timeout=read_timeout, generation_timeout=generation_timeout)
    cfg = settings.config(probe=probe, judge=settings.judge(timeout, stall_timeout, spin_timeout),
                          watched_command=command, engine=engine, server=server, pid=pid,
                          log_file=Path(log) if log else None, log_from_start=log_from_start,
                          model_path=settings.watch_model(model, command, engine, server), history=_history(history))
    plan = settings.plan(cfg, profile, server, api_key=api_key, outputs=out)
    return _Context(_Run(plan, reporter), probe.url, launched=False)


@_typed
def run_preflight(command: Sequence[Word], *, engine: str | None = None, model: str | Path | None = None,
              disk_sample: bool = True, deadline_s: float = DEADLINE_S) -> PreflightReport:
    """The checks ``up`` runs before launch (GPUs, quantization, pip, checkpoint, port, stale server, memory and
    disk), without starting anything: one typed ``Check`` per check, secrets masked; ``verdict`` is the worst."""
    argv = [str(c) for c in command]
    if not argv or not argv[0]:
        raise ValueError("run_preflight: no command to check")
    if engine is not None:
        settings.profile(engine, argv)
    if not 0 < deadline_s <= settings.DAY_S:  # nan too
        raise settings.SettingError("deadline_s", deadline_s, f"give a number of seconds above 0 and at most "
                                                              f"{settings.DAY_S:g}")
    return _preflight(argv, engine, Path(model) if model else None, disk_sample,
                      settings.redactor(argv, None), float(deadline_s))


@_typed
def replay(source: str | os.PathLike[str] | Iterable[str], *, engine: str | None = None) -> ReplayReport:
    """A startup log's post-mortem, as ``firstlight replay`` gives it: ``outcome`` (ready, failed, incomplete),
    the last ``phase``, the ``failure`` category, ``hint``, ``evidence`` and ``phases``. ``source`` is a path, or
    the log's lines."""
    if engine is not None:
        settings.profile(engine)
    return _replay(source, engine)


def _replay(source: str | os.PathLike[str] | Iterable[str], engine: str | None) -> ReplayReport:
    """The one call into the replay driver."""
    if isinstance(source, (str, os.PathLike)):
        return replay_log(Path(source), engine)
    return replay_lines(source, engine)


# -- what the API adds to the one settings path (firstlight.settings) ------------------------------------------
def _history(history: bool | str | Path) -> HistoryConfig:
    """``history``: True (the user's, or $FIRSTLIGHT_HISTORY), False (none), or a database path."""
    if isinstance(history, bool):
        return settings.history(enabled=history)
    return settings.history(path=history)


def _preflight(command: list[str], engine: str | None, model: Path | None, disk_sample: bool, redactor: Redactor,
               deadline_s: float, server: ServerCommand | None = None) -> PreflightReport:
    report = run_checks(read_target(command, engine=engine, model=str(model) if model else None, server=server),
                           PreflightOptions(disk_sample, deadline_s=deadline_s), redactor)
    # Belt and braces, as the CLI: the evidence quotes command lines and paths.
    report.checks = [dataclasses.replace(c, evidence=redactor.text(c.evidence),
                                         hint=redactor.text(c.hint) if c.hint else None) for c in report.checks]
    return report
