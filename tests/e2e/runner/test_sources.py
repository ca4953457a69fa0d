"""The sources of one watch in process, on real files, processes and loopback sockets: the weights sized before
the launch (or why not), a port already held (nothing launched), a command that cannot start, a detached
server's output through its log file, a watched process's log read from its start, the engine's own stream in
router mode, the process sampler and its back-off, the port's owner checked once it answers, what the samplers
and rungs report, and a nudge on a change."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from firstlight.config import Config, JudgeConfig, ProbeConfig
from firstlight.engines.profile import Endpoints
from firstlight.runner import sources as sources_module
from firstlight.runner.launcher import ServerProcess
from firstlight.runner.sources import WEIGHTS_WAIT_S, Sources, server_command
from firstlight.samplers.base import idle_cap
from firstlight.samplers.logs import FileFollower
from firstlight.samplers.models_sse import ModelsSSE
from firstlight.samplers.oom import OomTraces
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.sim.fixtures import free_port, make_weights
from firstlight.timeline import Level, LogLine, Observation, Probe, SourceNote, WeightsTotal
from tests.support.common import wait_for
from tests.support.oom_traces import _cgroup

CHECK_S = 60  # deadlines far above what each wait needs


class Seen:
    """The sink: every observation, from whichever thread."""

    def __init__(self) -> None:
        self.items: list[Observation] = []
        self.lock = threading.Lock()

    def __call__(self, obs: Observation) -> None:
        with self.lock:
            self.items.append(obs)

    def of(self, kind: type) -> list[Observation]:
        with self.lock:
            return [o for o in self.items if isinstance(o, kind)]


@contextlib.contextmanager
def sources(cfg: Config, identify: bool = False) -> Iterator[tuple[Sources, Seen]]:
    seen = Seen()
    s = Sources(cfg, seen, lambda stream, text: None, identify=identify)
    try:
        yield s, seen
    finally:
        s.stop()
        if s.server is not None:  # stopped, reaped, and its watchdog with it, whether it still ran or not
            s.server.stop(5.0)


def url() -> str:
    return f"http://127.0.0.1:{free_port()}"


SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


# -- the weights, sized before the launch ------------------------------------------------------------------

def test_local_weights_are_sized_with_their_page_cache_residency_and_mount(tmp_path: Path) -> None:
    make_weights(tmp_path / "m", 4 << 20, shards=2)
    with sources(Config(model_path=tmp_path / "m", probe=ProbeConfig(url=url()))) as (s, seen):
        s._size_weights()
    (w,) = seen.of(WeightsTotal)
    assert isinstance(w, WeightsTotal)
    assert (w.bytes, w.files, w.path) == (4 << 20, 2, str(tmp_path / "m"))
    assert w.resident is not None and 0 <= w.resident <= w.bytes and w.fstype != ""


def test_the_model_the_command_names_is_sized_when_it_is_a_local_path(tmp_path: Path) -> None:
    make_weights(tmp_path / "m", 1 << 20, shards=1)
    cmd = ["vllm", "serve", str(tmp_path / "m")]
    with sources(Config(watched_command=cmd, engine="vllm", probe=ProbeConfig(url=url()))) as (s, seen):
        s._size_weights()
    (w,) = seen.of(WeightsTotal)
    assert isinstance(w, WeightsTotal) and w.path == str(tmp_path / "m") and w.files == 1


def test_a_model_that_is_no_local_path_is_a_note(tmp_path: Path) -> None:
    cmd = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    with sources(Config(watched_command=cmd, engine="vllm", probe=ProbeConfig(url=url()))) as (s, seen):
        s._size_weights()
    assert [(n.source, n.message) for n in seen.of(SourceNote)] == [  # type: ignore[attr-defined]
        ("weights", "model 'meta-llama/Llama-3.1-8B-Instruct' is not a local path; weights fraction unavailable")]
    assert seen.of(WeightsTotal) == []


def test_a_model_inside_a_container_image_is_a_note() -> None:
    cmd = ["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.6.0", "--model", "/models/llama"]
    with sources(Config(watched_command=cmd, probe=ProbeConfig(url=url()))) as (s, seen):
        s._size_weights()
    notes = [n.message for n in seen.of(SourceNote)]  # type: ignore[attr-defined]
    assert notes == ["model '/models/llama' is inside the container vllm/vllm-openai:v0.6.0 (no bind mount holds "
                     "it); weights fraction unavailable"]


def test_a_model_in_a_bind_mount_is_sized_on_the_host(tmp_path: Path) -> None:
    make_weights(tmp_path / "llama", 1 << 20, shards=1)
    cmd = ["docker", "run", "--gpus", "all", "-v", f"{tmp_path}:/models", "vllm/vllm-openai:v0.6.0", "--model",
           "/models/llama"]
    with sources(Config(watched_command=cmd, probe=ProbeConfig(url=url()))) as (s, seen):
        s._size_weights()
    (w,) = seen.of(WeightsTotal)
    assert isinstance(w, WeightsTotal) and w.path == str(tmp_path / "llama") and w.bytes == 1 << 20


def test_no_model_named_is_no_observation() -> None:
    with sources(Config(watched_command=["python", "serve.py"], probe=ProbeConfig(url=url()))) as (s, seen):
        s._size_weights()
    assert seen.items == []


def test_an_empty_model_directory_is_no_weights_total(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    with sources(Config(model_path=tmp_path / "m", probe=ProbeConfig(url=url()))) as (s, seen):
        s._size_weights()
    assert seen.of(WeightsTotal) == []


def test_the_weights_are_sized_before_the_launch() -> None:
    """The launch waits for the sizing (bounded by WEIGHTS_WAIT_S): its note is there when start returns."""
    assert WEIGHTS_WAIT_S == 5.0
    cmd = [*SLEEP, "--model", "org/not-local"]
    with sources(Config(command=cmd, probe=ProbeConfig(url=url()), engine="vllm")) as (s, seen):
        assert s.start() is None
        weights = [n for n in seen.of(SourceNote) if n.source == "weights"]  # type: ignore[attr-defined]
        assert len(weights) == 1


# -- the launch ------------------------------------------------------------------------------------------

def test_a_port_that_accepts_connections_before_the_launch_launches_nothing() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        cfg = Config(command=SLEEP, probe=ProbeConfig(url=f"http://127.0.0.1:{port}"))
        with sources(cfg) as (s, _):
            assert s.start() is None
            assert s.server is None and s.pid is None
            assert s.port_conflict is not None and f"port {port}" in s.port_conflict
            assert f"pid {os.getpid()}" in s.port_conflict  # this test holds it, and says who it is
            assert s.check_port_owner() == s.port_conflict


def test_a_remote_or_unparsable_url_is_never_checked_before_the_launch() -> None:
    for u in ("http://10.255.255.1:8000", "not a url:x"):
        with sources(Config(command=SLEEP, probe=ProbeConfig(url=u))) as (s, _):
            assert s._port_taken() is False and s.port_conflict is None


def test_a_command_that_cannot_start_is_the_launch_error() -> None:
    with sources(Config(command=["/nonexistent/vllm", "serve"], probe=ProbeConfig(url=url()))) as (s, _):
        error = s.start()
    assert error == "cannot start '/nonexistent/vllm': No such file or directory" and s.server is None


def test_a_launched_server_is_sampled_as_its_tree_and_its_output_is_read(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import sys, time; print('hello out', flush=True); "
                                 "print('hello err', file=sys.stderr, flush=True); time.sleep(120)"]
    with sources(Config(command=cmd, probe=ProbeConfig(url=url()), sample_interval=0.2)) as (s, seen):
        assert s.start() is None
        assert s.server is not None and s.pid == s.server.pid
        wait_for(lambda: {(o.stream, o.text) for o in seen.of(LogLine)}  # type: ignore[attr-defined]
                 >= {("stdout", "hello out"), ("stderr", "hello err")}, CHECK_S, "both pipes' lines")
        (tree,) = [x for x in s.samplers if isinstance(x, ProcessTreeSampler)]
        assert tree.backoff is not None and s.server_log is None and len(s.readers) == 2
        names = [st.name for st in s.collector_stats()]
        assert names[:2] == [tree.name, "gpu"] and len(names) > 2  # then each readiness rung


def test_a_detached_server_writes_to_a_log_file_that_is_followed(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import time; print('to the file', flush=True); time.sleep(120)"]
    with sources(Config(command=cmd, probe=ProbeConfig(url=url()), after_ready="detach")) as (s, seen):
        try:
            assert s.start() is None
            assert s.server_log is not None and s.readers == [] and len(s.followers) == 1
            wait_for(lambda: any(o.text == "to the file" for o in seen.of(LogLine)),  # type: ignore[attr-defined]
                     CHECK_S, "the server's line through its log file")
        finally:
            if s.server is not None and s.server.popen is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(s.server.pid, signal.SIGKILL)
                s.server.popen.wait(CHECK_S)  # reaped: never a stray child for whoever waits next
            if s.server_log is not None:
                s.server_log.unlink(missing_ok=True)


def test_the_port_is_the_launched_servers_once_its_tree_listens(tmp_path: Path) -> None:
    port = free_port()
    code = f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(120)"
    cfg = Config(command=[sys.executable, "-c", code], probe=ProbeConfig(url=f"http://127.0.0.1:{port}"))
    with sources(cfg) as (s, _):
        assert s.start() is None
        assert s.server is not None
        wait_for(lambda: psutil.Process(s.server.pid).net_connections(), CHECK_S,  # type: ignore[union-attr]
                 "the server to listen")
        assert s.check_port_owner() is None and s._port_owned
        assert s.check_port_owner() is None  # owned: never looked up again


# -- a watched server --------------------------------------------------------------------------------------

def test_a_watched_processs_log_is_read_from_the_processs_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO Loading model weights\n")
    cfg = Config(pid=os.getpid(), log_file=log, log_from_start=True, probe=ProbeConfig(url=url()))
    with sources(cfg) as (s, seen):
        assert s.start() is None
        assert s._watched_start() == psutil.Process().create_time()
        wait_for(lambda: seen.of(LogLine), CHECK_S, "the log's line")
        assert [o.text for o in seen.of(LogLine)] == ["INFO Loading model weights"]  # type: ignore[attr-defined]
        assert s.server is None and s.readers == [] and s.pid == os.getpid()
        (tree,) = [x for x in s.samplers if isinstance(x, ProcessTreeSampler)]
        assert tree.pid == os.getpid() and s.oom is not None


def test_without_a_pid_nothing_samples_processes() -> None:
    with sources(Config(probe=ProbeConfig(url=url()))) as (s, _):
        assert s.process_sampler() is None and s.oom is None and s.oom_evidence() == ()
        assert s._watched_start() is None
        assert s.requests() == {} and s.model is None  # no ladder yet
        assert s.start() is None
        assert [type(x).__name__ for x in s.samplers] == ["GpuSampler"]


def test_a_pid_that_is_gone_has_no_start_time() -> None:
    cfg = Config(pid=2_000_000_000, probe=ProbeConfig(url=url()))
    with sources(cfg) as (s, _):
        assert s._watched_start() is None


@pytest.mark.parametrize(("argv", "env", "streams"), [
    (["llama-server", "--models-dir", "/models"], {}, 1),
    (["llama-server", "--models-preset=/p.ini"], {}, 1),
    (["llama-server", "-m", "/models/a.gguf"], {}, 0),
    (["llama-server"], {"LLAMA_ARG_MODELS_DIR": "/models"}, 1),
])
def test_llama_servers_router_mode_starts_its_models_stream(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                                            env: dict[str, str], streams: int) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    base = url()
    with sources(Config(command=argv, probe=ProbeConfig(url=base + "/v1", api_key="k"))) as (s, _):
        s._engine_streams()
        assert len(s.streams) == streams
        if streams:
            assert isinstance(s.streams[0], ModelsSSE) and s.streams[0].url == base + "/models/sse"
            assert s.streams[0].api_key == "k" and s.streams[0] in s.running


def test_a_watched_commands_environment_is_unknown_so_its_router_env_is_not_ours(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMA_ARG_MODELS_DIR", "/models")
    with sources(Config(watched_command=["llama-server"], probe=ProbeConfig(url=url()))) as (s, _):
        s._engine_streams()
        assert s.streams == []


def test_the_server_command_is_read_in_this_environment_only_when_launched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_PORT", "1")
    monkeypatch.setenv("LLAMA_ARG_MODEL", "/env/model.gguf")
    launched = server_command(Config(command=["llama-server"], engine="llamacpp"))
    watched = server_command(Config(watched_command=["llama-server"], engine="llamacpp"))
    assert launched.model == "/env/model.gguf" and watched.model is None


# -- while running -----------------------------------------------------------------------------------------

class CountingSampler:
    name = "counting"

    def __init__(self) -> None:
        self.nudges = 0

    def nudge(self) -> None:
        self.nudges += 1


def test_a_rung_that_answers_differently_nudges_the_samplers_and_every_probe_reaches_the_sink() -> None:
    with sources(Config(probe=ProbeConfig(url=url()), judge=JudgeConfig())) as (s, seen):
        counter = CountingSampler()
        s.samplers = [counter]  # type: ignore[list-item]
        probes = [Probe(1.0, Level.PORT, False, "refused"), Probe(2.0, Level.PORT, False, "refused"),
                  Probe(3.0, Level.PORT, True, "ok"), Probe(4.0, Level.HEALTH, True, "200")]
        for p in probes:
            s._probed(p)
        assert counter.nudges == 3  # the port's first answer, its change, the health rung's first answer
        assert seen.items == probes
        s.new_log_line()  # a log line: a nudge too (and the ladder, not started here, is not woken)
        assert counter.nudges == 4


# -- the launch's choices, the followers' and readers' making, the port's owner, the edges before start ---------

def test_an_oom_kill_in_the_servers_cgroup_is_the_sources_evidence(tmp_path: Path) -> None:
    d = _cgroup(tmp_path, "llm.service", memory_events="oom_kill 0\n")
    with sources(Config(pid=os.getpid(), probe=ProbeConfig(url=url()))) as (s, _):
        assert s.oom_evidence() == ()  # no sampler yet: nothing read
        s.oom = OomTraces(directories=[d], kmsg=tmp_path / "none")
        (d / "memory.events").write_text("oom_kill 1\n")
        assert s.oom_evidence() == (f"{d / 'memory.events'}: oom_kill 0 -> 1",)


@pytest.mark.parametrize(("after_ready", "keep", "detachable"), [
    ("supervise", False, False), ("detach", False, True), ("supervise", True, True), ("stop", True, True),
])
def test_a_server_that_may_be_handed_over_gets_no_parent_death_signal(after_ready: str, keep: bool,
                                                                      detachable: bool) -> None:
    cfg = Config(command=SLEEP, probe=ProbeConfig(url=url()), after_ready=after_ready, keep_on_failure=keep)
    with sources(cfg) as (s, _):
        try:
            assert s.start() is None
            assert s.server is not None and s.server.detachable is detachable
        finally:
            if s.server_log is not None:
                s.server_log.unlink(missing_ok=True)


class EarlyWriter(Sources):
    """A server that wrote its first lines before its log file was followed: its launch returns once they are
    in the file."""

    def make_server(self, output: Path | None, detachable: bool) -> ServerProcess:
        server = super().make_server(output, detachable)
        start = server.start

        def start_and_write() -> None:
            start()
            assert output is not None
            wait_for(lambda: output.read_text() == "early\n", CHECK_S, "the server's first line in its file")

        server.start = start_and_write  # type: ignore[method-assign]
        return server


@pytest.mark.parametrize("echo", [False, True])
def test_a_detached_servers_file_is_followed_from_its_start_echoed_as_asked(echo: bool) -> None:
    cmd = [sys.executable, "-c", "import time; print('early', flush=True); time.sleep(120)"]
    cfg = Config(command=cmd, probe=ProbeConfig(url=url()), after_ready="detach", echo_server_output=echo)
    seen, echoed = Seen(), []
    s = EarlyWriter(cfg, seen, lambda stream, text: echoed.append(text), identify=False, clock=lambda: 42.0,
                    backlog=lambda: 0)
    try:
        assert s.start() is None
        assert s.server_log is not None and s.server_log.parent == Path(tempfile.gettempdir())
        assert s.server_log.name.startswith("firstlight-server-") and s.server_log.suffix == ".log"
        (f,) = s.followers
        assert isinstance(f, FileFollower) and f.delivery.backlog is s.backlog and f.clock() == 42.0
        wait_for(lambda: seen.of(LogLine), CHECK_S, "the first line, written before the file was followed")
        assert [(o.text, o.t) for o in seen.of(LogLine)] == [("early", 42.0)]  # type: ignore[attr-defined]
        wait_for(lambda: echoed or not echo, CHECK_S, "the echo")
        assert echoed == (["early"] if echo else [])
    finally:
        s.stop()
        if s.server is not None:
            s.server.stop(5.0)
        if s.server_log is not None:
            s.server_log.unlink(missing_ok=True)


@pytest.mark.parametrize("echo", [False, True])
def test_a_servers_pipes_are_echoed_only_when_asked(echo: bool) -> None:
    cmd = [sys.executable, "-c", "import time; print('out', flush=True); time.sleep(120)"]
    echoed: list[str] = []
    s = Sources(Config(command=cmd, probe=ProbeConfig(url=url()), echo_server_output=echo), Seen(),
                lambda stream, text: echoed.append(text), identify=False)
    try:
        assert s.start() is None
        assert all((r.delivery.echo is not None) is echo for r in s.readers) and len(s.readers) == 2
    finally:
        s.stop()
        if s.server is not None:
            s.server.stop(5.0)


def test_a_watched_log_is_read_from_the_watched_processs_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO an older run's line\n")
    cfg = Config(pid=os.getpid(), log_file=log, probe=ProbeConfig(url=url()))
    with sources(cfg) as (s, _):
        assert s.start() is None
        (f,) = s.followers
        assert f.since == psutil.Process().create_time() and f.delivery.echo is None  # a --log is never echoed


def test_a_port_held_by_an_older_process_is_the_conflict_once_the_server_runs() -> None:
    port = free_port()
    cfg = Config(command=SLEEP, probe=ProbeConfig(url=f"http://127.0.0.1:{port}"))
    with sources(cfg) as (s, _):
        assert s.start() is None  # nothing held the port before the launch
        holder = socket.socket()
        try:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            holder.bind(("127.0.0.1", port))
            holder.listen()  # this test's process: older than the launch, outside its tree
            evidence = s.check_port_owner()
            assert evidence is not None and evidence.startswith(f"port {port} is held by ") and \
                evidence.endswith("(there before the launch), not by the launched server")
            assert f"pid {os.getpid()}" in evidence and s.port_conflict == evidence
            s.port_conflict = "told before"
            assert s.check_port_owner() == "told before"  # once known, never looked up again
        finally:
            holder.close()


def test_a_watched_server_has_no_launch_to_own_its_port_and_nothing_is_asked_before_start() -> None:
    with sources(Config(pid=os.getpid(), probe=ProbeConfig(url=url()))) as (s, _):
        assert s.check_port_owner() is None
        assert s.collector_stats() == []  # no sampler, no ladder yet
        s.use_endpoints(Endpoints(health="/ping", models=None))  # no ladder yet: nothing to tell
        assert s.start() is None
        endpoints = Endpoints(health="/ping", models=None)
        s.use_endpoints(endpoints)
        assert s.ladder_loop is not None and s.ladder_loop._endpoints is endpoints


def test_the_logs_settle_within_their_bound_while_the_server_still_writes() -> None:
    cmd = [sys.executable, "-c", "import time; print('out', flush=True); time.sleep(120)"]
    with sources(Config(command=cmd, probe=ProbeConfig(url=url()))) as (s, seen):
        assert s.start() is None
        wait_for(lambda: seen.of(LogLine), CHECK_S, "the server's line")
        before = time.monotonic()
        s.settle_logs(0.2)  # the pipes are still open: each reader is waited for 0.2 s, not until they close
        assert time.monotonic() - before < CHECK_S / 2


def test_the_server_command_is_read_as_the_engine_named_on_the_command_line() -> None:
    """--engine decides how a command that does not name its engine (a site's own script) is read."""
    argv = ["/opt/start-server", "-m", "/models/x.gguf", "--model-path", "/m2"]
    assert server_command(Config(command=argv, engine="llamacpp")).model == "/models/x.gguf"
    assert server_command(Config(watched_command=argv, engine="llamacpp")).model == "/models/x.gguf"
    assert server_command(Config(command=argv)).model == "/m2"


def test_the_weights_are_sized_on_a_named_daemon_thread() -> None:
    seen: list[threading.Thread] = []
    with sources(Config(probe=ProbeConfig(url=url()))) as (s, _):
        s._weights = lambda sized: (seen.append(threading.current_thread()), sized.set())  # type: ignore[method-assign]
        assert s.start() is None
        wait_for(lambda: seen, CHECK_S, "the sizing thread")
    assert seen[0].name == "firstlight-weights" and seen[0].daemon  # a hung mount never holds the exit


@pytest.mark.parametrize("identify", [False, True])
def test_the_ladder_asks_the_engines_name_only_when_told_to(identify: bool) -> None:
    with sources(Config(probe=ProbeConfig(url=url())), identify=identify) as (s, _):
        assert s.start() is None
        assert s.ladder_loop is not None and s.ladder_loop.identify is identify


def test_a_launched_servers_sources_are_built_on_the_sessions_clock_interval_and_backlog() -> None:
    def backlog() -> int:
        return 0

    cfg = Config(command=SLEEP, probe=ProbeConfig(url=url()), sample_interval=0.3,
                 judge=JudgeConfig(stall_timeout=40))
    seen = Seen()
    s = Sources(cfg, seen, lambda stream, text: None, identify=False, clock=lambda: 42.0, backlog=backlog)
    try:
        assert s.start() is None
        server = s.server
        assert server is not None
        tree, gpu = s.samplers
        assert isinstance(tree, ProcessTreeSampler) and (tree.pid, tree.interval, tree.clock()) == (server.pid, 0.3,
                                                                                                    42.0)
        assert tree._exit_code == server.poll and tree._descendants == server.descendants
        assert tree._left_group == server.note_left_group and tree._oom is s.oom
        assert s.oom is not None and s.oom.pid == server.pid
        assert tree.backoff is not None and (tree.backoff.base, tree.backoff.cap) == (0.3, idle_cap(40))
        assert (type(gpu).__name__, gpu.interval, gpu.clock()) == ("GpuSampler", 0.3, 42.0)
        assert all(r.delivery.backlog is backlog and r.delivery.clock() == 42.0 for r in s.readers)
        assert s.ladder_loop is not None and s.ladder_loop.ladder.clock() == 42.0
        assert s.ladder_loop.ladder.listener is None  # a server: its checks are real generations
        wait_for(lambda: s._rungs, CHECK_S, "the ladder's first probe, through the rung tracker")
        assert seen.of(Probe)
    finally:
        s.stop()
        if s.server is not None:
            s.server.stop(5.0)


def test_a_watched_workers_ladder_looks_for_its_listener_on_the_urls_port() -> None:
    port = free_port()
    cfg = Config(pid=os.getpid(), probe=ProbeConfig(url=f"http://127.0.0.1:{port}"),
                 judge=JudgeConfig(role="worker"))
    with sources(cfg, identify=True) as (s, _):
        assert s.start() is None
        (tree, _gpu) = s.samplers
        assert isinstance(tree, ProcessTreeSampler) and tree._oom is s.oom and tree.pid == os.getpid()
        assert s.ladder_loop is not None and s.ladder_loop.identify is False  # a worker serves no engine API
        listener = s.ladder_loop.ladder.listener
        assert listener is not None
        assert listener() == (False, f"no process of pid {os.getpid()}'s tree listens on port {port}")


def test_a_sizing_that_hangs_holds_the_launch_up_by_its_bound_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources_module, "WEIGHTS_WAIT_S", 0.2)
    release = threading.Event()
    with sources(Config(command=SLEEP, probe=ProbeConfig(url=url()))) as (s, _):
        s._weights = lambda sized: release.wait(CHECK_S)  # type: ignore[method-assign]  # a hung NFS mount
        try:
            before = time.monotonic()
            assert s.start() is None
            assert time.monotonic() - before < CHECK_S / 2 and s.server is not None
        finally:
            release.set()


