"""The real Prometheus and Alertmanager (Debian's packages) around firstlight sidecars, for the fleet test and
bench/bench_fleet.py: each in its own temp dir, on loopback only, Prometheus scraping and evaluating every
second, Alertmanager delivering to a webhook receiver in this process.

The rules are a copy of deploy/prometheus/firstlight-rules.yml with two changes, and only these: every group
is evaluated each second (instead of 30 s), and every ``for:`` is ``FOR_S`` (instead of minutes), so that a
test sees an alert fire in seconds. The expressions and their windows are the shipped ones.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from firstlight.sim.fixtures import free_port

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "firstlight-rules.yml"
FOR_S = 2
BINARIES = ("prometheus", "prometheus-alertmanager")


def binaries_present() -> bool:
    return all(shutil.which(b) for b in BINARIES)


class Webhook:
    """Alertmanager's webhook receiver: every POST body kept, with the time it came."""

    def __init__(self) -> None:
        self.posts: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with hook.lock:
                    hook.posts.append((time.time(), json.loads(body or b"{}")))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def delivered(self, alertname: str, since: float = 0.0, **labels: str) -> float | None:
        """When Alertmanager first delivered ``alertname`` firing with these labels, at ``since`` or later
        (None: not yet)."""
        with self.lock:
            for t, body in self.posts:
                if t < since:
                    continue
                for a in body.get("alerts", []):
                    lab = a.get("labels", {})
                    if a.get("status") == "firing" and lab.get("alertname") == alertname and \
                            all(lab.get(k) == v for k, v in labels.items()):
                        return t
        return None

    def instances(self) -> set[str]:
        with self.lock:
            return {a["labels"].get("instance", "") for _, b in self.posts for a in b.get("alerts", [])}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def rules_for_tests(dest: Path) -> Path:
    """The shipped rules, evaluated every second and with ``for: FOR_S``s (see the module's docstring)."""
    rules = yaml.safe_load(RULES.read_text())
    for g in rules["groups"]:
        g["interval"] = "1s"
        for r in g["rules"]:
            if "for" in r:
                r["for"] = f"{FOR_S}s"
    dest.write_text(yaml.safe_dump(rules))
    return dest


class Stack:
    """Alertmanager, then Prometheus scraping ``targets`` (host:port of firstlight's /metrics)."""

    def __init__(self, workdir: Path, targets: list[str], scrape_s: float = 1.0,
                 ports: tuple[int, int] | None = None) -> None:
        self.dir = workdir
        self.webhook = Webhook()
        self.am_port, self.prom_port = ports or (free_port(), free_port())
        self.procs: list[subprocess.Popen[bytes]] = []
        am_cfg = {
            "route": {"receiver": "test", "group_by": ["alertname", "instance"], "group_wait": "0s",
                      "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "test", "webhook_configs": [{"url": self.webhook.url, "send_resolved": False}]}],
        }
        (workdir / "alertmanager.yml").write_text(yaml.safe_dump(am_cfg))
        rules = rules_for_tests(workdir / "firstlight-rules.yml")
        interval = f"{scrape_s:g}s"
        prom_cfg = {
            "global": {"scrape_interval": interval, "evaluation_interval": "1s", "scrape_timeout": interval},
            "rule_files": [str(rules)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{self.am_port}"]}]}]},
            "scrape_configs": [{"job_name": "firstlight", "static_configs": [{"targets": targets}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(prom_cfg))
        self.log = (workdir / "stack.log").open("wb")
        self._start(["prometheus-alertmanager", f"--config.file={workdir / 'alertmanager.yml'}",
                     f"--storage.path={workdir / 'am-data'}", f"--web.listen-address=127.0.0.1:{self.am_port}",
                     "--cluster.listen-address="])  # no gossip port on 0.0.0.0
        self._start(["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
                     f"--storage.tsdb.path={workdir / 'prom-data'}",
                     f"--web.listen-address=127.0.0.1:{self.prom_port}", "--web.enable-lifecycle"])

    def _start(self, cmd: list[str]) -> None:
        self.procs.append(subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           cwd=self.dir))

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        for port in (self.am_port, self.prom_port):
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/-/ready", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                dead = [p.args[0] for p in self.procs if p.poll() is not None]
                if dead or time.monotonic() > deadline:
                    raise RuntimeError(f"{dead or port} not ready; log:\n{self.log_text()[-3000:]}")
                time.sleep(0.1)  # polling period of this deadline-bounded wait

    def api(self, path: str, **params: Any) -> Any:
        r = httpx.get(f"http://127.0.0.1:{self.prom_port}/api/v1/{path}", params=params, timeout=5)
        body = r.json()
        if body.get("status") != "success":
            raise RuntimeError(f"{path}: {body}")
        return body["data"]

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def firing(self, alertname: str, **labels: str) -> dict[str, Any] | None:
        for a in self.alerts():
            lab = a["labels"]
            if a["state"] == "firing" and lab.get("alertname") == alertname and \
                    all(lab.get(k) == v for k, v in labels.items()):
                return a
        return None

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def log_text(self) -> str:
        self.log.flush()
        return (self.dir / "stack.log").read_text(errors="replace")

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.webhook.close()
        self.log.close()
