"""The sidecar image the Containerfile builds, under the real podman: built from the wheel, it runs as a non-root
user on a read-only root filesystem, holds no compiler, and, as a sidecar in one pod beside a server (the
simulator; the real llama-server in a container of its own), serves ``/readyz`` once the server serves.

The base: the image ``FIRSTLIGHT_IMAGE_BASE`` names, else the Containerfile's default (``python:3.12-slim-bookworm``)
where podman's local store has it, else one made here without a registry from this machine's Debian packages
(``tests/support/base_image.py``: Python, its venv module, a shell, ``useradd`` and what they depend on), imported
and passed as ``BASE``. Building needs the package index (setuptools, the runtime dependencies).
The Containerfile's shape (stages, user, entrypoint, no HEALTHCHECK) is checked in process by
``tests/unit/test_packaging.py``, the manifests' image names by ``tests/unit/deploy/test_k8s.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from firstlight._version import __version__
from firstlight.sim.fixtures import free_port
from tests.support.base_image import can_make, write_rootfs
from tests.support.common import REPO, require, wait_for
from tests.support.llama_server import llama  # noqa: F401  the fixture: the set-up's llama-server and model

BUILD_S = 600  # the two stages' pip installs, on a loaded 2-core machine
PODMAN_S = 120
DEFAULT_BASE = "docker.io/library/python:3.12-slim-bookworm"  # the Containerfile's ARG BASE
# podman's default ulimits are refused on these machines (tests/e2e/containers/test_containers.py says why)
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=16384:16384"]
[engine]
events_logger = "file"
cgroup_manager = "cgroupfs"
"""


