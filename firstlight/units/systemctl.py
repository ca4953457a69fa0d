"""A small interface over ``systemctl``: the unit's state (``show``) and the verbs a watch needs
(``start``/``restart``/``stop``), each a subprocess with a timeout.

``systemctl show UNIT -p A,B,...`` prints ``KEY=VALUE`` lines in systemd's own property order. Values as
systemd 252 formats them (systemctl-show.c, man systemd.service(5), org.freedesktop.systemd1(5)):

* time spans (``TimeoutStartUSec=1min 30s``, ``RestartUSec=100ms``, ``infinity``);
* ``ExecStart={ path=/usr/bin/x ; argv[]=/usr/bin/x --port 30000 ; ignore_errors=no ; start_time=[...] ;
  stop_time=[...] ; pid=4242 ; code=(null) ; status=0/0 }`` (argv joined by spaces, unquoted);
* ``ExecMainCode`` as a number (1 exited, 2 killed, 3 dumped: CLD_*), ``ExecMainStatus`` the code or signal;
* ``*TimestampMonotonic`` in microseconds of CLOCK_MONOTONIC, the clock ``time.monotonic()`` reads, so a
  local unit's start converts to wall time exactly, whatever the timezone.

Start and restart are sent with ``--no-block``: a ``Type=notify`` unit's start job lasts until READY=1, which
is what we are here to watch, not to wait on.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field

from firstlight.errors import FirstlightError

SYSTEMCTL_ENV = "FIRSTLIGHT_SYSTEMCTL"  # another systemctl to run (a test double, or a wrapper with sudo)
SHOW_PROPERTIES = (
    "Id", "LoadState", "ActiveState", "SubState", "Result", "Type", "Restart", "RestartUSec", "MainPID",
    "ExecMainPID", "ExecMainCode", "ExecMainStatus", "NRestarts", "InvocationID", "ControlGroup", "ExecStart",
    "TimeoutStartUSec", "StatusText", "ExecMainStartTimestampMonotonic", "InactiveExitTimestampMonotonic",
    "FragmentPath",
)
DEFAULT_TIMEOUT_START_S = 90.0  # DefaultTimeoutStartSec= (man systemd-system.conf(5))
_CLD = {"1": "exited", "2": "killed", "3": "dumped"}
_SPAN_UNITS = {
    "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0, "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "M": 2629800.0, "month": 2629800.0, "months": 2629800.0, "y": 31557600.0, "year": 31557600.0,
    "years": 31557600.0,
}
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Zµ]+)")
_ARGV = re.compile(r"argv\[\]=(?P<argv>.*?) ; (?:ignore_errors|flags)=")
_PATH = re.compile(r"path=(?P<path>[^ ;]+)")


class SystemctlError(FirstlightError):
    """systemctl could not answer (no systemd as PID 1, no permission, a timeout): one line."""


def parse_timespan(value: str, default_unit: float = 1.0) -> float | None:
    """A systemd time span in seconds: ``1min 30s`` -> 90.0; ``infinity`` -> None; a bare number counts in
    ``default_unit`` seconds (1e-6 for a ``...USec`` property printed raw)."""
    v = value.strip()
    if v in ("infinity", ""):
        return None
    if re.fullmatch(r"\d+(?:\.\d+)?", v):
        return float(v) * default_unit
    total, pos = 0.0, 0
    for m in _SPAN_PART.finditer(v):
        if v[pos:m.start()].strip():
            raise ValueError(f"not a time span: {value!r}")
        unit = _SPAN_UNITS.get(m[2]) or _SPAN_UNITS.get(m[2].lower())
        if unit is None:
            raise ValueError(f"unknown time unit {m[2]!r} in {value!r}")
        total += float(m[1]) * unit
        pos = m.end()
    if pos == 0 or v[pos:].strip():
        raise ValueError(f"not a time span: {value!r}")
    return total


def parse_exec_start(value: str) -> list[str]:
    """The argv of the (first) command in an ``ExecStart={ ... }`` value; [] when there is none."""
    m = _ARGV.search(value)
    if m is not None and m["argv"] and m["argv"] != "n/a":
        return m["argv"].split()
    m = _PATH.search(value)
    return [m["path"]] if m is not None and m["path"] != "n/a" else []


def parse_show(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines; a value keeps its own ``=`` signs; a repeated key keeps its first value (a unit
    with several ExecStart lines prints one ``{ ... }`` per line in newer systemd)."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and key not in props:
            props[key] = value
    return props


def _int(value: str | None) -> int | None:
    if value is None or not value.strip().lstrip("-").isdigit():
        return None
    return int(value)


@dataclass(frozen=True)
class UnitState:
    """What ``systemctl show`` said about a unit, typed."""

    id: str
    load_state: str = ""
    active_state: str = ""  # active | reloading | inactive | failed | activating | deactivating
    sub_state: str = ""  # running | start | auto-restart | exited | dead | failed | ...
    result: str = ""  # success | exit-code | signal | core-dump | timeout | oom-kill | start-limit-hit | ...
    type: str = ""
    restart: str = ""  # no | on-failure | always | ...
    restart_s: float | None = None
    main_pid: int | None = None  # None when no main process runs now
    exec_main_pid: int | None = None
    exec_main_code: str | None = None  # exited | killed | dumped
    exec_main_status: int | None = None
    n_restarts: int = 0
    invocation_id: str = ""
    control_group: str = ""
    exec_start: list[str] = field(default_factory=list)
    timeout_start_s: float | None = DEFAULT_TIMEOUT_START_S  # None: infinity
    status_text: str = ""
    main_started_mono: float | None = None  # CLOCK_MONOTONIC seconds
    activating_mono: float | None = None  # left inactive (ExecStartPre included)
    fragment_path: str = ""
    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, unit: str = "") -> UnitState:
        p = parse_show(text)

        def mono(key: str) -> float | None:
            v = _int(p.get(key))
            return v / 1e6 if v else None

        def span(key: str, default: float | None) -> float | None:
            if key not in p:
                return default
            try:
                return parse_timespan(p[key], 1e-6)
            except ValueError:
                return default

        main_pid = _int(p.get("MainPID"))
        return cls(
            id=p.get("Id", unit), load_state=p.get("LoadState", ""), active_state=p.get("ActiveState", ""),
            sub_state=p.get("SubState", ""), result=p.get("Result", ""), type=p.get("Type", ""),
            restart=p.get("Restart", ""), restart_s=span("RestartUSec", None),
            main_pid=main_pid or None, exec_main_pid=_int(p.get("ExecMainPID")) or None,
            exec_main_code=_CLD.get(p.get("ExecMainCode", "")), exec_main_status=_int(p.get("ExecMainStatus")),
            n_restarts=_int(p.get("NRestarts")) or 0, invocation_id=p.get("InvocationID", ""),
            control_group=p.get("ControlGroup", ""), exec_start=parse_exec_start(p.get("ExecStart", "")),
            timeout_start_s=span("TimeoutStartUSec", DEFAULT_TIMEOUT_START_S), status_text=p.get("StatusText", ""),
            main_started_mono=mono("ExecMainStartTimestampMonotonic"),
            activating_mono=mono("InactiveExitTimestampMonotonic"), fragment_path=p.get("FragmentPath", ""),
            props=p,
        )

    @property
    def exists(self) -> bool:
        return self.load_state not in ("not-found", "")

    @property
    def restarting(self) -> bool:
        """systemd has scheduled a restart (Restart=on-failure after a failure, waiting RestartSec)."""
        return self.sub_state == "auto-restart"

    @property
    def starting_or_up(self) -> bool:
        return self.active_state in ("activating", "active", "reloading")

    @property
    def exit_code(self) -> int | None:
        """The main process's exit as a Popen return code reads it (minus the signal when killed)."""
        if self.exec_main_status is None or self.exec_main_code is None:
            return None
        return self.exec_main_status if self.exec_main_code == "exited" else -self.exec_main_status

    def wall_time(self, mono: float | None) -> float | None:
        """A CLOCK_MONOTONIC time of this machine as Unix time."""
        return None if mono is None else time.time() - time.monotonic() + mono

    @property
    def started_at(self) -> float | None:
        """When this start began (left inactive, else the main process started), Unix time."""
        return self.wall_time(self.activating_mono or self.main_started_mono)

    def describe(self) -> str:
        how = f"{self.active_state}/{self.sub_state}"
        if self.result and self.result != "success":
            how += f", result {self.result}"
        if self.exit_code is not None and self.active_state in ("failed", "inactive", "activating"):
            how += f", main process {self.exec_main_code} {self.exec_main_status}"
        return f"{self.id}: {how}, {self.n_restarts} restarts"


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name if code < 0 else str(code)
    except ValueError:
        return str(code)


