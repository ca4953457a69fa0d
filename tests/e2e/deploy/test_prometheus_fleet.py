"""A real scrape: Debian's Prometheus (1 s scrape and evaluation) and Alertmanager around firstlight sidecars.

Each sidecar is `firstlight watch --pid-from TOKEN --log FILE --serve-readiness ... --metrics-port ...`, as in a
Pod, watching its own engine: a simulated server that serves, one that hangs after loading its weights, one that
crashes (an OOM) three times in a row as a kubelet would restart it, one that serves and then dies, and the real
llama-server. Through Prometheus' HTTP API each expected alert must fire within ALERT_BOUND_S of the verdict that
causes it (the verdict's time is the sidecar's own JSON summary; the alert's is Prometheus' activeAt plus its
``for``), Alertmanager must deliver it to a webhook receiver in this process within DELIVERY_BOUND_S of firing,
and nothing may fire for the healthy ones. The rules are the shipped ones, evaluated each second and with
``for: 2s`` (tests/fleet.py says exactly what changes).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, require, sim_cmd, wait_for
from tests.support.fleet import FOR_S, Stack, binaries_present
from tests.support.llama_server import llama, server_cmd  # noqa: F401 (llama is a fixture)

# Verdict -> alert firing: a scrape (1 s) and an evaluation (1 s) to go pending, FOR_S to fire, one more
# evaluation to see it; the rest is slack for a busy 2-core machine (measured medians: README, bench_fleet.py).
ALERT_BOUND_S = 15.0
# Firing -> the webhook: Prometheus sends at once, Alertmanager's group_wait is 0 s in the test config.
DELIVERY_BOUND_S = 10.0
FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


@dataclass
class Sidecar:
    name: str
    port: int  # the engine's
    mport: int  # firstlight's /metrics
    token: str
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    engines: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def instance(self) -> str:
        return f"127.0.0.1:{self.mport}"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.engine.log"

    def start(self, *extra: str) -> None:
        out = (self.workdir / f"{self.name}.jsonl").open("wb")
        self.proc = subprocess.Popen(
            firstlight_cmd("watch", f"http://127.0.0.1:{self.port}", "--pid-from", self.token, "--log", str(self.log),
                           "--json", *FAST, "--no-history", "--stall-timeout", "3", "--deployment", self.name,
                           "--serve-readiness", f"127.0.0.1:{free_port()}", "--metrics-port", str(self.mport), *extra),
            stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    def engine(self, cmd: list[str]) -> subprocess.Popen[bytes]:
        with self.log.open("wb") as out:  # each start truncates the engine's log, as the manifests' tee does
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.engines.append(p)
        return p

    def sim(self, scenario: str, weights: Path) -> subprocess.Popen[bytes]:
        return self.engine(sim_cmd(scenario, self.port, "--model-path", str(weights), "--served-model-name",
                                   self.token))

    def summaries(self) -> list[dict[str, Any]]:
        lines = (self.workdir / f"{self.name}.jsonl").read_text(errors="replace").splitlines()
        events = [json.loads(x) for x in lines if x.startswith("{")]
        return [e for e in events if e.get("event") == "summary"]

    def metrics(self) -> dict[str, float]:
        try:
            text = httpx.get(f"http://{self.instance}/metrics", timeout=2).text
        except httpx.HTTPError:
            return {}
        return {s.name + json.dumps(s.labels, sort_keys=True): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    def stop(self) -> None:
        for p in self.engines:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def sidecars(tmp_path: Path) -> Iterator[dict[str, Sidecar]]:
    made: dict[str, Sidecar] = {}

    def make(name: str) -> Sidecar:
        made[name] = Sidecar(name, free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}", tmp_path)
        return made[name]

    yield make  # type: ignore[misc]
    for s in made.values():
        s.stop()


@pytest.fixture
def stack_dir(tmp_path: Path) -> Path:
    require(binaries_present(), "prometheus and prometheus-alertmanager (Debian packages)")
    d = tmp_path / "stack"
    d.mkdir()
    return d


def _epoch(rfc3339: str) -> float:
    """Prometheus' timestamps (nanosecond RFC 3339, ``Z`` or an offset) as Unix time."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", rfc3339)
    assert m is not None, rfc3339
    whole = datetime.fromisoformat(m[1] + ("+00:00" if m[3] == "Z" else m[3])).timestamp()
    return whole + (float("0." + m[2]) if m[2] else 0.0)


def _fired(stack: Stack, alertname: str, verdict_at: float, has_for: bool, **labels: str) -> float:
    """Wait for ``alertname`` to fire and be delivered; return verdict -> firing, in seconds, after checking
    both bounds."""
    alert = wait_for(lambda: stack.firing(alertname, **labels), 60, f"{alertname} {labels} firing")
    fired_at = _epoch(alert["activeAt"]) + (FOR_S if has_for else 0)
    latency = fired_at - verdict_at
    assert -1.0 < latency <= ALERT_BOUND_S, (alertname, latency)  # activeAt is an evaluation's time: whole seconds
    delivered = wait_for(lambda: stack.webhook.delivered(alertname, fired_at - 1.0, **labels), 60,
                         f"{alertname} delivered to the webhook")
    assert delivered - fired_at <= DELIVERY_BOUND_S, (alertname, delivered - fired_at)
    print(f"{alertname}: fired {latency:.2f} s after the verdict, delivered {delivered - fired_at:.2f} s later")
    return latency


