"""The wheel and the sdist on their own: built with ``python -m build`` (the wheel from the sdist, so the sdist holds
what building needs), the wheel installed into a fresh venv (no system site-packages, no PYTHONPATH, its working
directory outside the tree), and the commands the README shows run from there.

One build and one venv serve every test of this module (tests/conftest.py keeps the module on one xdist worker).
The in-process checks of the packaging metadata: ``tests/unit/test_packaging.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from firstlight._version import __version__
from firstlight.cli.app import version_text
from firstlight.sim.fixtures import free_port
from tests.support.common import REPO, SHARED, require
from tests.support.llama_server import llama  # noqa: F401  the fixture: the set-up's llama-server and model

# What a user's clone has that a build never reads: copying them would only slow the copy.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".mutation", "mutants", ".cache", ".whl", "build", "dist",
                                   "*.egg-info", "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache",
                                   ".ruff_cache", ".coverage*")


@dataclass(frozen=True)
class Installed:
    sdist: Path
    wheel: Path
    venv: Path
    home: Path  # a working directory outside the tree
    build_log: str

    def env(self) -> dict[str, str]:
        """The user's environment: the venv's bin first, nothing pointing at the tree."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(cmd), cwd=self.home, env=self.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


def _check(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, (p.args, p.stdout[-3000:], p.stderr[-3000:])
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("packaging")
    src = root / "src"
    shutil.copytree(REPO, src, ignore=NOT_SOURCE, symlinks=True)
    dist = root / "dist"
    # no --sdist/--wheel: build makes the sdist, unpacks it and builds the wheel from it
    built = _check(subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
                                  capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL))
    (sdist,) = dist.glob("firstlight-*.tar.gz")
    (wheel,) = dist.glob("firstlight-*-py3-none-any.whl")
    home = root / "home"
    home.mkdir()
    venv = root / "venv"
    _check(subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=120))
    inst = Installed(sdist, wheel, venv, home, built.stdout + built.stderr)  # build's steps go to stderr
    # pytest for the plugin's check; the runtime dependencies come from the index, as a user's would
    _check(inst.run(str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                    str(wheel), "pytest", timeout=600))
    yield inst


def _package_files(names: list[str], prefix: str = "") -> set[str]:
    return {n[len(prefix):] for n in names
            if n.startswith(prefix + "firstlight/") and not n.endswith("/") and "__pycache__" not in n}


