"""What happens to a launched server once the verdict is in: one small strategy per choice.

- ``StopServer``: stop it (a failed or hung start, ``--stop-when-ready``, an interrupt);
- ``Detach``: leave it serving and say how to stop it (``--detach``);
- ``KeepOnFailure``: leave a failed or hung server running for inspection (``--keep-on-failure``);
- ``Supervise``: stay in the foreground while it serves; forward a stop signal; report when it dies.

A regression is a finding about a server that serves: it is supervised, detached or stopped exactly like a
``ready`` one.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from firstlight.config import Config
from firstlight.result import RunResult
from firstlight.runner.launcher import ServerProcess
from firstlight.runner.serving import ServingWatch
from firstlight.timeline import Interrupted, Observation
from firstlight.vocab import INTERRUPTED

Say = Callable[[str], None]


@dataclass
class Context:
    server: ServerProcess
    cfg: Config
    say: Say
    q: queue.Queue[Observation]
    clock: Callable[[], float]
    server_log: str | None = None
    on_serving: Callable[[RunResult], None] | None = None  # told the READY result before supervision starts
    serving: Callable[[RunResult], ServingWatch] | None = None  # the serving checks while supervising
    oom: Callable[[], tuple[str, ...]] = lambda: ()  # OOM-kill traces since the watch began (cgroup, kernel log)


class Policy(Protocol):
    def apply(self, ctx: Context, result: RunResult) -> RunResult: ...


class StopServer:
    def apply(self, ctx: Context, result: RunResult) -> RunResult:
        how = ctx.server.stop(ctx.cfg.grace)
        ctx.say(f"server process group {ctx.server.pid}: {how}")
        return result.stopped(how)


class Detach:
    def apply(self, ctx: Context, result: RunResult) -> RunResult:
        ctx.server.release()  # the watchdog leaves it alone when firstlight exits
        ctx.say(f"detached: server pid {ctx.server.pid} keeps running; its output goes to {ctx.server_log}; "
                f"stop it with: {ctx.server.how_to_stop}")
        return result


class KeepOnFailure:
    def apply(self, ctx: Context, result: RunResult) -> RunResult:
        ctx.server.release()  # the watchdog leaves it alone when firstlight exits
        ctx.say(f"--keep-on-failure: server left running, pid {ctx.server.pid}, process group {ctx.server.pid}; "
                f"stop it with: {ctx.server.how_to_stop}")
        return result


class Supervise:
    """Stay in the foreground after READY: run the serving checks, forward a stop to the server, report if it
    dies. A launcher that exits 0 and leaves the real server running as a daemon (it left the process group) is
    supervised through that daemon: serving ends when the daemon does."""

    poll_s = 0.2

    def apply(self, ctx: Context, result: RunResult) -> RunResult:
        if ctx.on_serving is not None:
            ctx.on_serving(result)  # READY now, for scripts; a final summary follows when serving ends
        ctx.say(f"supervising server pid {ctx.server.pid}; Ctrl-C or SIGTERM stops it")
        watch = ctx.serving(result) if ctx.serving is not None else None
        if watch is not None:
            watch.start()
        try:
            return self._supervise(ctx, result, watch)
        finally:
            if watch is not None:
                watch.stop()

    def _supervise(self, ctx: Context, result: RunResult, watch: ServingWatch | None) -> RunResult:
        daemon: list[int] = []
        while True:
            code = ctx.server.poll()
            if code is not None and not self._daemon_lives(ctx, code, daemon):
                if daemon:  # the daemon's own end, not its launcher's exit 0 (None: not ours to reap)
                    code = ctx.server.exit_of(daemon)
                died = result.died_serving(code, ctx.clock(), ctx.oom())
                # What is left of it goes too: workers still in its group or that left it (GPU memory a next
                # start needs), its watchdog, and this process's subreaper flag (the API's caller lives on)
                how = ctx.server.stop(ctx.cfg.grace)
                ctx.say(f"server process group {ctx.server.pid}: {how}")
                return died.stopped(how)
            if watch is not None:
                watch.step()
            try:
                obs = ctx.q.get(timeout=self.poll_s)
            except queue.Empty:
                continue
            if isinstance(obs, Interrupted):
                code = ctx.server.poll()
                if code is not None and not self._daemon_lives(ctx, code, daemon):
                    continue  # it died before the stop came (a kill, then Ctrl-C): its death is the verdict
                return StopServer().apply(ctx, result.interrupted(obs.signal, obs.t, "while serving"))

    @staticmethod
    def _daemon_lives(ctx: Context, code: int, daemon: list[int]) -> bool:
        """The launcher exited 0 after READY and left the server running (it daemonized): say so once."""
        alive = ctx.server.daemon_serving() if code == 0 else []
        if alive and not daemon:
            daemon.extend(p.pid for p in alive)
            ctx.say(f"the launcher (pid {ctx.server.pid}) exited 0 and left the server running as pid "
                    f"{', '.join(map(str, daemon))}: supervising that; it is stopped with firstlight")
        return bool(alive)


def choose(cfg: Config, result: RunResult) -> Policy:
    if result.verdict == INTERRUPTED:
        return StopServer()
    if result.serving:
        if cfg.after_ready == "stop":
            return StopServer()
        return Detach() if cfg.after_ready == "detach" else Supervise()
    return KeepOnFailure() if cfg.keep_on_failure else StopServer()
