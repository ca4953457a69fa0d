"""deploy/k8s: the manifests validate offline against the Kubernetes schemas, point the engine's probes at
firstlight's endpoints, and carry the budget `firstlight history --k8s-probe` computes from a known history.

The process-starting tests of this subject; the others: ``tests/unit/deploy/test_k8s.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from firstlight.history import DeploymentKey, History
from firstlight.sim.fixtures import free_port
from tests.support.common import REPO, run_firstlight
from tests.support.k8s import _arg, deployment


def test_exec_probe_commands_are_valid_firstlight_commands():
    engine = deployment(REPO / "deploy" / "k8s" / "vllm-exec-probe.yaml")["spec"]["template"]["spec"]["containers"][0]
    closed = f"http://127.0.0.1:{free_port()}"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        cmd = engine[probe]["exec"]["command"]
        assert cmd[0] == "firstlight" and cmd[1] == "probe"
        args = [closed if a.startswith("http://") else a for a in cmd[2:]]
        r = run_firstlight("probe", *args)
        assert r.rc == 1 and "FAIL" in r.stderr, (probe, r.stderr)  # parsed (not 64) and honestly not ready
        assert engine[probe]["timeoutSeconds"] > float(_arg(cmd, "--timeout"))


# -- history --k8s-probe -------------------------------------------------------------------------------------
def _history(path: Path, cold_starts: list[float], failed: int = 0) -> str:
    key = DeploymentKey.create("sglang", "/models/K2", ["python3", "-m", "sglang.launch_server", "--tp", "8"], 8)
    with History(path) as h:
        for s in cold_starts:
            h.record_run("watch", {"verdict": "ready", "cold_start_s": s}, key)
        for _ in range(failed):
            h.record_run("watch", {"verdict": "hung"}, key)
        h.record_run("bench", {"verdict": "ready"}, key, bench={"completed": 4, "output_throughput": 9.0})
    return key.hash


def test_k8s_probe_covers_p95_times_the_safety_factor(tmp_path: Path):
    db = tmp_path / "h.sqlite3"
    starts = [600.0 + 5 * i for i in range(20)]  # 600 .. 695 s: nearest-rank p95 is 690 s
    h = _history(db, starts, failed=2)
    r = run_firstlight("history", "--history", str(db), "--k8s-probe", h[:6])
    assert r.rc == 0, r.stderr
    assert "p95 690s" in r.stdout and "x safety factor 1.5 = 1035s" in r.stdout
    assert "periodSeconds: 10" in r.stdout and "failureThreshold: 104" in r.stdout
    assert "progressDeadlineSeconds: 1380" in r.stdout and "path: /startupz, port: 8081" in r.stdout
    pasted = yaml.safe_load(r.stdout)  # the output is YAML to paste
    assert pasted["startupProbe"]["failureThreshold"] * pasted["startupProbe"]["periodSeconds"] >= 1.5 * 690
    r = run_firstlight("history", "--history", str(db), "--k8s-probe", h, "--json", "--readiness-port", "9000")
    got = json.loads(r.stdout)["k8s_probe"]
    assert got["starts"] == 20 and got["p95_s"] == 690 and got["covered_s"] == 1040  # failed runs not counted


def test_k8s_probe_on_few_or_short_starts(tmp_path: Path):
    db = tmp_path / "h.sqlite3"
    h = _history(db, [20.0, 25.0, 30.0])
    r = run_firstlight("history", "--history", str(db), "--k8s-probe", h)
    assert r.rc == 0 and "only 3 good starts: the slowest one" in r.stdout
    assert "periodSeconds: 1" in r.stdout and "failureThreshold: 45" in r.stdout
    assert "progressDeadlineSeconds: 600" in r.stdout  # never below the default


def test_k8s_probe_without_good_starts_or_deployment(tmp_path: Path):
    db = tmp_path / "h.sqlite3"
    h = _history(db, [], failed=3)
    r = run_firstlight("history", "--history", str(db), "--k8s-probe", h)
    assert r.rc == 1 and "no good cold start" in r.stderr and "Traceback" not in r.stderr and not r.stdout
    r = run_firstlight("history", "--history", str(db), "--k8s-probe", "ffffffff")
    assert r.rc == 64 and "no deployment ffffffff" in r.stderr
    _history(db, [10.0])  # same key: now one good start
    assert run_firstlight("history", "--history", str(db), "--k8s-probe", h).rc == 0


# -- one history for the fleet -------------------------------------------------------------------------------
def test_the_sidecars_history_settings_reach_a_real_postgresql_with_the_secrets_password(tmp_path: Path):
    """The sidecar's environment as the manifest sets it (its database's host and port made the test's own, the
    Secret's password as the file the kubelet mounts): a start records into PostgreSQL, `firstlight history`
    lists it with no --history, and the password is never shown."""
    from urllib.parse import urlsplit

    from tests.support.common import sim_cmd
    from tests.support.postgres import PASSWORD, USER, postgres_server

    spec = deployment(REPO / "deploy" / "k8s" / "vllm-sidecar.yaml")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["initContainers"][0]["env"]}
    with postgres_server() as pg:
        url = urlsplit(env["FIRSTLIGHT_HISTORY"])
        local = url._replace(netloc=f"{USER}@127.0.0.1:{pg.port}", path="/postgres", query="").geturl()
        secret = tmp_path / "run" / "secrets" / "firstlight-history" / "password"
        secret.parent.mkdir(parents=True)
        secret.write_text(PASSWORD + "\n")
        secret.chmod(0o400)
        state = tmp_path / env["XDG_STATE_HOME"].lstrip("/")
        run_env = {"FIRSTLIGHT_HISTORY": local, "FIRSTLIGHT_HISTORY_PASSWORD_FILE": str(secret),
                   "FIRSTLIGHT_NODE": "gpu-node-1", "XDG_STATE_HOME": str(state), "PGPASSWORD": ""}
        r = run_firstlight("up", "--json", "--stop-when-ready", "--", *sim_cmd("normal", free_port()),
                           timeout=180, env=run_env)
        assert r.rc == 0 and PASSWORD not in r.stdout + r.stderr, r.stderr[-2000:]
        assert isinstance(r.summary.get("history_run"), int), r.summary.get("notes")
        listing = run_firstlight("history", env=run_env)
        assert listing.rc == 0 and "gpu-node-1" in listing.stdout, listing.stderr
        assert PASSWORD not in listing.stdout + listing.stderr
        assert not list(state.rglob("*.json"))  # nothing waits in the spool
