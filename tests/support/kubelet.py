"""The kubelet's probe rules, enough to run a manifest's probes against real endpoints (tests only).

From the kubelet's prober (pkg/kubelet/prober): each probe runs every ``periodSeconds`` after
``initialDelaySeconds``; an HTTP answer 200-399 within ``timeoutSeconds`` is a success, anything else (another
status, a refused connection, a timeout) a failure; ``failureThreshold`` failures in a row fail the probe. No
liveness or readiness probe runs until the startup probe (if any) has succeeded; a failed startup or liveness
probe restarts the container. ``scale`` shrinks the periods (not the timeouts) so a test runs in seconds.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ProbeRun:
    name: str
    path: str
    period: float
    failure_threshold: int
    timeout: float
    next_at: float
    failures: int = 0
    succeeded: bool = False


@dataclass
class Kubelet:
    port: int
    probes: dict[str, ProbeRun]
    restarted_at: float | None = None
    why: str = ""
    bodies: list[tuple[float, str, int, str | None]] = field(default_factory=list)  # (t, probe, status, verdict)

    @classmethod
    def for_container(cls, container: dict[str, Any], port: int, scale: float, now: float) -> Kubelet:
        probes = {}
        for name in ("startupProbe", "livenessProbe", "readinessProbe"):
            spec = container.get(name)
            if spec is None:
                continue
            probes[name] = ProbeRun(name, spec["httpGet"]["path"], spec.get("periodSeconds", 10) * scale,
                                    spec.get("failureThreshold", 3), spec.get("timeoutSeconds", 1),
                                    now + spec.get("initialDelaySeconds", 0) * scale)
        return cls(port, probes)

    @property
    def started(self) -> bool:
        startup = self.probes.get("startupProbe")
        return startup is None or startup.succeeded

    def get(self, path: str, timeout: float) -> tuple[int, str | None]:
        import json

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as r:
                return r.status, json.loads(r.read()).get("verdict")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}").get("verdict")
        except (OSError, ValueError):
            return 0, None

    def step(self, now: float) -> None:
        """Run every probe that is due; restart on a failed startup or liveness probe."""
        if self.restarted_at is not None:
            return
        for p in self.probes.values():
            if now < p.next_at or (p.name != "startupProbe" and not self.started):
                continue
            if p.name == "startupProbe" and p.succeeded:
                continue  # a startup probe stops once it succeeded
            p.next_at = now + p.period
            status, verdict = self.get(p.path, p.timeout)
            self.bodies.append((now, p.name, status, verdict))
            if 200 <= status < 400:
                p.failures, p.succeeded = 0, True
                continue
            p.failures += 1
            if p.failures >= p.failure_threshold and p.name in ("startupProbe", "livenessProbe"):
                self.restarted_at, self.why = now, f"{p.name} failed {p.failures} times"
                return

    def first_seen(self, verdict: str) -> float | None:
        return next((t for t, _, _, v in self.bodies if v == verdict), None)


def run_until(kubelets: list[Kubelet], stop: Any, deadline_s: float, tick: float = 0.05) -> None:
    """Step the kubelets until ``stop()`` is true or the deadline passes (the loop's own polling period)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and not stop():
        now = time.monotonic()
        for k in kubelets:
            k.step(now)
        time.sleep(tick)
