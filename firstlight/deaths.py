"""How a server process ended, in the words its users know: a signal by its name and number, a status that
cannot be known, and what to do about a native crash or the kernel's OOM killer.

Dependency-free (like ``vocab``): the judge, ``RunResult`` and the samplers name exits the same way. An exit
code follows Popen's convention: ``-N`` means killed by signal N; ``None`` means nobody could tell (a process
that is not firstlight's child, reaped by its own parent).
"""

from __future__ import annotations

import signal

# Signals a process gets from its own fault (the kernel's trap, or abort()): a native crash.
CRASH_SIGNALS: frozenset[str] = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGTRAP",
                                           "SIGSYS"})
NOT_OUR_CHILD = "ended; not our child, status unknown"

_BACKTRACE = ("a backtrace: `coredumpctl gdb <pid>` where systemd-coredump keeps the core, else `ulimit -c "
              "unlimited` before the start and `gdb <binary> <core>` (or `gdb -p <pid>` on a rerun)")
CRASH_HINTS: dict[str, str] = {
    "SIGILL": "an instruction this CPU does not have: the binary (or a kernel it loads) was built for another "
              "CPU (-march=native, AVX-512, AMX elsewhere): rebuild it for this machine; " + _BACKTRACE,
    "SIGABRT": "abort(): a failed assertion or an uncaught C++ exception, usually printed in the last lines; "
               + _BACKTRACE,
    "SIGBUS": "a bad memory access, often a file mapped into memory that was truncated or changed (the model "
              "file) or a full /dev/shm; " + _BACKTRACE,
    "SIGFPE": "an arithmetic fault (integer division by zero) in native code; " + _BACKTRACE,
}
CRASH_HINT = ("a native crash: a kernel built for another GPU or CPU, a driver mismatch, or a corrupt file mapped "
              "into memory; " + _BACKTRACE)
OOM_HOST_HINT = ("the kernel's OOM killer ended it: the host, or the server's cgroup limit (memory.max, "
                 "MemoryMax=, a container's memory limit), ran out of memory, not the GPU: give it more host "
                 "memory or a higher limit, or load less at once (fewer workers, a smaller model, no weights "
                 "copy in RAM)")
KILLED_HINT = ("something outside killed it with SIGKILL (an orchestrator, a person, or the kernel's OOM "
               "killer where its traces cannot be read here: check `journalctl -k` / `dmesg` for \"Killed "
               "process\")")


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def exit_signal(code: int | None) -> str | None:
    """The name of the signal a Popen-style exit code says the process died of, if any."""
    return signal_name(-code) if code is not None and code < 0 else None


def describe_exit(code: int | None) -> str:
    """``died of SIGSEGV (signal 11)``, ``exited with code 1``, or the not-our-child phrase."""
    if code is None:
        return NOT_OUR_CHILD
    if code < 0:
        return f"died of {signal_name(-code)} (signal {-code})"
    return f"exited with code {code}"


def crash_hint(name: str) -> str:
    return CRASH_HINTS.get(name, CRASH_HINT)


def wait_status_code(status: int) -> int | None:
    """A raw wait status (``/proc/PID/stat``'s exit_code field) as a Popen-style code; None when it says
    neither an exit nor a signal."""
    if (status & 0x7F) == 0:
        return (status >> 8) & 0xFF
    if (status & 0x7F) != 0x7F:
        return -(status & 0x7F)
    return None
