"""deploy/k8s: the manifests validate offline against the Kubernetes schemas, point the engine's probes at
firstlight's endpoints, and carry the budget `firstlight history --k8s-probe` computes from a known history.

The in-process tests of this subject; the others: ``tests/e2e/deploy/test_k8s.py``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from firstlight.history.k8s import nearest_rank, probe_budget
from tests.support.common import REPO, require
from tests.support.k8s import _arg, deployment, docs

ALL_MANIFESTS = sorted((REPO / "deploy" / "k8s").glob("*.yaml"))
LWS_MANIFESTS = [p for p in ALL_MANIFESTS if p.name.endswith("-lws.yaml")]  # LeaderWorkerSets (a CRD's kind)
MANIFESTS = [p for p in ALL_MANIFESTS if p not in LWS_MANIFESTS]  # Deployments
LWS_SCHEMA = REPO / "tests" / "fixtures" / "k8s" / "leaderworkerset-v0.8.0.schema.json"


SIDECARS = [p for p in MANIFESTS if "sidecar" in p.name]


# Native sidecars (an init container with restartPolicy: Always) are on by default from 1.29; 1.37 is the newest
# schema kubernetes-validate 1.37.0 bundles.
K8S_VERSIONS = ("1.29.0", "1.37.0")


FIELD_NOTES_P95_S = 690.0  # the history the manifests' numbers were computed from (p95 good cold start)


@pytest.fixture(scope="module")
def validate() -> Any:
    try:
        from kubernetes_validate import utils
    except ImportError:
        require(False, "kubernetes-validate (the test extra: pip install -e '.[test]')")

    def check(doc: dict[str, Any], version: str) -> None:
        # SchemaNotFoundError (an unknown kind) and ValidationError both raise: nothing passes unchecked.
        utils.validate(doc, version, strict=True)

    return check


def test_the_manifests_are_there():
    assert {p.name for p in MANIFESTS} >= {"vllm-sidecar.yaml", "sglang-sidecar.yaml", "vllm-exec-probe.yaml",
                                           "vllm-sidecar-node-log.yaml"}
    assert {p.name for p in LWS_MANIFESTS} >= {"sglang-lws.yaml", "vllm-lws.yaml"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", ALL_MANIFESTS, ids=lambda p: p.name)
def test_manifests_validate_offline_and_strictly(validate: Any, validate_lws: Any, path: Path, version: str):
    check = validate_lws if path in LWS_MANIFESTS else validate  # a LeaderWorkerSet: its CRD's schema
    for doc in docs(path):
        check(doc, version)


def test_validation_can_fail(validate: Any):
    from kubernetes_validate.utils import ValidationError

    doc = copy.deepcopy(deployment(SIDECARS[0]))
    engine = doc["spec"]["template"]["spec"]["containers"][0]
    engine["livenessProbe"]["perodSeconds"] = engine["livenessProbe"].pop("periodSeconds")  # a typo
    with pytest.raises(ValidationError):
        validate(doc, K8S_VERSIONS[0])
    doc = copy.deepcopy(deployment(SIDECARS[0]))
    doc["spec"]["template"]["spec"]["initContainers"][0]["restartPolicy"] = 1
    with pytest.raises(ValidationError):
        validate(doc, K8S_VERSIONS[0])


@pytest.mark.parametrize("path", SIDECARS, ids=lambda p: p.name)
def test_sidecar_manifests_wire_the_probes_to_firstlight(path: Path):
    spec = deployment(path)["spec"]["template"]["spec"]
    assert spec["shareProcessNamespace"] is True  # --pid-from needs the engine's processes
    (sidecar,) = spec["initContainers"]
    (engine,) = spec["containers"]
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar
    args = sidecar["args"]
    assert args[0] == "watch" and "--pid-from" in args
    bind = _arg(args, "--serve-readiness")
    assert bind.startswith("0.0.0.0:")  # the kubelet probes the Pod IP, not the Pod's localhost
    port = int(bind.rsplit(":", 1)[1])
    assert port in [p["containerPort"] for p in sidecar["ports"]]
    assert args[1].startswith("http://127.0.0.1:") and int(args[1].rsplit(":", 1)[1]) in [
        p["containerPort"] for p in engine["ports"]]
    for probe, path_ in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        assert engine[probe]["httpGet"] == {"path": path_, "port": port}, probe
    # Liveness from the start, on firstlight's judgement: no startup probe holding it back for a fixed budget,
    # and a hung verdict restarts the engine within seconds.
    assert "startupProbe" not in engine
    live = engine["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] <= 15 and live["failureThreshold"] >= 2
    assert sidecar["startupProbe"]["httpGet"]["path"] == "/livez"  # the engine starts once firstlight listens
    wrapper, engine_cmd = _engine_cmdlines(engine)
    assert re.search(_arg(args, "--pid-from"), engine_cmd), "the pattern matches the engine's command line"
    if wrapper is not None:
        assert not re.search(_arg(args, "--pid-from"), wrapper), "and not the wrapper's: one deployment per start"


def _engine_cmdlines(engine: dict[str, Any]) -> tuple[str | None, str]:
    """What the sidecar sees in /proc/PID/cmdline: the bash wrapper for a moment, then the engine it execs (an
    entry-point script such as ``vllm`` shows as its interpreter plus the script's path); no wrapper when the
    container runs the engine itself."""
    script = " ".join(engine["args"])
    if engine["command"][0] not in ("/bin/bash", "/bin/sh", "bash", "sh"):
        return None, f"/usr/bin/python3 /usr/local/bin/{' '.join([*engine['command'], script])}"
    wrapper = " ".join([*engine["command"], script])
    execd = script.split("exec ")[-1].strip()
    return wrapper, execd if execd.startswith("python3 ") else f"/usr/bin/python3 /usr/local/bin/{execd}"


def test_the_node_log_sidecar_reads_the_engine_containers_cri_file():
    """The kubelet's path of a container's log, /var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log, from the
    downward API, on the node's directory mounted read-only; the engine itself unwrapped (its output is the
    container's, which the runtime writes there)."""
    path = REPO / "deploy" / "k8s" / "vllm-sidecar-node-log.yaml"
    spec = deployment(path)["spec"]["template"]["spec"]
    (sidecar,) = spec["initContainers"]
    (engine,) = spec["containers"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in sidecar["env"] if "valueFrom" in e}
    log = _arg(sidecar["args"], "--log")
    expanded = re.sub(r"\$\((\w+)\)", lambda m: "{" + env[m.group(1)] + "}", log)  # as the kubelet does
    assert expanded == f"/var/log/pods/{{metadata.namespace}}_{{metadata.name}}_{{metadata.uid}}/{engine['name']}/0.log"
    mount = next(m for m in sidecar["volumeMounts"] if log.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["hostPath"]["path"] == mount["mountPath"] == "/var/log/pods"
    assert "tee" not in " ".join([*engine["command"], *engine["args"]])
    assert not any("engine-log" in m["name"] for m in engine.get("volumeMounts", []))


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_startup_budget_and_progress_deadline_come_from_history(path: Path):
    budget = probe_budget("x", [FIELD_NOTES_P95_S])
    d = deployment(path)
    assert d["spec"]["progressDeadlineSeconds"] == budget.progress_deadline_s > 600
    engine = d["spec"]["template"]["spec"]["containers"][0]
    if path in SIDECARS:  # liveness from the start (firstlight's /livez): the budget bounds only the rollout
        return
    startup = engine["startupProbe"]
    assert (startup["periodSeconds"], startup["failureThreshold"]) == (budget.period_s, budget.failure_threshold)


@pytest.mark.parametrize("path", ALL_MANIFESTS, ids=lambda p: p.name)
def test_every_number_has_a_comment(path: Path):
    lines = path.read_text().splitlines()
    number = re.compile(r"(:\s*|-\s*|\[\s*)\"?\d+(Gi|Mi|m)?\"?\s*(,|}|]|$|#)")
    for i, line in enumerate(lines):
        code = line.split("#", 1)[0]
        if not number.search(code) or code.strip().startswith("apiVersion"):
            continue
        near = lines[max(0, i - 4): i + 1]
        assert any("#" in n for n in near), f"{path.name}:{i + 1}: a number without a comment: {line.strip()}"


def test_nearest_rank_never_interpolates():
    assert nearest_rank([1, 2, 3, 4], 95) == 4 and nearest_rank([5], 95) == 5
    assert nearest_rank(list(range(1, 101)), 95) == 95


# -- LeaderWorkerSet (issue 33): the CRD's own schema for the set, Kubernetes' for each Pod template -----------------
def _strict(schema: Any) -> Any:
    """kubernetes-validate's strictness for a CRD schema: an object with named properties takes no others (a CRD
    prunes unknown fields silently; a typo must fail here instead)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def validate_lws(validate: Any) -> Any:
    import json

    import jsonschema

    schema = _strict(json.loads(LWS_SCHEMA.read_text())["schema"])

    def check(doc: dict[str, Any], version: str) -> None:
        assert (doc["apiVersion"], doc["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
        jsonschema.validate(doc, schema)
        lwt = doc["spec"]["leaderWorkerTemplate"]
        for name in ("leaderTemplate", "workerTemplate"):  # each a core/v1 PodTemplateSpec
            validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
                      "template": lwt[name]}, version)

    return check


def _lws(path: Path) -> dict[str, Any]:
    return next(d for d in docs(path) if d["kind"] == "LeaderWorkerSet")


def test_leaderworkerset_validation_can_fail(validate_lws: Any):
    import jsonschema

    doc = copy.deepcopy(_lws(LWS_MANIFESTS[0]))
    doc["spec"]["leaderWorkerTemplate"]["sise"] = 2  # a typo in the set
    with pytest.raises(jsonschema.ValidationError):
        validate_lws(doc, K8S_VERSIONS[0])
    doc = copy.deepcopy(_lws(LWS_MANIFESTS[0]))
    doc["spec"]["leaderWorkerTemplate"]["size"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        validate_lws(doc, K8S_VERSIONS[0])
    doc = copy.deepcopy(_lws(LWS_MANIFESTS[0]))
    doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(Exception, match="readinesProbe"):  # a typo in a Pod template
        validate_lws(doc, K8S_VERSIONS[0])


@pytest.mark.parametrize("path", LWS_MANIFESTS, ids=lambda p: p.name)
def test_a_leaderworkerset_asks_firstlight_on_every_pod_and_the_leader_reads_each_workers_sidecar(path: Path):
    """Every engine's probes ask its own Pod's firstlight (never the engine: a worker's dummy /health answers 200
    forever); each sidecar serves on the member port the leader derives from the LWS environment; the engine's
    command, as the container runs it, reads as the leader's server and the workers' worker."""
    from firstlight.engines import read_command
    from firstlight.runner.members import LWS_MEMBER_PORT, members_from_lws

    lws = _lws(path)
    lwt = lws["spec"]["leaderWorkerTemplate"]
    size, name = lwt["size"], lws["metadata"]["name"]
    leader_address = f"{name}-0.{name}.default"  # LWS: <lws>-<group>.<subdomain = lws name>.<namespace>
    for template, index, role in (("leaderTemplate", 0, "server"), ("workerTemplate", 1, "worker")):
        spec = lwt[template]["spec"]
        (sidecar,) = spec["initContainers"]
        (engine,) = spec["containers"]
        args = sidecar["args"]
        assert spec["shareProcessNamespace"] is True and sidecar["restartPolicy"] == "Always"
        assert args[0] == "watch" and "--member" not in args  # the members come from the LWS environment
        assert _arg(args, "--serve-readiness") == f"0.0.0.0:{LWS_MEMBER_PORT}"
        for probe, path_ in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
            assert engine[probe]["httpGet"] == {"path": path_, "port": LWS_MEMBER_PORT}, (template, probe)
        env = {"LWS_LEADER_ADDRESS": leader_address, "LWS_GROUP_SIZE": str(size), "LWS_WORKER_INDEX": str(index)}
        script = " ".join(engine["args"])
        for k, v in env.items():  # the kubelet expands $(VAR) in args before the container starts
            script = script.replace(f"$({k})", v)
        _wrapper, cmdline = _engine_cmdlines({**engine, "args": [script]})
        assert re.search(_arg(args, "--pid-from"), cmdline)
        cmd = read_command(cmdline)
        assert (cmd.engine, cmd.role, cmd.nnodes) == (path.name.split("-")[0], role, size), (template, cmd)
        # a worker that serves no port (vLLM --headless) is judged by its connection to the leader's address
        assert cmd.head == ((leader_address,) if role == "worker" and cmd.engine == "vllm" else ()), cmd
        assert args[1] == f"http://127.0.0.1:{cmd.port}"  # the sidecar watches the engine's own port
        members = members_from_lws(env)
        if index == 0:
            assert members == [f"http://{name}-0-{i}.{name}.default:{LWS_MEMBER_PORT}" for i in range(1, size)]
        else:
            assert members == []


def _containers(node: Any) -> list[dict[str, Any]]:
    """Every container and init container of a manifest, at any depth (a LeaderWorkerSet has two Pod templates)."""
    if isinstance(node, list):
        return [c for x in node for c in _containers(x)]
    if not isinstance(node, dict):
        return []
    found = [c for key in ("containers", "initContainers") for c in node.get(key) or []]
    return found + [c for v in node.values() for c in _containers(v)]


def _images() -> dict[str, set[str]]:
    """Each image repository the manifests name, with the tags they give it."""
    tags: dict[str, set[str]] = {}
    for path in ALL_MANIFESTS:
        for c in _containers(docs(path)):
            repo, _, tag = c["image"].rpartition(":")
            tags.setdefault(repo, set()).add(tag)
    return tags


def test_every_sidecar_runs_the_image_the_containerfile_builds_tagged_with_the_version():
    from firstlight._version import __version__

    sidecars = [c for p in ALL_MANIFESTS for c in _containers(docs(p)) if c["name"] == "firstlight"]
    assert len(sidecars) == 7, len(sidecars)  # one per sidecar manifest, two per LeaderWorkerSet
    assert {c["image"] for c in sidecars} == {f"firstlight:{__version__}"}
    assert f"podman build -t firstlight:{__version__} -f Containerfile ." in (REPO / "Containerfile").read_text()


def test_each_engine_image_has_one_tag_across_the_manifests_and_vllms_is_its_checked_release():
    from firstlight.engines import PROFILES

    tags = _images()
    assert {repo: t for repo, t in tags.items() if len(t) != 1} == {}, tags
    vllm = f"v{PROFILES['vllm'].checked_versions[0]}"
    assert tags["vllm/vllm-openai"] == {vllm} and tags["vllm-firstlight"] == {vllm}, tags
    assert set(tags) == {"firstlight", "vllm/vllm-openai", "vllm-firstlight", "lmsysorg/sglang"}, tags


# -- one history for the fleet -----------------------------------------------------------------------------------
def _sidecar_pods(path: Path) -> list[dict[str, Any]]:
    """The Pod specs of a manifest that run a firstlight sidecar (a Deployment's; a LeaderWorkerSet's two)."""
    if path in LWS_MANIFESTS:
        lwt = _lws(path)["spec"]["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    return [deployment(path)["spec"]["template"]["spec"]]


FLEET_MANIFESTS = [*SIDECARS, *LWS_MANIFESTS]
HISTORY_SECRET = "firstlight-history"  # docs/kubernetes.md: kubectl create secret generic firstlight-history


@pytest.mark.parametrize("path", FLEET_MANIFESTS, ids=lambda p: p.name)
def test_every_sidecar_shares_one_postgresql_history_its_password_from_a_secret(path: Path, tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    """FIRSTLIGHT_HISTORY names one PostgreSQL database and holds no secret; its password is the file the kubelet
    mounts from the Secret, read-only, where FIRSTLIGHT_HISTORY_PASSWORD_FILE points; the spool is on a volume
    of the Pod; no password is written in any manifest."""
    from firstlight.history.location import is_url, password_from_file, secrets

    urls = set()
    for spec in _sidecar_pods(path):
        (sidecar,) = spec["initContainers"]
        assert "--history" not in sidecar["args"]  # the environment names it, for `kubectl exec ... history` too
        env = {e["name"]: e for e in sidecar["env"]}
        url = env["FIRSTLIGHT_HISTORY"]["value"]
        assert is_url(url) and secrets(url) == [] and ":@" not in url, url
        urls.add(url)
        assert env["FIRSTLIGHT_NODE"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = sidecar["volumeMounts"]
        pw_file = env["FIRSTLIGHT_HISTORY_PASSWORD_FILE"]["value"]
        mount = next(m for m in mounts if pw_file.startswith(m["mountPath"] + "/"))
        assert mount.get("readOnly") is True
        secret = volumes[mount["name"]]["secret"]
        assert secret["secretName"] == HISTORY_SECRET and secret["defaultMode"] & 0o077 == 0  # its owner's only
        (item,) = secret["items"]
        assert pw_file == f"{mount['mountPath']}/{item['path']}" and item["key"] == "password"
        state = env["XDG_STATE_HOME"]["value"]
        spool = next(m for m in mounts if state.startswith(m["mountPath"] + "/"))
        assert not spool.get("readOnly") and "emptyDir" in volumes[spool["name"]]
        # as the kubelet mounts it: firstlight reads the Secret's value from that file
        where = tmp_path / path.name / item["path"]
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text("the-secret-value\n")
        monkeypatch.setenv("FIRSTLIGHT_HISTORY_PASSWORD_FILE", str(where))
        assert password_from_file() == "the-secret-value"
    assert len(urls) == 1  # every Pod of the manifest writes the same history
    assert not [d for d in docs(path) if d["kind"] == "Secret"]  # the password is never in a manifest
    text = path.read_text()
    assert "password=" not in text.replace("--from-literal=password=...", "")


def test_all_sidecar_manifests_point_at_the_same_history():
    urls = {e["value"] for p in FLEET_MANIFESTS for spec in _sidecar_pods(p) for e in spec["initContainers"][0]["env"]
            if e["name"] == "FIRSTLIGHT_HISTORY"}
    assert len(urls) == 1, urls
