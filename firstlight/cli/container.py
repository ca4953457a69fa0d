"""``watch --container NAME|ID`` and ``up -- docker run ...`` / ``up -- podman run ...``: the glue from the
command line to a session composed with :func:`firstlight.containers.watch.container_sources`. ``app`` hands over
when ``--container`` is given or the command is a runtime's ``run``.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import click

from firstlight import settings
from firstlight.cli.options import (
    Decorator,
    UsageFailure,
    after_ready_config,
    check_expect,
    judge_config,
    options,
    probe_config,
    profile_for,
    usage,
)
from firstlight.cli.run import outputs_from, run_watch
from firstlight.containers.attempts import ContainerAttempts
from firstlight.containers.command import RunCommand
from firstlight.containers.runtime import RUNTIMES, Container, Runtime, RuntimeFailure
from firstlight.containers.watch import Tracker, container_sources, launched, log_since
from firstlight.engines import read_command
from firstlight.engines.profile import EngineProfile
from firstlight.runner.session import Session


def container_options() -> Decorator:
    return options(
        click.option("--container", default=None, metavar="NAME|ID",
                     help="A Docker or podman container: its init process's tree, its log (RUNTIME logs "
                          "--follow) and how it ended (State.OOMKilled, ExitCode)."),
        click.option("--runtime", "container_runtime", type=click.Choice(["auto", *RUNTIMES]), default="auto",
                     show_default=True, help="With --container: which CLI to ask (auto: the one that knows it)."),
    )


def _find(ref: str, which: str) -> tuple[Runtime, Container]:
    names = RUNTIMES if which == "auto" else (which,)
    errors = []
    for name in names:
        if which == "auto" and shutil.which(name) is None:
            continue
        runtime = Runtime(name)
        try:
            return runtime, runtime.inspect(ref)
        except RuntimeFailure as e:
            errors.append(str(e))
    if not errors:
        raise UsageFailure("--container: neither docker nor podman is on PATH")
    raise UsageFailure(f"--container {ref}: " + "; ".join(errors))


def container_url(c: Container, command: list[str], profile: EngineProfile) -> str | None:
    """Where the container's server answers from this machine: its port published on the host, the port
    itself on the host's network, else the container's own address (rootful bridge networks)."""
    cmd = read_command(command, engine=profile.name)
    port = cmd.port
    if not port:
        return None
    if c.network_mode == "host":
        host = cmd.host or "127.0.0.1"
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"
    if port in c.ports:
        return f"http://127.0.0.1:{c.ports[port]}"
    return None


def watch_container(url: str | None, kw: dict[str, Any]) -> None:
    """``watch --container``: exits with the verdict's code."""
    check_expect(kw["expect"])
    for opt, what in (("pid", "--pid"), ("pid_from", "--pid-from"), ("log_file", "--log"), ("unit", "--unit"),
                      ("serve_readiness", "--serve-readiness")):
        if kw.get(opt) is not None:
            raise UsageFailure(f"--container finds the processes and the log itself: drop {what}"
                               if opt != "serve_readiness" else
                               "--serve-readiness (a sidecar) is not supported with --container yet; "
                               "--max-attempts N follows the container's restarts")
    runtime, c = _find(kw["container"], kw["container_runtime"])
    command = list(c.command)
    if not command and c.pid is not None:
        command = settings.watched_command(c.pid)
    profile = profile_for(kw["engine"], command)
    url = url or container_url(c, command, profile)
    if url is None:
        raise UsageFailure(f"--container {kw['container']}: cannot tell where its server answers (no published "
                           "port for it, not on the host's network): pass the URL")
    after, history = after_ready_config(kw)
    cfg = usage(settings.config, probe=probe_config(url, profile, kw), judge=judge_config(kw),
                watched_command=command, engine=kw["engine"], pid=c.pid, after=after, history=history,
                sample_interval=kw["sample_interval"], serving_interval=kw["serving_interval"],
                echo_server_output=False)  # as --log: not echoed
    plan = settings.plan(cfg, profile, api_key=kw["api_key"], outputs=outputs_from(kw))
    tracker = Tracker(runtime, ref=c.id)
    tracker.last = c
    deadline = time.time() + cfg.judge.timeout  # --timeout bounds the whole watch, every attempt in it

    def run(reporter: Any, record: IO[str] | None) -> Any:
        def session(start: Container, held: Any) -> Session:
            judge = dataclasses.replace(cfg.judge, timeout=max(1.0, deadline - time.time()))
            one = dataclasses.replace(cfg, pid=start.pid, judge=judge)
            return Session(one, profile, held, plan.redactor, record, plan=dataclasses.replace(plan, config=one),
                           sources=container_sources(tracker, since=log_since(start)))

        return ContainerAttempts(tracker, c, session, reporter, kw["max_attempts"], kw["restart_wait"],
                                 fail_on_regression=cfg.history.fail_on_regression).run()

    outcome = run_watch(plan, runner=run)
    sys.exit(outcome.exit_code)


def up_container(run: RunCommand, url: str | None, kw: dict[str, Any], cfg_kw: dict[str, Any]) -> None:
    """``up -- RUNTIME run ...``: the CLI launched with a ``--cidfile`` (unless it has one), the container
    watched and, at the end, stopped. ``cfg_kw``: the Config fields ``up`` sets from its own options."""
    inner = run.inner
    profile = profile_for(kw["engine"], inner)
    if url is None:
        port = read_command(inner, engine=profile.name).port
        host_port = run.host_port(port) if port else None
        if host_port is None:
            raise UsageFailure(f"{run.runtime} run: cannot tell where the server answers from this machine "
                               f"(container port {port or '?'} is not published with -p, and the container is "
                               "not on --network host): pass --url")
        url = f"http://127.0.0.1:{host_port}"
    workdir = None
    launch = run
    if run.cidfile is None:  # added at launch only: the command shown and recorded is the one written
        workdir = Path(tempfile.mkdtemp(prefix="firstlight-container-"))
        launch = run.with_cidfile(workdir / "cid")
    try:
        after, history = after_ready_config(kw)
        model = kw["model_path"] or read_command(list(run.argv)).model_local  # where this machine sees it (-v)
        cfg = usage(settings.config, probe=probe_config(url, profile, kw), judge=judge_config(kw),
                    command=run.argv, watched_command=inner, engine=kw["engine"], after=after, history=history,
                    model_path=Path(model) if model and Path(model).exists() else None,
                    sample_interval=kw["sample_interval"], serving_interval=kw["serving_interval"], **cfg_kw)
        plan = settings.plan(cfg, profile, api_key=kw["api_key"], outputs=outputs_from(kw))
        assert launch.cidfile is not None  # added above when the command had none
        tracker = launched(Runtime(run.runtime, run.argv[0]), launch.cidfile)
        if not kw["as_json"]:
            click.echo(f"firstlight: {run.runtime} run: watching the container it starts (cidfile "
                       f"{launch.cidfile}); preflight skipped: the model and libraries are in the image", err=True)

        def go(reporter: Any, record: IO[str] | None) -> Any:
            return Session(cfg, profile, reporter, plan.redactor, record, plan=plan,
                           sources=container_sources(tracker, launch)).run()

        outcome = run_watch(plan, runner=go)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(outcome.exit_code)
