"""``up``, ``watch`` and ``run_preflight``: each argument reaches the one Config (or the preflight) as given, and
each default is the one the docstring and the CLI state. In process: the context manager's run is built but never
started, so what it would run is read from its Config, its profile, its redactor and its flags."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

import firstlight
from firstlight import api, settings
from firstlight.preflight import DEADLINE_S
from firstlight.sim.fixtures import free_port


def _up(command: list[str] | None = None, **kw: Any) -> Any:
    kw.setdefault("history", False)
    if command is None and "url" not in kw:
        kw.setdefault("port", free_port())  # a bare python command names no port
    return firstlight.up(command or [sys.executable, "-c", "pass"], **kw)


def _watch(url: str = "http://127.0.0.1:1", **kw: Any) -> Any:
    kw.setdefault("history", False)
    return firstlight.watch(url, **kw)


PROBE = {"api": "chat", "prompt": "Say ok", "expect": "ok", "max_tokens": 3, "served_model": "served-name",
         "connect_timeout": 2.5, "read_timeout": 7.5, "generation_timeout": 33.0}


@pytest.mark.parametrize("make", [_up, _watch], ids=["up", "watch"])
def test_every_probe_argument_reaches_the_probe(make: Any):
    probe = make(url="http://127.0.0.2:9", **PROBE)._run.cfg.probe
    assert probe.url == "http://127.0.0.2:9"
    assert (probe.api, probe.prompt, probe.expect, probe.max_tokens, probe.model) == (
        "chat", "Say ok", "ok", 3, "served-name")
    assert (probe.connect_timeout, probe.read_timeout, probe.generation_timeout) == (2.5, 7.5, 33.0)


@pytest.mark.parametrize("make", [_up, _watch], ids=["up", "watch"])
def test_the_probe_defaults_are_the_documented_ones(make: Any):
    probe = make(url="http://127.0.0.2:9")._run.cfg.probe
    assert (probe.api, probe.prompt, probe.expect, probe.max_tokens, probe.model, probe.api_key) == (
        "completions", None, None, 8, None, None)
    assert (probe.connect_timeout, probe.read_timeout, probe.generation_timeout) == (1.0, 5.0, 120.0)


def test_up_probes_the_port_given_else_the_commands_port_else_the_engines_default():
    port = free_port()
    assert _up(port=port)._url == f"http://127.0.0.1:{port}"
    assert _up(port=port)._run.cfg.probe.url == f"http://127.0.0.1:{port}"
    assert _up(["llama-server", "-m", "m.gguf", "--host", "127.0.0.3", "--port", "8123"],
               no_preflight=True)._url == "http://127.0.0.3:8123"
    assert _up(["vllm", "serve", "m"], no_preflight=True)._url == "http://127.0.0.1:8000"
    assert _up(["llama-server", "-m", "m.gguf"], no_preflight=True)._url == "http://127.0.0.1:8080"


def test_up_builds_the_launch_the_cli_builds():
    ctx = _up([Path("/bin/true"), "--port", 12], engine="vllm", model="/models/x", grace=3.5, port=free_port())
    run = ctx._run
    cfg = run.cfg
    assert cfg.command == ["/bin/true", "--port", "12"]  # every word a string, as exec wants
    assert (cfg.engine, cfg.model_path, cfg.grace, cfg.after_ready) == ("vllm", Path("/models/x"), 3.5, "supervise")
    assert (cfg.pid, cfg.watched_command, cfg.log_file) == (None, [], None)
    assert run.profile.name == "vllm" and ctx._launched is True
    assert run.preflight is True  # the checks before launch, unless no_preflight
    assert _up(no_preflight=True)._run.preflight is False
    assert _up()._run.cfg.model_path is None and _up()._run.cfg.grace == 10.0
    # the bound on waiting for the session: its deadline, two graces to stop, a minute of slack
    assert _up(timeout=100.0, grace=5.0)._run.bound == 100.0 + 2 * 5.0 + 60.0


def test_up_detects_the_engine_from_the_command_when_none_is_given():
    assert _up(["vllm", "serve", "m"], no_preflight=True)._run.profile.name == "vllm"
    assert _up(["llama-server", "-m", "m.gguf"], no_preflight=True)._run.profile.name == "llamacpp"


def test_watch_reads_the_pid_its_command_line_and_the_log_and_launches_nothing(tmp_path: Path):
    log = tmp_path / "server.log"
    ctx = _watch(pid=os.getpid(), log=str(log), log_from_start=True, engine="sglang", model=str(tmp_path))
    cfg = ctx._run.cfg
    assert cfg.pid == os.getpid() and cfg.watched_command and cfg.command == []
    assert cfg.watched_command == psutil.Process().cmdline()  # as /proc tells it (xdist renames its workers)
    assert (cfg.log_file, cfg.log_from_start, cfg.engine, cfg.model_path) == (log, True, "sglang", tmp_path)
    assert ctx._launched is False and ctx._run.preflight is False
    plain = _watch()._run.cfg
    assert (plain.pid, plain.watched_command, plain.log_file, plain.log_from_start, plain.model_path) == (
        None, [], None, False, None)


def test_watch_refuses_a_pid_that_does_not_exist():
    pid = 2 ** 22 + 12345  # above Linux's pid_max limit: never a live process
    with pytest.raises(ValueError, match=f"no process with pid {pid}"):
        _watch(pid=pid)


@pytest.mark.parametrize("make", [_up, _watch], ids=["up", "watch"])
def test_history_true_false_or_a_path(make: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "h.db"
    monkeypatch.setenv("FIRSTLIGHT_HISTORY", str(tmp_path / "env.db"))
    assert make(url="http://127.0.0.2:9", history=False)._run.cfg.history.enabled is False
    on = make(url="http://127.0.0.2:9", history=True)._run.cfg.history
    assert on.enabled is True and on.path is None  # None: $FIRSTLIGHT_HISTORY, else the user's
    at = make(url="http://127.0.0.2:9", history=str(db))._run.cfg.history
    assert at.enabled is True and at.path == db
    assert make(url="http://127.0.0.2:9", history=db)._run.cfg.history.path == db


@pytest.mark.parametrize("make", [_up, _watch], ids=["up", "watch"])
def test_the_api_key_is_sent_and_learnt_by_the_redactor_before_any_output(make: Any):
    run = make(url="http://127.0.0.2:9", api_key="k3y-aaaa-bbbb")._run
    assert run.cfg.probe.api_key == "k3y-aaaa-bbbb"
    assert run.redactor.text("k3y-aaaa-bbbb") == "***" and run.session.redactor is run.redactor


def test_a_secret_on_the_command_line_is_masked_by_the_runs_redactor():
    run = _up([sys.executable, "-c", "pass", "--api-key", "cmdline-secret-1"], port=free_port())._run
    assert "cmdline-secret-1" not in run.redactor.text("key cmdline-secret-1")


def test_run_preflight_deadline_must_be_above_0_and_at_most_a_day():
    cmd = ["llama-server", "-m", "/nonexistent/m.gguf"]
    for bad in (0, -1.0, math.nan, settings.DAY_S + 1):
        with pytest.raises(settings.SettingError, match="deadline_s"):
            firstlight.run_preflight(cmd, deadline_s=bad)
    with pytest.raises(ValueError, match="engine"):
        firstlight.run_preflight(cmd, engine="no-such-engine")


def test_run_preflight_hands_its_arguments_to_the_checks(monkeypatch: pytest.MonkeyPatch):
    seen: dict[str, Any] = {}

    def record(command: list[str], engine: str | None, model: Path | None, disk_sample: bool, redactor: Any,
               deadline_s: float) -> str:
        seen.update(command=command, engine=engine, model=model, disk_sample=disk_sample, deadline_s=deadline_s)
        return "report"

    monkeypatch.setattr(api, "_preflight", record)
    assert firstlight.run_preflight([Path("/bin/llama-server"), "--port", 9], engine="llamacpp", model="/m.gguf",
                                    disk_sample=False, deadline_s=settings.DAY_S) == "report"
    assert seen == {"command": ["/bin/llama-server", "--port", "9"], "engine": "llamacpp", "model": Path("/m.gguf"),
                    "disk_sample": False, "deadline_s": settings.DAY_S}
    firstlight.run_preflight(["llama-server"])
    assert (seen["engine"], seen["model"], seen["disk_sample"], seen["deadline_s"]) == (None, None, True, DEADLINE_S)
    assert DEADLINE_S == 30.0


def test_replay_refuses_an_unknown_engine_before_reading(tmp_path: Path):
    with pytest.raises(ValueError, match="no-such-engine"):
        firstlight.replay(tmp_path / "absent.log", engine="no-such-engine")
    report = firstlight.replay(["Starting server", "nothing else"], engine="vllm")
    assert report.engine == "vllm" and report.outcome != "ready"


# -- what the first mutation run of these tests left (each a rule the tests above did not pin) -------------------
def test_the_refusals_are_the_settings_own_words():
    with pytest.raises(ValueError, match=r"^up: no command to launch$"):
        firstlight.up(["", "--port", "1"])  # an empty program, whatever follows
    with pytest.raises(ValueError, match=r"^run_preflight: no command to check$"):
        firstlight.run_preflight([""])
    with pytest.raises(settings.SettingError) as caught:
        firstlight.run_preflight(["llama-server"], deadline_s=-2)
    assert str(caught.value) == "deadline_s -2: give a number of seconds above 0 and at most 86400"
    with pytest.raises(settings.SettingError, match=r"^engine 'nope': unknown engine 'nope'; valid engines"):
        firstlight.replay("/nonexistent.log", engine="nope")  # the one check, before the file is opened


def test_run_preflight_takes_any_deadline_above_0(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(api, "_preflight", lambda *a: a[-1])
    assert firstlight.run_preflight(["llama-server"], deadline_s=0.5) == 0.5


def test_history_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("FIRSTLIGHT_HISTORY", str(tmp_path / "h.db"))
    up = firstlight.up([sys.executable, "-c", "pass"], port=free_port(), no_preflight=True)
    assert up._run.cfg.history.enabled is True
    assert firstlight.watch("http://127.0.0.1:1")._run.cfg.history.enabled is True


def test_the_callers_reporter_is_told_everything():
    from firstlight.report.base import QuietReporter

    mine = QuietReporter()
    for ctx in (_up(reporter=mine), _watch(reporter=mine)):
        run = ctx._run
        (guarded,) = run.session.reporter.reporters  # the session guards each reporter it is given
        assert run.tracker.inner is mine and guarded.inner is run.tracker
        assert run.thread.name == "firstlight-session" and run.thread.daemon is True
    assert isinstance(_up()._run.tracker.inner, QuietReporter) and _up()._run.tracker.inner is not mine


def test_watch_reads_the_command_line_of_the_pid_given(monkeypatch: pytest.MonkeyPatch):
    asked: list[int] = []

    class Process:
        def __init__(self, pid: int) -> None:
            asked.append(pid)

        def cmdline(self) -> list[str]:
            return ["vllm", "serve", "/models/llama-8b", "--port", "8011"]

        def parent(self) -> None:  # started by init: its command line is its own
            return None

    monkeypatch.setattr(api.psutil, "Process", Process)
    ctx = _watch(pid=os.getpid())
    cfg = ctx._run.cfg
    assert asked == [os.getpid()] and cfg.watched_command[:3] == ["vllm", "serve", "/models/llama-8b"]
    assert ctx._run.profile.name == "vllm" and cfg.model_path == Path("/models/llama-8b")
    assert ctx._url == cfg.probe.url == "http://127.0.0.1:1"
    assert _watch(pid=os.getpid(), engine="sglang")._run.profile.name == "sglang"


def test_watch_of_a_process_whose_command_line_cannot_be_read_goes_on_without_it(monkeypatch: pytest.MonkeyPatch):
    class Process:
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def cmdline(self) -> list[str]:
            raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(api.psutil, "Process", Process)
    cfg = _watch(pid=os.getpid())._run.cfg
    assert cfg.watched_command == [] and cfg.pid == os.getpid()


def test_the_preflight_reads_the_target_and_masks_what_the_checks_quote(monkeypatch: pytest.MonkeyPatch):
    from firstlight.preflight import Check, PreflightReport

    seen: dict[str, Any] = {}

    def checks(target: Any, options: Any, redactor: Any) -> PreflightReport:
        seen.update(target=target, options=options, redactor=redactor)
        return PreflightReport([Check("port", "fail", "port_in_use", "pid 7: srv --api-key s3cr3t-k3y-77",
                                      "kill 7 (srv --api-key s3cr3t-k3y-77)"),
                                Check("pip", "ok", "import_error", "pip s3cr3t-k3y-77 found")], 0.1)

    monkeypatch.setattr(api, "run_checks", checks)
    report = firstlight.run_preflight(["./serve.sh", "--api-key", "s3cr3t-k3y-77"], engine="vllm",
                                      model="/models/m", disk_sample=False, deadline_s=12.0)
    assert (seen["target"].engine, seen["target"].model) == ("vllm", "/models/m")
    assert (seen["options"].disk_sample, seen["options"].deadline_s) == (False, 12.0)
    assert seen["redactor"] is not None and "s3cr3t-k3y-77" not in seen["redactor"].text("s3cr3t-k3y-77")
    assert [(c.evidence, c.hint) for c in report.checks] == [("pid 7: srv --api-key ***", "kill 7 (srv --api-key ***)"),
                                                             ("pip *** found", None)]
    firstlight.run_preflight(["./serve.sh"])
    assert (seen["target"].engine, seen["target"].model, seen["options"].disk_sample) == (None, None, True)


def test_replay_of_a_file_reads_it_as_the_engine_given(tmp_path: Path):
    log = tmp_path / "server.log"
    log.write_text("INFO: Started server process [4242]\nloading weights\n")
    assert firstlight.replay(log, engine="vllm").engine == "vllm"
    assert firstlight.replay(str(log), engine="sglang").engine == "sglang"



@pytest.mark.parametrize(("call", "said"), [
    (lambda: firstlight.up("vllm serve m"), "up: command must be a list of (a str or a path or an int), not str "
                                           "(a command is a list of its words: shlex.split a string)"),
    (lambda: firstlight.up(["x"], timeout="60"), "up: timeout must be a number, not str"),
    (lambda: firstlight.up(["x"], timeout=True), "up: timeout must be a number, not bool"),
    (lambda: firstlight.up(["x"], port="80"), "up: port must be an int or None, not str"),
    (lambda: firstlight.up(["x"], history=5), "up: history must be True or False or a str or a path, not int"),
    (lambda: firstlight.up(["x"], engine=5), "up: engine must be a str or None, not int"),
    (lambda: firstlight.up(["x"], no_such=1), "up: got an unexpected keyword argument 'no_such'"),
    (lambda: firstlight.watch(123), "watch: url must be a str, not int"),
    (lambda: firstlight.watch("http://127.0.0.1:1", pid="12"), "watch: pid must be an int or None, not str"),
    (lambda: firstlight.watch("http://127.0.0.1:1", log=5), "watch: log must be a str or a path or None, not int"),
    (lambda: firstlight.run_preflight("vllm serve m"), "run_preflight: command must be a list of"),
    (lambda: firstlight.replay(5), "replay: source must be a str or a path or a list of strs, not int"),
    (lambda: firstlight.replay(None), "replay: source must be a str or a path or a list of strs, not NoneType"),
])
def test_an_argument_of_the_wrong_type_is_a_one_line_type_error_naming_it_before_anything_starts(call: Any,
                                                                                                 said: str):
    """Not an AttributeError or a comparison's TypeError from deep inside (``'int' object has no attribute
    'strip'``): the function, the argument, the type expected and the type given."""
    with pytest.raises(TypeError) as caught:
        call()
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)


def test_the_types_each_argument_accepts_are_the_annotated_ones(tmp_path: Path):
    """Paths as os.PathLike, words of a command as ints too, an iterable of lines as any iterable but a str."""
    up = _up([Path(sys.executable), "-c", "pass", "--port", 12], url="http://127.0.0.1:1")
    assert up._run.cfg.command[-1] == "12"
    assert _watch(log=tmp_path / "x.log", model=tmp_path)._run.cfg.log_file == tmp_path / "x.log"
    assert firstlight.replay(iter(["INFO: Started server process [1]"])).outcome == "incomplete"
    assert _up(timeout=5, port=free_port())._run.cfg.judge.timeout == 5.0  # an int is a number
