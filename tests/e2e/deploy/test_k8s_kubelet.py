"""The manifests' probes under the kubelet's rules (tests/kubelet.py), against a real sidecar (`firstlight watch
--pid-from ... --serve-readiness`) watching real simulator starts: a hung start is restarted within seconds of
firstlight's `hung` verdict, a slow but progressing one never. The periods run 5x faster (scale 0.2)."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from firstlight.sim.fixtures import free_port
from tests.support.common import REPO as _REPO
from tests.support.common import firstlight_cmd, sim_cmd, wait_for
from tests.support.kubelet import Kubelet, run_until

REPO = _REPO
SCALE = 0.2
# The manifests' earlier wiring: a startup probe sized from history (104 x 10 s) holding liveness back.
STARTUP_BUDGET = {"startupProbe": {"httpGet": {"path": "/startupz", "port": 8081}, "periodSeconds": 10,
                                   "failureThreshold": 104, "timeoutSeconds": 2},
                  "livenessProbe": {"httpGet": {"path": "/livez", "port": 8081}, "periodSeconds": 10,
                                    "failureThreshold": 3, "timeoutSeconds": 2}}


def engine_container(name: str = "vllm-sidecar.yaml") -> dict[str, Any]:
    docs = list(yaml.safe_load_all((REPO / "deploy" / "k8s" / name).read_text()))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]


def _sidecar(tag: str, port: int, rport: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", tag, "--no-history",
                                           "--stall-timeout", "3", "--poll-min", "0.05", "--sample-interval", "0.2",
                                           "--serving-interval", "0", "--serve-readiness", f"127.0.0.1:{rport}"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def _engine(scenario: str, port: int, tag: str, weights: Path, load_s: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*sim_cmd(scenario, port), "--model-path", str(weights), "--served-model-name", tag,
                             "--load-seconds", str(load_s)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _listening(rport: int) -> bool:
    return Kubelet(rport, {}).get("/livez", 1)[0] == 200


@pytest.mark.parametrize("manifest", ["vllm-sidecar.yaml", "sglang-sidecar.yaml"])
def test_a_hung_start_is_restarted_within_seconds_of_the_verdict(manifest: str, weights: Path):
    port, rport, tag = free_port(), free_port(), f"eng-{uuid.uuid4().hex[:8]}"
    sidecar = _sidecar(tag, port, rport)
    engine = None
    try:
        wait_for(lambda: _listening(rport), 60, "the sidecar to listen")
        engine = _engine("hang", port, tag, weights, 2.0)
        now = time.monotonic()
        container = engine_container(manifest)
        k8s = Kubelet.for_container(container, rport, SCALE, now)
        budget = Kubelet.for_container(STARTUP_BUDGET, rport, SCALE, now)
        run_until([k8s, budget], lambda: k8s.restarted_at is not None, 90)
        assert k8s.restarted_at is not None, f"never restarted; probes seen: {k8s.bodies[-5:]}"
        hung_at = k8s.first_seen("hung")
        assert hung_at is not None and k8s.why == "livenessProbe failed 2 times", (k8s.why, k8s.bodies[-5:])
        live = container["livenessProbe"]
        # Restarted by the failureThreshold-th probe after the verdict (the first may come up to a period later).
        assert k8s.restarted_at - hung_at <= live["periodSeconds"] * live["failureThreshold"] * SCALE + 1.0
        # Under the startup-budget wiring the same hung start is still waiting: no liveness probe ran at all.
        assert budget.restarted_at is None
        assert not any(name == "livenessProbe" for _, name, _, _ in budget.bodies)
    finally:
        for p in (sidecar, engine):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_a_slow_but_progressing_start_is_never_restarted(weights: Path):
    port, rport, tag = free_port(), free_port(), f"eng-{uuid.uuid4().hex[:8]}"
    sidecar = _sidecar(tag, port, rport)
    engine = None
    try:
        wait_for(lambda: _listening(rport), 60, "the sidecar to listen")
        # 12 s of silent weight reading: four times --stall-timeout without a log line, bytes read all along.
        engine = _engine("slow_disk_silent", port, tag, weights, 12.0)
        k8s = Kubelet.for_container(engine_container(), rport, SCALE, time.monotonic())
        run_until([k8s], lambda: k8s.restarted_at is not None or any(
            name == "readinessProbe" and status == 200 for _, name, status, _ in k8s.bodies), 120)
        assert k8s.restarted_at is None, (k8s.why, k8s.bodies[-5:])
        assert any(name == "readinessProbe" and status == 200 for _, name, status, _ in k8s.bodies), "never Ready"
        assert all(status == 200 for _, name, status, _ in k8s.bodies if name == "livenessProbe")
        assert len([b for b in k8s.bodies if b[1] == "livenessProbe"]) >= 10  # liveness ran all through the load
    finally:
        for p in (sidecar, engine):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
