"""The one settings path: every number a user can set, declared once (its default, its range, its unit), and the
builders that turn what the user gave into the run's read-only :class:`~firstlight.config.Config`.

The CLI (``firstlight.cli``) and the Python API (``firstlight.api``) both build through here, so ``nan``, ``inf``,
``1e12`` and a negative period are refused by both with the same words. A refusal is a :class:`SettingError`
(a ``ValueError``): the API raises it as it is (``timeout 1e+12: ...``); the CLI names the option instead
(``--timeout 1e12: ...``) in its one-line usage error. The defaults are the Config dataclasses' own: a default
changed there is the default everywhere.

A run is read once: :func:`read_server` parses the server's command line (with the environment the server will
really get), every builder below takes that reading instead of parsing again, and :func:`plan` puts the run
together as one frozen :class:`Plan` (its Config, profile, command, redactor and outputs) that the session and
its sources read.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

import psutil

from firstlight.config import (
    KNOWN_ANSWER_MODES,
    AfterReadyConfig,
    Config,
    HistoryConfig,
    JudgeConfig,
    Outputs,
    ProbeConfig,
)
from firstlight.engines import ServerCommand, detect_from_command, get_profile, read_command
from firstlight.engines.profile import EngineProfile
from firstlight.errors import FirstlightError
from firstlight.history.location import where as history_where
from firstlight.redact import Redactor, redactor_for
from firstlight.wire import normalise_url, split_url
from firstlight.wire.deadline import resolve

DAY_S = 86_400.0  # the longest timeout: longer than any cold start, small enough for every timer
HOUR_S = 3_600.0  # the longest period (polling, sampling, serving checks, the stop's grace)
RESOLVE_S = 10.0  # getaddrinfo has no timeout of its own
APIS = ("completions", "chat")


class SettingError(FirstlightError, ValueError):
    """A setting the run cannot use: its name, the value given and what it must be, in one line."""

    def __init__(self, name: str, value: object, need: str) -> None:
        self.name, self.value, self.need = name, value, need
        super().__init__(f"{name}: {need}" if value is None else f"{name} {value!r}: {need}")

    def as_option(self, given: object | None = None) -> str:
        """The same refusal in the CLI's words: the option's name and the text as typed."""
        shown = self.value if given is None else given
        flag = f"--{self.name.replace('_', '-')}"
        return f"{flag}: {self.need}" if shown is None else f"{flag} {shown}: {self.need}"


@dataclass(frozen=True)
class Number:
    """A number a user sets: ``low < value`` (``low_open``) or ``low <= value``, ``value <= high``, finite; a whole
    number when ``integer``. ``unit`` words the refusal."""

    name: str
    default: float | int
    low: float
    high: float
    low_open: bool = False
    integer: bool = False
    unit: str = ""

    @property
    def need(self) -> str:
        if self.unit == "seconds" and self.low_open and self.low == 0:
            return f"give a number of seconds above 0 and at most {self.high:g}"
        kind = "whole number" if self.integer else f"number{' of ' + self.unit if self.unit else ''}"
        low = f"above {self.low:g}" if self.low_open else f"from {self.low:g}"
        return f"give a {kind} {low} {'to' if not self.low_open else 'and at most'} {self.high:g}"

    def check(self, value: object) -> Any:
        """The value as the run uses it (a float, or an int), else :class:`SettingError`."""
        if isinstance(value, bool):
            raise SettingError(self.name, value, self.need)
        if isinstance(value, int | float):
            number = float(value)
        else:
            try:
                number = float(str(value))
            except ValueError:
                raise SettingError(self.name, value, self.need) from None
        low_ok = number > self.low if self.low_open else number >= self.low
        if not (math.isfinite(number) and low_ok and number <= self.high):  # nan fails every comparison
            raise SettingError(self.name, value, self.need)
        if self.integer:
            if number != int(number):
                raise SettingError(self.name, value, self.need)
            return int(number)
        return number


def _default(cls: type, name: str) -> Any:
    return next(f.default for f in fields(cls) if f.name == name)


def _seconds(name: str, cls: type, attr: str | None = None, high: float = DAY_S) -> Number:
    return Number(name, _default(cls, attr or name), 0.0, high, low_open=True, unit="seconds")


# Every number of the start commands and the API, once. The CLI's option is ``--`` + the name with dashes.
NUMBERS: Mapping[str, Number] = MappingProxyType({n.name: n for n in (
    _seconds("timeout", JudgeConfig),
    _seconds("stall_timeout", JudgeConfig),
    _seconds("spin_timeout", JudgeConfig),
    _seconds("connect_timeout", ProbeConfig),
    _seconds("read_timeout", ProbeConfig),
    _seconds("generation_timeout", ProbeConfig),
    _seconds("poll_min", ProbeConfig, "min_interval", HOUR_S),
    _seconds("poll_max", ProbeConfig, "max_interval", HOUR_S),
    _seconds("sample_interval", Config, high=HOUR_S),
    _seconds("grace", Config, high=HOUR_S),
    Number("serving_interval", _default(Config, "serving_interval"), 0.0, HOUR_S, unit="seconds"),  # 0: off
    Number("max_tokens", _default(ProbeConfig, "max_tokens"), 1, 4096, integer=True),
    Number("warmup", _default(AfterReadyConfig, "warmup"), 0, 1000, integer=True),
    Number("bench_requests", _default(AfterReadyConfig, "bench_requests"), 1, 1_000_000, integer=True),
    Number("bench_concurrency", _default(AfterReadyConfig, "bench_concurrency"), 1, 4096, integer=True),
    Number("bench_duration", _default(AfterReadyConfig, "bench_duration"), 0.0, DAY_S, low_open=True,
           unit="seconds"),
    Number("bench_output_len", _default(AfterReadyConfig, "bench_output_len"), 1, 1_000_000, integer=True),
    Number("margin", _default(HistoryConfig, "margin"), 0.0, 10.0),  # a fraction of the baseline
    Number("member_port", 8081, 1, 65535, integer=True),
    # --unit: systemd's restarts (units.watch.UnitOptions has the same defaults; it sits above this floor)
    Number("max_attempts", 1, 1, 100, integer=True),
    Number("restart_wait", 120.0, 0.0, DAY_S, unit="seconds"),
)})


def check(name: str, value: object) -> Any:
    """``value`` for the setting ``name``, checked against its one declaration."""
    return NUMBERS[name].check(value)


# A watched pid caught between its fork and its exec: how long its own command line is waited for, how often read
EXEC_SETTLE_S = 2.0
EXEC_POLL_S = 0.02


# -- the builders ----------------------------------------------------------------------------------------------
def watched_command(pid: int, settle_s: float = EXEC_SETTLE_S) -> list[str]:
    """The command line of the watched process ``pid``; none when it is gone or another user's. A pid taken right
    after its fork (``vllm serve ... & firstlight watch --pid $!``) may still show its parent's command line, or
    none, until its exec: read again until it shows its own, ``settle_s`` at most (then as it is)."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            process = psutil.Process(pid)
            argv = process.cmdline()
        except psutil.Error:
            return []
        try:
            parent = process.parent()
            forked = not argv or (parent is not None and parent.cmdline() == argv)
        except psutil.Error:  # the parent gone or another user's: nothing to compare with
            forked = not argv
        if not forked or time.monotonic() >= deadline:
            return argv
        time.sleep(EXEC_POLL_S)