def _tree_files() -> set[str]:
    return {p.relative_to(REPO).as_posix() for p in (REPO / "firstlight").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_the_sdist_holds_what_building_needs_and_the_wheel_is_built_from_it(installed: Installed):
    assert "Building wheel from sdist" in installed.build_log, installed.build_log[-2000:]
    with tarfile.open(installed.sdist) as t:
        names = [m.name for m in t.getmembers() if m.isfile()]
    top = f"firstlight-{__version__}/"
    assert {top + "pyproject.toml", top + "README.md"} <= set(names)
    assert _package_files(names, top) == _tree_files()


def test_the_wheel_holds_every_file_of_the_package_its_data_included(installed: Installed):
    with zipfile.ZipFile(installed.wheel) as z:
        names = z.namelist()
        entry_points = z.read(f"firstlight-{__version__}.dist-info/entry_points.txt").decode()
    files = _package_files(names)
    assert files == _tree_files()
    assert "firstlight/sim/data/sglang-eagle-llama2-specdec.log" in files  # what `firstlight demo --real` replays
    assert "firstlight = firstlight.cli:main" in entry_points
    assert re.search(r"\[pytest11\]\s*\nfirstlight = firstlight.pytest_plugin", entry_points), entry_points


def test_the_venv_runs_the_installed_package_not_the_tree(installed: Installed):
    p = _check(installed.run(str(installed.venv / "bin" / "python"), "-c",
                             "import firstlight, sys; print(firstlight.__file__); print(sys.flags.no_site)"))
    where = Path(p.stdout.splitlines()[0])
    assert where.is_relative_to(installed.venv), where
    assert not where.is_relative_to(REPO)
    cfg = (installed.venv / "pyvenv.cfg").read_text()
    assert re.search(r"include-system-site-packages\s*=\s*false", cfg), cfg


def test_version_from_the_wheel_names_the_checked_engine_releases(installed: Installed):
    p = _check(installed.run("firstlight", "--version"))
    assert p.stdout.splitlines()[0] == f"firstlight, version {__version__}"
    assert p.stdout.rstrip("\n") == version_text()  # the profiles' data travels in the wheel
    assert "b11434" in p.stdout and "0.32.0" in p.stdout


def test_demo_and_the_real_demo_from_the_wheel_reach_ready(installed: Installed):
    """``demo`` (the simulated start) and ``demo --real`` (the packaged SGLang log, replayed with its timing), side
    by side: each takes about 25 s."""
    def start(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["firstlight", "demo", *args], cwd=installed.home, env=installed.env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

    t0 = time.monotonic()
    sim, real = start(), start("--real", "--json")
    out, err = sim.communicate(timeout=240)
    real_out, real_err = real.communicate(timeout=240)
    took = time.monotonic() - t0
    assert sim.returncode == 0, (out[-3000:], err[-3000:])
    assert re.search(r"^\[\s*[\d.]+s\] READY\s+serving after", out + err, re.M), out[-3000:]
    assert real.returncode == 0, (real_out[-3000:], real_err[-3000:])
    assert "sglang-eagle-llama2-specdec.log" in real_err
    summaries = [json.loads(line) for line in real_out.splitlines() if line.startswith('{"event": "summary"')]
    assert [s["verdict"] for s in summaries] == ["ready"], real_out[-3000:]
    assert took < 180, took


def test_replay_of_a_real_log_from_the_wheel(installed: Installed):
    log = SHARED / "logs" / "sglang-cuda-graph-no-kernel-image.log"
    require(log.is_file(), f"the real startup logs at {SHARED / 'logs'}")
    p = installed.run("firstlight", "replay", str(log), "--json")
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr[-2000:])
    report = json.loads(p.stdout)
    assert (report["engine"], report["outcome"], report["failure"]) == ("sglang", "failed", "kernel_image")


def test_the_pytest_plugin_from_the_wheel_serves_a_fixture(installed: Installed):
    project = installed.home / "project"
    project.mkdir()
    (project / "test_served.py").write_text(textwrap.dedent("""
        import httpx

        def test_completion(firstlight_server):
            r = httpx.post(f"{firstlight_server.url}/v1/completions", json={"prompt": "Hi", "max_tokens": 4},
                           timeout=60)
            assert r.status_code == 200
    """))
    py = installed.venv / "bin" / "python"
    server = f"{py} -m firstlight.sim --scenario normal --port {{port}} --load-seconds 0.5"
    p = subprocess.run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--firstlight-cmd", server,
                        "--firstlight-timeout", "120"], cwd=project, env=installed.env(), capture_output=True,
                       text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    assert "1 passed" in p.stdout, p.stdout[-2000:]


@pytest.mark.llama
def test_preflight_and_up_from_the_wheel_against_the_real_llama_server(
        installed: Installed, llama: dict[str, str]):  # noqa: F811 (the fixture imported above)
    """The README's first start, `firstlight up -- llama-server ...`, and the checks before it, from the wheel."""
    server = [llama["llama_server"], "-m", llama["model"], "--host", "127.0.0.1", "--port", str(free_port()),
              "-np", "1", "-c", "2048"]
    pre = installed.run("firstlight", "preflight", "--", *server, timeout=120)
    assert pre.returncode == 0, (pre.stdout[-2000:], pre.stderr[-2000:])
    assert re.search(r"preflight checkpoint\s+ok", pre.stdout + pre.stderr), pre.stdout[-2000:] + pre.stderr[-2000:]
    up = installed.run("firstlight", "up", "--quiet-server", "--stop-when-ready", "--json", "--", *server,
                       timeout=240)
    assert up.returncode == 0, (up.stdout[-3000:], up.stderr[-3000:])
    summary = [json.loads(x) for x in up.stdout.splitlines() if x.startswith('{"event": "summary"')]
    assert [(s["verdict"], s["engine"]) for s in summary] == [("ready", "llamacpp")], up.stdout[-3000:]