def _wait_up(stack: Stack, cars: list[Sidecar]) -> None:
    def all_up() -> bool:
        up = {r["metric"]["instance"]: r["value"][1] for r in stack.query('up{job="firstlight"}')}
        return all(up.get(c.instance) == "1" for c in cars)
    wait_for(all_up, 60, "every sidecar scraped (up == 1)")


def _no_alert_for(stack: Stack, healthy: list[Sidecar]) -> None:
    """Nothing pending or firing for the healthy ones, after the rules have run on their READY for a while."""
    ready_at = max(s.summaries()[0]["ended_at"] for s in healthy)

    def evaluated_since_ready() -> bool:
        groups = stack.api("rules")["groups"]
        return all(_epoch(g["lastEvaluation"]) > ready_at + 3 * FOR_S for g in groups)
    wait_for(evaluated_since_ready, 60, "the rules evaluated well after the healthy ones were READY")
    names = {s.instance for s in healthy}
    assert not [a for a in stack.alerts() if a["labels"].get("instance") in names]
    assert not stack.webhook.instances() & names


def test_alerts_fire_for_hung_failed_looping_and_dead_starts_and_never_for_healthy_ones(sidecars, stack_dir: Path,
                                                                                         weights: Path):
    ready, hang, crash, dies = (sidecars(n) for n in ("ready", "hang", "crash", "dies"))
    cars = [ready, hang, crash, dies]
    for c in cars:
        c.start()
    stack = Stack(stack_dir, [c.instance for c in cars])
    try:
        stack.wait_ready()
        _wait_up(stack, cars)
        ready.sim("normal", weights)
        hang.sim("hang_after_load", weights)
        dies.sim("normal", weights)
        # the kubelet restarts a crashing engine: three OOMs in a row, each after the last was judged
        def crashed(n: int) -> dict[str, Any]:
            crash.sim("crash_oom", weights).wait(timeout=60)
            failed = wait_for(lambda: len(f := [s for s in crash.summaries() if s["verdict"] == "failed"]) == n and f,
                              60, f"crash start {n} judged failed")
            assert failed[-1]["failure"] == "oom"
            return failed[-1]

        first = crashed(1)  # the failed alert is timed on the first failure: the next start resolves it
        _fired(stack, "FirstlightStartFailed", first["ended_at"], False, instance=crash.instance, failure="oom")
        crashed(2)
        third = crashed(3)
        _fired(stack, "FirstlightRestartLoop", third["ended_at"], False, instance=crash.instance)

        hung_at = wait_for(lambda: [s for s in hang.summaries() if s["verdict"] == "hung"], 60, "hung")[0]["ended_at"]
        _fired(stack, "FirstlightStartHung", hung_at, False, instance=hang.instance, deployment="hang")

        wait_for(lambda: dies.metrics().get("firstlight_ready{}") == 1, 60, "the dying one READY first")
        os.killpg(dies.engines[0].pid, signal.SIGKILL)
        ended = wait_for(lambda: [s for s in dies.summaries() if s["phase"] == "serving"], 30, "serving ended")
        _fired(stack, "FirstlightNotServingAfterReady", ended[0]["ended_at"], True, instance=dies.instance)

        _no_alert_for(stack, [ready])
    except BaseException:
        print(stack.log_text()[-4000:])
        raise
    finally:
        stack.close()


@pytest.mark.llama
def test_a_real_llama_server_sidecar_is_scraped_and_raises_nothing_while_a_hung_one_alerts(
        sidecars, stack_dir: Path, weights: Path, llama: dict[str, str]):  # noqa: F811
    real, hang = sidecars("llama"), sidecars("hang")
    for c in (real, hang):
        c.start()
    stack = Stack(stack_dir, [real.instance, hang.instance])
    try:
        stack.wait_ready()
        _wait_up(stack, [real, hang])
        real.engine([*server_cmd(llama, real.port), "--alias", real.token])
        hang.sim("hang_after_load", weights)
        hung_at = wait_for(lambda: [s for s in hang.summaries() if s["verdict"] == "hung"], 60, "hung")[0]["ended_at"]
        _fired(stack, "FirstlightStartHung", hung_at, False, instance=hang.instance)
        wait_for(lambda: real.summaries(), 120, "llama-server's verdict")
        assert real.summaries()[0]["verdict"] == "ready"
        wait_for(lambda: stack.query(f'firstlight_serving{{instance="{real.instance}"}} == 1'), 30,
                 "Prometheus sees llama-server serving")
        info = stack.query(f'firstlight_info{{instance="{real.instance}"}}')[0]["metric"]
        assert info["engine"] == "llamacpp" and info["deployment"] == "llama"
        assert info["model"] == Path(llama["model"]).name
        _no_alert_for(stack, [real])
    except BaseException:
        print(stack.log_text()[-4000:])
        raise
    finally:
        stack.close()