def read_server(command: Sequence[str], engine: str | None, *, launched: bool) -> ServerCommand:
    """The one parse of a run's server command: a launched one in this environment (the server inherits it), a
    watched one with none (its environment is not known). ``engine`` overrides the one the command names."""
    return read_command(list(command), engine=engine, env=os.environ if launched else {})


def profile(engine: str | None, command: Sequence[str] = (), server: ServerCommand | None = None) -> EngineProfile:
    """``engine``, else the one the command line names (``server``: as already read), else generic."""
    try:
        if engine is not None:
            return get_profile(engine)
        named = server.engine if server is not None else detect_from_command(list(command)) if command else None
        return get_profile(named or "generic")
    except ValueError as e:  # its text names the choices
        raise SettingError("engine", engine, str(e)) from None


def where(url: str | None, port: int | None) -> str | None:
    """``url``, or ``port`` on 127.0.0.1; None: neither was given."""
    if url is not None and port is not None:
        raise SettingError("port", port, "give url or port, not both")
    if port is not None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise SettingError("port", port, "give a port from 1 to 65535")
        return f"http://127.0.0.1:{port}"
    return url


def url_from_command(command: Sequence[str], engine: EngineProfile, server: ServerCommand | None = None) -> str:
    """Where the command's server listens: its ``--host``/``--port``, else the engine's default port."""
    if server is None:
        server = read_command(command, engine=engine.name, env=os.environ)  # the server inherits this environment
    url = server.for_profile(engine).url
    if url is None:
        raise SettingError("url", None, "cannot tell the server's port from its command line; give the URL")
    return url


