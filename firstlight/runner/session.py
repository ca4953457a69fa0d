"""One watch from start to verdict: launch or attach, run the samplers and the ladder, feed the judge, report,
and stop the server when it must stop.

Threads: each sampler, each log source and the ladder run on their own clocks and only put observations on
one queue; this module's loop is the only reader, the only caller of the judge and the only one that decides
what to do with the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import psutil

from firstlight.config import Config
from firstlight.engines import get_profile, new_detector
from firstlight.engines.profile import EngineProfile
from firstlight.history.store import History, HistoryError
from firstlight.judge import READY, Assessment, Event, Evidence, Judge, is_access_line
from firstlight.probes.ladder import Ladder, split_url
from firstlight.probes.loop import EngineIdentified, LadderLoop
from firstlight.redact import Redactor
from firstlight.report.base import Reporter
from firstlight.runner.after_ready import compare_and_record, deployment_key, open_history, post_ready_checks
from firstlight.runner.guard import RecordFile, guard_reporter, install_stop_handlers
from firstlight.runner.launcher import LaunchError, ServerProcess
from firstlight.samplers.base import Sampler
from firstlight.samplers.gpu import GpuSampler
from firstlight.samplers.logs import FileFollower, PipeReader
from firstlight.samplers.ports import accepts, foreign_listener
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.samplers.weights import model_path_from_command, resolve_model_dir, total_weight_bytes
from firstlight.timeline import (
    Interrupted,
    Level,
    LogLine,
    Observation,
    Probe,
    ProcessSample,
    SourceNote,
    Started,
    WeightsTotal,
)
from firstlight.vocab import EXIT_CODES, EXIT_INTERNAL, EXIT_REGRESSION, EXIT_USAGE  # noqa: F401 (re-exported)


@dataclass
class Outcome:
    verdict: str
    exit_code: int
    summary: dict[str, Any]
    assessment: Assessment | None = None
    server_pid: int | None = None
    requests: dict[str, int] = field(default_factory=dict)


class Session:
    def __init__(self, cfg: Config, profile: EngineProfile, reporter: Reporter, redactor: Redactor | None = None,
                 record: IO[str] | None = None, clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.profile = profile
        self.reporter = guard_reporter(reporter)  # a closed output silences its reporter, never the run
        self.redactor = redactor or Redactor()
        self.redactor.add_from_url(cfg.probe.url)
        self.record = RecordFile(record, self.reporter.message) if record is not None else None
        self.port_conflict: str | None = None  # evidence that another process holds the server's port
        self._port_owned = False
        self._released = False  # the server is handed over (--detach, --keep-on-failure): never stop it
        self.clock = clock
        self.q: queue.Queue[Observation] = queue.Queue()
        self.server: ServerProcess | None = None
        self.server_log: Path | None = None
        self.samplers: list[Sampler] = []
        self.followers: list[FileFollower] = []
        self.readers: list[PipeReader] = []
        self.history: History | None = None
        self.ladder_loop: LadderLoop | None = None
        # Engine not named and not told by the command: learn it from the server's own lines.
        self.detector = new_detector() if cfg.engine is None and profile.name == "generic" else None

    # -- plumbing ----------------------------------------------------------------------------------------
    def _sink(self, obs: Observation) -> None:
        self.q.put(self.redactor.observation(obs))

    def _echo(self, stream: str, text: str) -> None:
        self.reporter.server_line(stream, self.redactor.text(text))

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.q.put(Interrupted(self.clock(), signal.Signals(signum).name))

    # -- the run -----------------------------------------------------------------------------------------
    def run(self) -> Outcome:
        started_at = self.clock()
        self.history = history = open_history(self.cfg, self.redactor, self.reporter.message)
        command = self.cfg.command or self.cfg.watched_command
        if self.cfg.judge.expected_total_s is None:
            self._expect_from_history()
        judge = Judge(self.cfg.judge, self.profile, started_at)
        restore_handlers = install_stop_handlers(self._on_signal)
        try:
            launch_error = self._start_sources()
            pid = self.server.pid if self.server else self.cfg.pid
            shown = self.redactor.argv(self.cfg.command) if self.cfg.command else None
            self.reporter.started({"started_at": started_at, "pid": pid, "launched": self.server is not None,
                                   "engine": self.profile.name, "url": self.redactor.text(self.cfg.probe.url),
                                   "command": " ".join(shown) if shown else None})
            self._feed(judge, self.redactor.observation(Started(started_at, pid, self.cfg.probe.url, self.profile.name,
                                                                launched=self.server is not None)))
            if pid is None and not self.cfg.command:
                self._feed(judge, SourceNote(started_at, "process", "no --pid: without the process tree's reads and "
                                             "CPU a slow start cannot be told from a hung one; only --timeout ends "
                                             "the wait"))
            if launch_error is not None:
                outcome = self._finish_launch_error(judge, started_at, launch_error)
                outcome.summary = self.redactor.data(outcome.summary)
                self.reporter.verdict(outcome.summary)
                self.reporter.summary(outcome.summary)
                return outcome
            a = self._loop(judge)
            summary = self._summary(judge, a, started_at)
            if self.port_conflict is not None:
                summary.update(verdict="failed", failure="port_in_use",
                               hint="another server already answers on this port: stop it or pick another port",
                               evidence=[Evidence("port", self.port_conflict, self.clock()).to_dict()])
            summary = self.redactor.data(summary)
            outcome = Outcome(summary["verdict"], EXIT_CODES[summary["verdict"]], summary, a, pid,
                              dict(self._requests()))
            self.reporter.verdict(summary)
            if a.verdict == READY:
                interrupted = self._post_ready(summary)
                if interrupted is not None:
                    summary.update(verdict="interrupted", evidence=[Evidence(
                        "signal", f"{interrupted.signal} received during the checks after READY",
                        interrupted.t).to_dict()])
                    outcome = Outcome("interrupted", EXIT_CODES["interrupted"], summary, a, pid, outcome.requests)
            if history is not None:
                history.set_busy_timeout(1.0)  # a locked history must not hold up stopping the server
                try:
                    self._remember(history, command, summary, outcome)
                except HistoryError as e:
                    self.reporter.message(f"warning: run not recorded in the history: {e}")
            outcome = self._after_verdict(judge, outcome)
            self.reporter.summary(outcome.summary)  # always the last line
            return outcome
        except BaseException:  # a bug, or an output that failed: the server must not outlive the run
            if self.server is not None and not self._released:
                self.server.stop(self.cfg.grace)
            raise
        finally:
            self._stop_sources()
            restore_handlers()
            if self.record is not None:
                self.record.close()

    def _start_sources(self) -> str | None:
        cfg = self.cfg
        if cfg.command and self._port_taken():
            return None
        if cfg.command:
            output = None
            if cfg.after_ready == "detach":
                fd, name = tempfile.mkstemp(prefix="firstlight-server-", suffix=".log")
                os.close(fd)
                output = self.server_log = Path(name)
            # --detach and --keep-on-failure may hand the server over: no parent-death signal for those
            self.server = ServerProcess(cfg.command, output=output,
                                        detachable=cfg.after_ready == "detach" or cfg.keep_on_failure)
            try:
                self.server.start()
            except LaunchError as e:
                self.server = None
                return str(e)
            assert self.server.popen is not None
            if output is None:
                echo = self._echo if cfg.echo_server_output else None
                for pipe, name in ((self.server.popen.stdout, "stdout"), (self.server.popen.stderr, "stderr")):
                    assert pipe is not None
                    reader = PipeReader(pipe, name, self._sink, echo, self.clock, backlog=self.q.qsize)
                    reader.start()
                    self.readers.append(reader)
            else:
                f = FileFollower(output, self._sink, clock=self.clock, from_start=True, backlog=self.q.qsize,
                                 echo=self._echo if cfg.echo_server_output else None)
                f.start()
                self.followers.append(f)
        if cfg.log_file is not None:
            f = FileFollower(cfg.log_file, self._sink, clock=self.clock, backlog=self.q.qsize,
                             from_start=cfg.log_from_start, since=self._watched_start())
            f.start()
            self.followers.append(f)
        pid = self.server.pid if self.server else cfg.pid
        if pid is not None:
            if self.server is not None:
                self.samplers.append(ProcessTreeSampler(pid, cfg.sample_interval, self.server.poll, self.clock,
                                                        self.server.descendants, self.server.note_left_group))
            else:
                self.samplers.append(ProcessTreeSampler(pid, cfg.sample_interval, None, self.clock))
        self.samplers.append(GpuSampler(cfg.sample_interval, clock=self.clock))
        for s in self.samplers:
            s.start(self._sink)
        threading.Thread(target=self._weights, name="firstlight-weights", daemon=True).start()
        ladder = Ladder(cfg.probe, self.clock)
        self.ladder_loop = LadderLoop(ladder, self._sink, cfg.probe.min_interval, cfg.probe.max_interval,
                                      identify=self.detector is not None)
        self.ladder_loop.start()
        return None

    def _port_taken(self) -> bool:
        """Before the launch: a port that already accepts connections belongs to another server."""
        try:
            host, port = split_url(self.cfg.probe.url)
        except ValueError:
            return False
        if host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0") or not accepts(host, port):
            return False
        held = foreign_listener([], port, self.clock() + 1)
        self.port_conflict = held or f"port {port} already accepts connections before the launch"
        return True

    def _check_port_owner(self) -> None:
        """While watching a launched server: an open port counts only if the server's tree listens on it."""
        if self._port_owned or self.server is None or self.port_conflict is not None:
            return
        try:
            _, port = split_url(self.cfg.probe.url)
        except ValueError:
            return
        held = foreign_listener(self.server.tree(), port, self.server.launched_at)
        if held is None:
            self._port_owned = True
        else:
            self.port_conflict = held

    def _watched_start(self) -> float | None:
        if self.cfg.pid is None:
            return None
        try:
            return float(psutil.Process(self.cfg.pid).create_time())
        except psutil.Error:
            return None

    def _weights(self) -> None:
        model = str(self.cfg.model_path) if self.cfg.model_path else model_path_from_command(self.cfg.command)
        if not model:
            return
        path = resolve_model_dir(model)
        if path is None:
            self._sink(SourceNote(self.clock(), "weights", f"model {model!r} is not a local path; "
                                                           "weights fraction unavailable"))
            return
        try:
            total, files = total_weight_bytes(path)
        except OSError as e:
            self._sink(SourceNote(self.clock(), "weights", f"cannot size {path}: {e.strerror}"))
            return
        if files:
            self._sink(WeightsTotal(self.clock(), total, files, str(path)))

    def _requests(self) -> dict[str, int]:
        return dict(self.ladder_loop.ladder.requests) if self.ladder_loop else {}

    def _feed(self, judge: Judge, obs: Observation) -> None:
        if isinstance(obs, EngineIdentified):  # for the session, not the judge's timeline
            if self.detector is not None:
                self._use_engine(judge, obs.engine, f"engine identified by its endpoints ({obs.how}): "
                                                    f"{obs.engine}", obs.t)
            return
        if self.record is not None:
            self.record.write(json.dumps(obs.to_dict(), default=str) + "\n")
        if isinstance(obs, Probe) and obs.level == Level.PORT and obs.ok:
            self._check_port_owner()
        if self.detector is not None and isinstance(obs, LogLine):
            self._detect(judge, obs)
        events = judge.feed(obs)
        a = judge.assess(obs.t) if events else None
        for ev in events:
            assert a is not None
            self.reporter.event(ev, a)
        if isinstance(obs, LogLine) and self.ladder_loop and not is_access_line(obs.text):
            self.ladder_loop.wake.set()

    def _detect(self, judge: Judge, line: LogLine) -> None:
        assert self.detector is not None
        self.detector.feed(line.text)
        name = self.detector.best()
        if name is None:
            if self.detector.lines > 2000:
                self.detector = None
            return
        self._use_engine(judge, name, f"engine detected from its log lines: {name}", line.t)

    def _use_engine(self, judge: Judge, name: str, message: str, t: float) -> None:
        self.detector = None
        self.profile = judge.profile = get_profile(name)
        self._expect_from_history()  # the deployment key names the engine: look again now it is known
        if self.ladder_loop is not None and self.cfg.probe.health_path == get_profile("generic").endpoints.health:
            ep = self.profile.endpoints
            self.ladder_loop.ladder.use_endpoints(ep.health, ep.models, ep.completions, ep.chat)
        self.reporter.event(Event(t, "note", message), judge.assess(t))

    def _loop(self, judge: Judge) -> Assessment:
        while True:
            try:
                obs: Observation | None = self.q.get(timeout=0.05)
            except queue.Empty:
                obs = None
            assess_by = time.monotonic() + 0.05  # a flood of lines must not hold off the verdict's checks
            while obs is not None:
                if isinstance(obs, ProcessSample) and not obs.alive:
                    obs = self._after_logs(judge, obs)
                self._feed(judge, obs)
                if time.monotonic() > assess_by:
                    break
                try:
                    obs = self.q.get_nowait()
                except queue.Empty:
                    obs = None
            a = judge.assess(self.clock())
            self.reporter.status(a)
            if a.final or self.port_conflict is not None:
                return a

    def _after_logs(self, judge: Judge, exit_sample: ProcessSample) -> ProcessSample:
        """The process is gone, but its last lines (often the root cause) may still be in a pipe or a file:
        read them all before the judge hears of the exit."""
        for r in self.readers:
            r.thread.join(timeout=2.0)
        for f in self.followers:
            f.sync(timeout=2.0)
        for obs in self._drain():
            if isinstance(obs, LogLine):
                self._feed(judge, obs)
            else:
                self.q.put(obs)  # the rest waits for the loop, after the exit
        return exit_sample

    def _drain(self) -> list[Observation]:
        """Everything queued right now."""
        out: list[Observation] = []
        while True:
            try:
                out.append(self.q.get_nowait())
            except queue.Empty:
                return out

    def _stop_sources(self) -> None:
        if self.ladder_loop is not None:
            self.ladder_loop.stop.set()
            self.ladder_loop.wake.set()
        for s in self.samplers:
            s.stop()
        for f in self.followers:
            f.stop()

    # -- after the verdict -------------------------------------------------------------------------------
    def _after_verdict(self, judge: Judge, outcome: Outcome) -> Outcome:
        server = self.server
        if server is None:
            return outcome
        if outcome.verdict == "interrupted":
            self._stop_server(outcome)
            return outcome
        if outcome.verdict == READY:
            if self.cfg.after_ready == "stop":
                self._stop_server(outcome)
                return outcome
            if self.cfg.after_ready == "detach":
                self._released = True
                server.release()
                self.reporter.message(f"detached: server pid {server.pid} keeps running; its output goes to "
                                      f"{self.server_log}; stop it with: kill -TERM -- -{server.pid}")
                return outcome
            return self._supervise(judge, outcome)
        if self.cfg.keep_on_failure:
            self._released = True
            server.release()
            self.reporter.message(f"--keep-on-failure: server left running, pid {server.pid}, process group "
                                  f"{server.pid}; stop it with: kill -TERM -- -{server.pid}")
            return outcome
        self._stop_server(outcome)
        return outcome

    def _post_ready(self, summary: dict[str, Any]) -> Interrupted | None:
        """Warm-up and benchmark in a thread, so that a SIGINT/SIGTERM meanwhile is honoured at once (the
        server is then stopped and the benchmark's requests end on their own)."""
        if not (self.cfg.after.warmup or self.cfg.after.bench):
            return None
        model = self.ladder_loop.ladder.model if self.ladder_loop else None
        results: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: results.update(
            post_ready_checks(self.cfg, self.profile, model, self.reporter.message)), daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.1)
            for obs in self._drain():
                if isinstance(obs, Interrupted):
                    return obs
        summary.update(results)
        return None

    def _expect_from_history(self) -> None:
        """The whole-start ETA: the median time to READY of this deployment's previous good starts."""
        if self.history is None:
            return
        key = deployment_key(self.cfg, self.profile, self.cfg.command or self.cfg.watched_command, self.redactor)
        with contextlib.suppress(HistoryError):
            expected = self.history.expected_start_seconds(key)
            if expected is not None:
                self.cfg.judge.expected_total_s = expected

    def _remember(self, history: History, command: list[str], summary: dict[str, Any], outcome: Outcome) -> None:
        """Compare with this deployment's baseline, record the run; a regression is a verdict of its own."""
        key = deployment_key(self.cfg, self.profile, command, self.redactor)
        compare_and_record(history, key, "up" if self.cfg.command else "watch", summary, self.cfg.history.margin)
        if summary.get("regression"):
            summary["verdict"] = "regression"
            for r in summary["regression"]:
                self.reporter.message(f"REGRESSION: {r['message']}")
            if self.cfg.history.fail_on_regression:
                outcome.exit_code = EXIT_REGRESSION

    def _stop_server(self, outcome: Outcome) -> None:
        assert self.server is not None
        how = self.server.stop(self.cfg.grace)
        self.reporter.message(f"server process group {self.server.pid}: {how}")
        outcome.summary["server_stopped"] = how

    def _supervise(self, judge: Judge, outcome: Outcome) -> Outcome:
        """Stay in the foreground after READY: forward a stop to the server, report if it dies."""
        assert self.server is not None
        self.reporter.summary(outcome.summary)  # READY now, for scripts; a final summary follows when serving ends
        self.reporter.message(f"supervising server pid {self.server.pid}; Ctrl-C or SIGTERM stops it")
        ready_at = outcome.summary["ready_at"]
        while True:
            code = self.server.poll()
            if code is not None:
                now = self.clock()
                s = dict(outcome.summary)
                s.update(verdict="failed", phase="serving", failure="other", ended_at=now,
                         hint="the server exited after it was serving; read its last log lines",
                         evidence=[Evidence("process", f"server exited with code {code} after serving for "
                                                       f"{now - ready_at:.0f}s", now).to_dict()])
                return Outcome("failed", EXIT_CODES["failed"], s, outcome.assessment, self.server.pid,
                               outcome.requests)
            try:
                obs = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(obs, Interrupted):
                s = dict(outcome.summary)
                s.update(verdict="interrupted", ended_at=self.clock(),
                         evidence=[Evidence("signal", f"{obs.signal} received while serving", obs.t).to_dict()])
                out = Outcome("interrupted", EXIT_CODES["interrupted"], s, outcome.assessment, self.server.pid,
                              outcome.requests)
                self._stop_server(out)
                return out

    def _finish_launch_error(self, judge: Judge, started_at: float, error: str) -> Outcome:
        now = self.clock()
        a = judge.assess(now)
        summary = self._summary(judge, a, started_at)
        summary.update(verdict="failed", failure="other", hint="check the command: the executable must exist",
                       evidence=[Evidence("process", error, now).to_dict()])
        return Outcome("failed", EXIT_CODES["failed"], summary, a)

    def _cold_start(self, judge: Judge, started_at: float) -> float | None:
        """Seconds from the server's start to READY: from the launch, or from the watched process's birth."""
        if judge.ready_at is None:
            return None
        if self.server is not None:
            return judge.ready_at - started_at
        if self.cfg.pid is not None:
            with contextlib.suppress(psutil.Error):
                return judge.ready_at - psutil.Process(self.cfg.pid).create_time()
        return None

    def _summary(self, judge: Judge, a: Assessment, started_at: float) -> dict[str, Any]:
        phases = judge.phases_dicts()
        return {
            "cold_start_s": self._cold_start(judge, started_at),
            "verdict": a.verdict,
            "phase": a.phase,
            "detail": a.detail,
            "failure": a.failure,
            "hint": a.hint,
            "evidence": [e.to_dict() for e in a.evidence],
            "started_at": started_at,
            "ready_at": judge.ready_at,
            "ended_at": started_at + a.elapsed_s,
            "elapsed_s": round(a.elapsed_s, 3),
            "level": a.level.label,
            "levels": {lv.label: t for lv, t in sorted(judge.level_since.items())},
            "phases": phases,
            "first_generation": judge.first_generation,
            "engine": self.profile.name,
            "engine_ready_at": judge.engine_ready.t if judge.engine_ready else None,
            "url": self.cfg.probe.url,
            "pid": self.server.pid if self.server else self.cfg.pid,
            "command": self.redactor.argv(self.cfg.command) if self.cfg.command else None,
            "progress": a.progress.to_dict(),
            "requests": self._requests(),
            "notes": [n.message if n.source in n.message else f"{n.source}: {n.message}" for n in judge.notes],
            "server_log": str(self.server_log) if self.server_log else None,
        }