class Systemctl:
    """Runs systemctl (``$FIRSTLIGHT_SYSTEMCTL`` or ``systemctl``; ``--user`` for user units)."""

    def __init__(self, binary: str | None = None, user: bool = False, timeout: float = 10.0) -> None:
        self.binary = binary or os.environ.get(SYSTEMCTL_ENV) or "systemctl"
        self.user = user
        self.timeout = timeout

    def _run(self, *args: str, timeout: float | None = None) -> str:
        """``systemctl [--user] ARGS``; unit names come after ``--``, so none is ever read as an option."""
        exe = shutil.which(self.binary)
        if exe is None:
            raise SystemctlError(f"{self.binary} not found: is this a systemd machine?")
        argv = [exe, *(["--user"] if self.user else []), *args]
        limit = timeout or self.timeout
        try:
            p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=limit,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SystemctlError(f"systemctl {' '.join(args)} did not answer within {limit:.0f}s") from None
        except OSError as e:
            raise SystemctlError(f"cannot run {self.binary}: {e.strerror}") from None
        if p.returncode != 0:
            lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
            why = lines[0] if lines else f"exit {p.returncode}"
            raise SystemctlError(f"systemctl {' '.join(args)}: {why}")
        return p.stdout

    def show(self, unit: str) -> UnitState:
        return UnitState.parse(self._run("show", "-p", ",".join(SHOW_PROPERTIES), "--", unit), unit)

    def start(self, unit: str) -> None:
        self._run("--no-block", "start", "--", unit)

    def restart(self, unit: str) -> None:
        self._run("--no-block", "restart", "--", unit)

    def stop(self, unit: str, timeout: float = 120.0) -> UnitState:
        """Ask systemd to stop the unit and wait until it is inactive or failed, at most ``timeout``."""
        self._run("--no-block", "stop", "--", unit)
        deadline = time.monotonic() + timeout
        while True:
            state = self.show(unit)
            if state.active_state in ("inactive", "failed") or time.monotonic() >= deadline:
                return state
            time.sleep(0.2)

    def restart_or_start(self, unit: str) -> UnitState:
        """``restart`` when the unit runs, ``start`` when it does not; the state seen before."""
        before = self.show(unit)
        if not before.exists:
            raise SystemctlError(f"unit {unit} not found (LoadState={before.load_state or 'unknown'})")
        if before.active_state in ("active", "activating", "reloading"):
            self.restart(unit)
        else:
            self.start(unit)
        return before


def describe_exit(code: int | None) -> str:
    if code is None:
        return "unknown"
    return f"signal {_signal_name(code)}" if code < 0 else f"code {code}"