def _podman(env: dict[str, str], *args: str, timeout: float = PODMAN_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _ok(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, (p.args, p.stdout[-3000:], p.stderr[-3000:])
    return p


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    require(shutil.which("podman") is not None, "podman (Debian's package: scripts/test.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("podman is proven to run containers here as root only (rootless: not tried)")
    work = tmp_path_factory.mktemp("image")
    conf = CONTAINERS_CONF + ('runtime = "runc"\n' if shutil.which("runc") else "")
    (work / "containers.conf").write_text(conf)
    env = {**os.environ, "CONTAINERS_CONF": str(work / "containers.conf")}
    run_id = uuid.uuid4().hex[:8]
    tag, made = f"localhost/firstlight-image-test:{run_id}", None
    base = os.environ.get("FIRSTLIGHT_IMAGE_BASE", DEFAULT_BASE)
    if _podman(env, "image", "exists", base).returncode != 0:  # no registry: a base from Debian's packages
        require(can_make(), "Debian's python3-venv package, to make a base image without a registry")
        rootfs = work / "base.tar"
        write_rootfs(rootfs)
        base = made = f"localhost/firstlight-test-base:{run_id}"
        _ok(_podman(env, "import", str(rootfs), made))
    try:
        # --layers=false: the builder stage leaves no image behind
        _ok(_podman(env, "build", "--pull=never", "--layers=false", "--network", "host", "--build-arg", f"BASE={base}",
                    "-t", tag, "-f", str(REPO / "Containerfile"), str(REPO), timeout=BUILD_S))
        yield tag, env
    finally:
        _podman(env, "rmi", "-f", tag)
        if made:
            _podman(env, "rmi", "-f", made)


def test_the_image_runs_firstlight_as_a_non_root_user_on_a_read_only_root(image: tuple[str, dict[str, str]]):
    tag, env = image
    version = _ok(_podman(env, "run", "--rm", "--read-only", tag, "--version"))
    assert version.stdout.splitlines()[0] == f"firstlight, version {__version__}"
    uid = _ok(_podman(env, "run", "--rm", "--read-only", "--entrypoint", "id", tag, "-u"))
    assert uid.stdout.strip() not in ("", "0"), uid.stdout
    config = json.loads(_ok(_podman(env, "image", "inspect", tag)).stdout)[0]["Config"]
    assert config.get("Entrypoint") == ["firstlight"] and not config.get("Healthcheck"), config


def test_the_image_holds_the_installed_wheel_and_no_sources_nor_compiler(image: tuple[str, dict[str, str]]):
    tag, env = image
    p = _podman(env, "run", "--rm", "--entrypoint", "sh", tag, "-c",
                "for c in gcc cc c++ g++ clang make; do command -v $c; done; ls -d /src /tmp/dist 2>/dev/null; true")
    assert p.returncode == 0 and p.stdout.strip() == "", (p.stdout, p.stderr[-2000:])
    where = _ok(_podman(env, "run", "--rm", "--entrypoint", "/opt/firstlight/bin/python", tag, "-c",
                        "import firstlight; print(firstlight.__file__)"))
    assert where.stdout.startswith("/opt/firstlight/lib/"), where.stdout


def test_the_image_as_a_sidecar_in_one_pod_serves_readyz_once_the_server_serves(
        image: tuple[str, dict[str, str]], tmp_path: Path):
    tag, env = image
    pod, port, ready = f"fl-pod-{uuid.uuid4().hex[:8]}", free_port(), free_port()
    _ok(_podman(env, "pod", "create", "--name", pod, "--network", "host"))
    try:
        # the server: the simulator the wheel ships, in the same image (its Python), sharing the pod's network
        _ok(_podman(env, "run", "-d", "--pod", pod, "--read-only", "--entrypoint", "/opt/firstlight/bin/python",
                    tag, "-m", "firstlight.sim", "--scenario", "normal", "--port", str(port), "--load-seconds", "2"))
        _ok(_podman(env, "run", "-d", "--pod", pod, "--read-only", "--tmpfs", "/var/lib/firstlight", tag, "watch",
                    f"http://127.0.0.1:{port}", "--serve-readiness", f"127.0.0.1:{ready}", "--history",
                    "/var/lib/firstlight/history.sqlite3", "--timeout", "120"))

        def readyz() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{ready}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(readyz, 180, "the sidecar's /readyz to answer 200")
    finally:
        _podman(env, "pod", "rm", "-f", "-t", "0", pod)


@pytest.mark.llama
def test_the_image_as_a_sidecar_beside_a_real_llama_server_container_reads_its_log_and_serves_readyz(
        image: tuple[str, dict[str, str]], llama: dict[str, str], tmp_path: Path):  # noqa: F811 (the fixture)
    """As deploy/k8s/ wires it: one pod sharing the network and the PID namespace, the engine's output teed to a
    shared log, the sidecar started first (non-root, read-only root) watching the engine by its command line."""
    tag, env = image
    cache = Path(llama["llama_server"]).resolve().parents[3]  # ~/.cache/firstlight: the binary and the model
    logs = tmp_path / "logs"
    logs.mkdir()
    logs.chmod(0o777)  # the engine writes it as uid 10001
    pod, port, ready = f"fl-pod-{uuid.uuid4().hex[:8]}", free_port(), free_port()
    _ok(_podman(env, "pod", "create", "--name", pod, "--network", "host", "--share", "ipc,net,uts,pid"))
    try:
        sidecar = _ok(_podman(env, "run", "-d", "--pod", pod, "--read-only", "--tmpfs", "/var/lib/firstlight",
                              "-v", f"{logs}:/var/log/engine:ro", "-v", f"{cache}:{cache}:ro", tag, "watch", f"http://127.0.0.1:{port}",
                              "--pid-from", "bin/llama-server", "--engine", "llamacpp", "--log",
                              "/var/log/engine/engine.log", "--serve-readiness", f"127.0.0.1:{ready}",
                              "--history", "/var/lib/firstlight/history.sqlite3", "--timeout", "240")).stdout.strip()

        def answer(path: str) -> int:
            try:
                return httpx.get(f"http://127.0.0.1:{ready}{path}", timeout=2).status_code
            except httpx.HTTPError:
                return 0

        wait_for(lambda: answer("/livez") == 200, PODMAN_S, "the sidecar to listen before the engine starts")
        assert answer("/readyz") == 503
        server = " ".join([llama["llama_server"], "-m", llama["model"], "--host", "127.0.0.1", "--port", str(port),
                           "-np", "1", "-c", "2048"])
        # the engine as the manifests run it: its output teed to the shared log; the same uid as the sidecar, so
        # the sidecar reads its /proc/PID/io; the host's /usr holds llama-server's libraries
        _ok(_podman(env, "run", "-d", "--pod", pod, "--user", "10001", "-v", "/usr:/usr:ro", "-v",
                    f"{cache}:{cache}:ro", "-v", f"{logs}:/var/log/engine", "--entrypoint", "sh", tag, "-c",
                    f"{server} 2>&1 | tee /var/log/engine/engine.log"))
        wait_for(lambda: answer("/readyz") == 200, 240, "the sidecar's /readyz to answer 200")
        info = json.loads(_ok(_podman(env, "container", "inspect", sidecar)).stdout)[0]
        assert info["Config"]["User"].split(":")[0] not in ("", "0", "root"), info["Config"]["User"]
        assert info["HostConfig"]["ReadonlyRootfs"] is True
        out = _podman(env, "logs", sidecar)
        text = out.stdout + out.stderr
        assert re.search(r"start +watching pid \d+: engine llamacpp", text), text[-3000:]  # found by --pid-from
        assert re.search(r"because log: line \d+: .*model loaded", text), text[-3000:]  # the shared log, read
        assert "READY    serving after" in text, text[-3000:]
    finally:
        _podman(env, "pod", "rm", "-f", "-t", "0", pod)