def test_the_engines_own_stream_is_on_the_sessions_clock() -> None:
    seen = Seen()
    s = Sources(Config(command=["llama-server", "--models-dir", "/models"], probe=ProbeConfig(url=url())), seen,
                lambda stream, text: None, identify=False, clock=lambda: 42.0)
    try:
        s._engine_streams()
        assert s.streams[0].clock() == 42.0
    finally:
        s.stop()


def on_the_clock(cfg: Config) -> tuple[Sources, Seen]:
    seen = Seen()
    return Sources(cfg, seen, lambda stream, text: None, identify=False, clock=lambda: 42.0), seen


def test_the_weights_notes_and_total_are_the_weights_on_the_sessions_clock(tmp_path: Path) -> None:
    image = ["docker", "run", "vllm/vllm-openai:v0.6.0", "--model", "/models/llama"]
    for cmd in (image, ["vllm", "serve", "org/not-local"]):
        s, seen = on_the_clock(Config(watched_command=cmd))
        s._size_weights()
        (note,) = seen.items
        assert isinstance(note, SourceNote) and (note.t, note.source) == (42.0, "weights")
    s, seen = on_the_clock(Config(watched_command=["docker", "run", "vllm/vllm-openai:v0.6.0"]))
    s._size_weights()  # an image, no model named: nothing to say
    assert seen.items == []
    make_weights(tmp_path / "m", 1 << 20, shards=1)
    s, seen = on_the_clock(Config(model_path=tmp_path / "m"))
    s._size_weights()
    (total,) = seen.items
    assert isinstance(total, WeightsTotal) and total.t == 42.0 and total.fstype


@pytest.mark.parametrize("host", ["localhost", "0.0.0.0"])
def test_a_port_held_on_any_local_name_launches_nothing(host: str) -> None:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        with sources(Config(command=SLEEP, probe=ProbeConfig(url=f"http://{host}:{port}"))) as (s, _):
            assert s.start() is None
            assert s.server is None and s.port_conflict is not None