def probe(url: str, engine: EngineProfile, *, api: str = ProbeConfig.api, prompt: str | None = None,
          expect: str | None = None, max_tokens: object = ProbeConfig.max_tokens, served_model: str | None = None,
          api_key: str | None = None, health_path: str | None = None,
          connect_timeout: object = ProbeConfig.connect_timeout, read_timeout: object = ProbeConfig.read_timeout,
          generation_timeout: object = ProbeConfig.generation_timeout,
          poll_min: object = ProbeConfig.min_interval, poll_max: object = ProbeConfig.max_interval,
          resolve_within: float = RESOLVE_S) -> ProbeConfig:
    """How the readiness ladder talks to the server: every number checked, the URL's host resolved (a typo would
    otherwise look like a server that never opens its port, until the timeout), the engine's endpoints."""
    try:
        url = normalise_url(url)
        host, port = split_url(url)
    except ValueError as e:
        raise SettingError("url", url, str(e)) from None
    if api not in APIS:
        raise SettingError("api", api, "give 'completions' or 'chat'")
    check_expect(expect)
    numbers = {n: check(n, v) for n, v in (("max_tokens", max_tokens), ("connect_timeout", connect_timeout),
                                           ("read_timeout", read_timeout),
                                           ("generation_timeout", generation_timeout),
                                           ("poll_min", poll_min), ("poll_max", poll_max))}
    if numbers["poll_min"] > numbers["poll_max"]:
        raise SettingError("poll_min", poll_min, f"the fastest polling period must not be above the slowest "
                                                 f"({numbers['poll_max']:g} s)")
    try:  # bounded: getaddrinfo itself has no timeout
        resolve(host, port, resolve_within)
    except TimeoutError:
        raise SettingError("url", url, f"cannot resolve host {host!r} (no answer from the resolver)") from None
    except OSError as e:
        raise SettingError("url", url, f"cannot resolve host {host!r} ({e.strerror or e})") from None
    ep = engine.endpoints
    return ProbeConfig(
        url=url, api=api, prompt=prompt, max_tokens=numbers["max_tokens"], expect=expect, model=served_model,
        api_key=api_key, health_path=health_path or ep.health, models_path=ep.models,
        completions_path=ep.completions, chat_path=ep.chat, connect_timeout=numbers["connect_timeout"],
        read_timeout=numbers["read_timeout"], generation_timeout=numbers["generation_timeout"],
        min_interval=numbers["poll_min"], max_interval=numbers["poll_max"],
        explicit=frozenset({"health_path"} if health_path else ()),
    )


def check_expect(expect: str | None) -> None:
    if expect is None:
        return
    try:
        re.compile(expect)
    except re.error as e:
        raise SettingError("expect", expect, f"not a valid regular expression: {e}") from None


def judge(timeout: object = JudgeConfig.timeout, stall_timeout: object = JudgeConfig.stall_timeout,
          spin_timeout: object = JudgeConfig.spin_timeout) -> JudgeConfig:
    """When to give up: the three deadlines of the verdict."""
    return JudgeConfig(timeout=check("timeout", timeout), stall_timeout=check("stall_timeout", stall_timeout),
                       spin_timeout=check("spin_timeout", spin_timeout))


def after_ready(warmup: object = 0, bench: bool = False, bench_requests: object = AfterReadyConfig.bench_requests,
                bench_concurrency: object = AfterReadyConfig.bench_concurrency,
                bench_duration: object = AfterReadyConfig.bench_duration,
                bench_output_len: object = AfterReadyConfig.bench_output_len) -> AfterReadyConfig:
    """The checks once READY holds: warm-up requests, the short benchmark."""
    return AfterReadyConfig(warmup=check("warmup", warmup), bench=bench,
                            bench_requests=check("bench_requests", bench_requests),
                            bench_concurrency=check("bench_concurrency", bench_concurrency),
                            bench_duration=check("bench_duration", bench_duration),
                            bench_output_len=check("bench_output_len", bench_output_len))


def history(enabled: bool = True, path: str | os.PathLike[str] | None = None, fail_on_regression: bool = False,
            margin: object = HistoryConfig.margin, known_answer: str = HistoryConfig.known_answer) -> HistoryConfig:
    """The run history: where, how much worse than the baseline is a regression, and the known answer's mode."""
    if known_answer not in KNOWN_ANSWER_MODES:
        raise SettingError("known_answer", known_answer, f"give one of {', '.join(KNOWN_ANSWER_MODES)}")
    return HistoryConfig(enabled=enabled, path=history_where(path),
                         fail_on_regression=fail_on_regression, margin=check("margin", margin),
                         known_answer=known_answer)


def redactor(command: Sequence[str], api_key: str | None) -> Redactor:
    """The secrets of this run: in the server's command line, the environment, and the API key."""
    r = Redactor()
    r.add_from_argv(command)
    r.add_from_env()
    r.add(api_key)
    return r


def watch_model(model: str | os.PathLike[str] | None, command: Sequence[str], engine: str | None,
                server: ServerCommand | None = None) -> Path | None:
    """The weights on disk of a watched server: the one given, else the one its command line names."""
    if model is None and server is not None:
        model = server.model_local
    elif model is None and command:
        model = read_command(command, engine=engine).model_local
    return Path(model) if model else None


def config(*, probe: ProbeConfig, judge: JudgeConfig, command: Sequence[str] = (),
           watched_command: Sequence[str] = (), engine: str | None = None, server: ServerCommand | None = None,
           **rest: Any) -> Config:
    """The run's one Config. ``engine`` None: the one the command (launched, else watched) names, else detect at
    run time: the watched command is the server's own, where the launched one may be its container's ``run``.
    ``server``: that command as :func:`read_server` read it (else it is read here). The periods in ``rest`` are
    checked like every other number."""
    for name in ("sample_interval", "grace", "serving_interval"):
        if name in rest:
            rest[name] = check(name, rest[name])
    argv = list(watched_command or command)
    read = server if server is not None or not argv else read_command(argv, engine=engine)
    named = engine or (read.engine if read is not None else None)
    if read is not None:  # a worker of a multi-node start is judged by its port, not by a generation it cannot give
        judge = dataclasses.replace(judge, role=read.role, head=read.head)
    return Config(command=list(command), watched_command=list(watched_command), engine=named, probe=probe,
                  judge=judge, **rest)


def outputs(*, record: str | os.PathLike[str] | None = None, report: str | os.PathLike[str] | None = None,
            trace: str | os.PathLike[str] | None = None, **rest: Any) -> Outputs:
    """What the run writes: a report or a trace that could not be written is found out now, not at the end of a
    ten-minute start (``rest``: the other :class:`~firstlight.config.Outputs` fields, as they are)."""
    out = Outputs(record=Path(record) if record is not None else None,
                  report=Path(report) if report is not None else None,
                  trace=Path(trace) if trace is not None else None, **rest)
    check_outputs(out)
    return out


def check_outputs(out: Outputs) -> None:
    """The report's and the trace's folders must be writable."""
    for name, path in (("report", out.report), ("trace", out.trace)):
        if path is not None and not os.access(path.parent.resolve(), os.W_OK):
            raise SettingError(name, path, f"cannot write in {path.parent}")


@dataclass(frozen=True)
class Plan:
    """One run, read once: what it is set to do (``config``), the engine's profile it starts with, the server's
    command as parsed (None: no command known, a watch by URL alone), the one redactor of its secrets (the
    command's, the environment's, the API key, the URL's) and what it writes and serves (``outputs``). The
    session, its sources and the history's deployment key read it; nothing parses the command again."""

    config: Config
    profile: EngineProfile
    server: ServerCommand | None
    redactor: Redactor
    outputs: Outputs = field(default_factory=Outputs)

    @property
    def argv(self) -> list[str]:
        """The command as given: the launched one, else the watched one."""
        return list(self.config.command or self.config.watched_command)

    def server_as(self, engine: EngineProfile) -> ServerCommand | None:
        """The command read by ``engine``'s flags (an engine learnt while the server starts reads its own way),
        from the one parse."""
        return self.server.for_profile(engine) if self.server is not None else None


def plan(cfg: Config, engine: EngineProfile, server: ServerCommand | None = None, *, api_key: str | None = None,
         outputs: Outputs | None = None, redactor: Redactor | None = None) -> Plan:
    """The run's :class:`Plan`. ``server``: the command as :func:`read_server` read it; a run given none whose
    Config holds a command has it read here, once. ``redactor``: one the caller already holds (then extended
    with the URL's secrets), else the run's own is made."""
    argv = list(cfg.command or cfg.watched_command)
    if server is None and argv:
        server = read_server(argv, cfg.engine, launched=bool(cfg.command))
    if redactor is None:
        redactor = redactor_for(argv, api_key if api_key is not None else cfg.probe.api_key, url=cfg.probe.url)
    else:
        redactor.add_from_url(cfg.probe.url)  # http://user:PASSWORD@host, ?api_key=...
    return Plan(cfg, engine, server, redactor, outputs or Outputs())


__all__ = ["APIS", "DAY_S", "HOUR_S", "NUMBERS", "Number", "Plan", "SettingError", "after_ready", "check",
           "check_expect", "check_outputs", "config", "history", "judge", "outputs", "plan", "probe", "profile",
           "read_server", "redactor", "url_from_command", "watch_model", "where"]
