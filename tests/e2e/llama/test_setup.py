"""The set-up proves what it built (issue 19): ``--check-only`` smoke-checks the real cached llama-server (one
completion at temperature 0), and refuses a binary that crashes when serving: a stand-in that answers
``--version`` and kills itself with SIGSEGV, placed with a valid stamp in a scratch cache -> exit 1, one line
naming SIGSEGV and the build log, no traceback."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.common import REPO, require

SCRIPT = REPO / "scripts" / "setup_llama_server.py"


@pytest.fixture(scope="module")
def setup() -> ModuleType:
    spec = importlib.util.spec_from_file_location("setup_llama_server", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_setup(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def real_paths() -> dict[str, str]:
    p = run_setup("--print-paths", timeout=120)
    require(p.returncode == 0, f"llama-server smoke-checked on this CPU ({p.stderr.strip()[-200:]}); "
                               "run: python scripts/setup_llama_server.py")
    paths: dict[str, str] = json.loads(p.stdout)
    return paths


def real_model(setup: ModuleType) -> Path:
    """The pinned model the real set-up extracted (it comes before the build)."""
    model = setup.Layout(setup.default_cache(), setup.default_isa()).model
    require(model.is_file(), f"the model at {model}; run: python scripts/setup_llama_server.py")
    return Path(model)


def test_check_only_passes_on_the_real_cached_binary():
    paths = real_paths()
    p = run_setup("--check-only")
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert (out["llama_server"], out["built"]) == (paths["llama_server"], False)
    assert "smoke check passed" in p.stderr
    smoke_log = Path(out["llama_server"]).parents[1] / "smoke.log"
    assert "llama_server" in smoke_log.read_text(errors="replace")  # the real server's own output


STAND_IN = """#!/bin/sh
# answers --version like llama-server, and dies of SIGSEGV when asked to serve
if [ "$1" = "--version" ]; then
    echo "version: 0.0 (stand-in)" >&2
    exit 0
fi
echo "srv  llama_server: initializing ..." >&2
kill -SEGV $$
"""


def test_check_only_refuses_a_binary_that_crashes_and_names_the_signal_and_the_build_log(
        setup: ModuleType, tmp_path: Path):
    model = real_model(setup)
    cache = tmp_path / "cache"
    layout = setup.Layout(cache, setup.default_isa())
    layout.server.parent.mkdir(parents=True)
    layout.server.write_text(STAND_IN)
    layout.server.chmod(0o755)
    _rpc_stand_in(layout, RPC_LISTENS)
    (layout.build_dir / "build.log").write_text("(the build's output)\n")
    layout.stamp.write_text(json.dumps({
        "format": setup.STAMP_FORMAT, "sdist_sha256": setup.LLAMA_SDIST_SHA256, "isa": layout.isa,
        "cmake_flags": setup.build_flags(layout.isa), "version": "0.0 (stand-in)",
        "smoke_passed_on": [setup.cpu_key()],  # even a recorded pass does not make --check-only trust it
    }))
    layout.models.mkdir(parents=True)
    layout.model.symlink_to(model)

    p = run_setup("--cache", str(cache), "--check-only")
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    errors = [line for line in p.stderr.splitlines() if line.startswith("setup_llama_server: error:")]
    assert len(errors) == 1 and p.stderr.rstrip().endswith(errors[0]), p.stderr
    assert "died of SIGSEGV (signal 11)" in errors[0]
    assert f"build log: {layout.build_dir / 'build.log'}" in errors[0]
    assert (layout.build_dir / "smoke.log").read_text().startswith("srv  llama_server: initializing")
    assert not list((cache / "llama.cpp").glob("b*-baseline-*"))  # --check-only built nothing


def test_check_only_downloads_nothing_without_a_model(tmp_path: Path):
    p = run_setup("--cache", str(tmp_path / "empty"), "--check-only", timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("setup_llama_server: error: --check-only: no valid model")


# the RPC server's stand-ins: one listens on its -p port as the real one does, one dies of SIGSEGV first
RPC_LISTENS = f"""#!/bin/sh
exec {sys.executable} -c "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[4])));\
 s.listen(1); time.sleep(60)" "$@"
"""
RPC_CRASHES = """#!/bin/sh
echo "Starting RPC server v3.0.0"
kill -SEGV $$
"""


def _rpc_stand_in(layout: Any, script: str) -> None:
    layout.rpc_server.write_text(script)
    layout.rpc_server.chmod(0o755)


VERSION_ONLY = """#!/bin/sh
# answers --version like llama-server (--print-paths runs nothing else)
echo "version: 0.0 (stand-in)" >&2
exit 0
"""


def _stamped_layout(setup: ModuleType, tmp_path: Path, **stamp: object) -> tuple[Path, Any]:
    """A scratch cache whose binary passed its smoke check on this CPU, as a set-up run records it."""
    model = real_model(setup)
    cache = tmp_path / "cache"
    layout = setup.Layout(cache, setup.default_isa())
    layout.server.parent.mkdir(parents=True)
    layout.server.write_text(VERSION_ONLY)
    layout.server.chmod(0o755)
    _rpc_stand_in(layout, RPC_LISTENS)
    layout.stamp.write_text(json.dumps({
        "format": setup.STAMP_FORMAT, "sdist_sha256": setup.LLAMA_SDIST_SHA256, "isa": layout.isa,
        "cmake_flags": setup.build_flags(layout.isa), "version": "0.0 (stand-in)",
        "smoke_passed_on": [setup.cpu_key()], "server_sha256": setup.binaries_sha256(layout.server.parent), **stamp}))
    layout.models.mkdir(parents=True)
    layout.model.symlink_to(model)
    return cache, layout


def test_print_paths_trusts_the_binary_that_passed_and_not_one_replaced_in_place(setup: ModuleType, tmp_path: Path):
    cache, layout = _stamped_layout(setup, tmp_path)
    p = run_setup("--cache", str(cache), "--print-paths", timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["llama_server"] == str(layout.server)
    with open(layout.server, "a") as f:  # replaced in place: same path, same stamp, other bytes
        f.write("# another binary\n")
    p = run_setup("--cache", str(cache), "--print-paths", timeout=120)
    assert p.returncode == 3 and p.stdout == "", p.stderr
    assert "unchanged since" in p.stderr and "Traceback" not in p.stderr


def test_print_paths_does_not_trust_a_stamp_without_the_binarys_hash(setup: ModuleType, tmp_path: Path):
    cache, _ = _stamped_layout(setup, tmp_path, server_sha256=None)
    p = run_setup("--cache", str(cache), "--print-paths", timeout=120)
    assert p.returncode == 3 and p.stdout == "", p.stderr


def test_a_recorded_pass_holds_the_hash_of_the_binary_that_was_checked(setup: ModuleType, tmp_path: Path):
    _, layout = _stamped_layout(setup, tmp_path, server_sha256="0" * 64, smoke_passed_on=["another-cpu"])
    setup.record_smoke_pass(layout, setup.binaries_sha256(layout.server.parent))
    stamp = json.loads(layout.stamp.read_text())
    assert stamp["server_sha256"] == setup.binaries_sha256(layout.server.parent)
    assert stamp["smoke_passed_on"] == [setup.cpu_key()]  # passes of another binary are dropped
    assert setup.smoke_passed_here(layout)


def test_print_paths_does_not_trust_an_rpc_server_replaced_in_place(setup: ModuleType, tmp_path: Path):
    """The pass is for both binaries as they were: the RPC server changed after it, nothing is trusted."""
    cache, layout = _stamped_layout(setup, tmp_path)
    assert run_setup("--cache", str(cache), "--print-paths", timeout=120).returncode == 0
    with open(layout.rpc_server, "a") as f:
        f.write("# another binary\n")
    p = run_setup("--cache", str(cache), "--print-paths", timeout=120)
    assert p.returncode == 3 and p.stdout == "", p.stderr


def test_the_rpc_check_proves_the_rpc_server_listens_and_names_how_one_died(setup: ModuleType, tmp_path: Path):
    _, layout = _stamped_layout(setup, tmp_path)
    assert setup.rpc_check(layout.rpc_server, tmp_path / "rpc.log") is None  # it listened on its -p port
    _rpc_stand_in(layout, RPC_CRASHES)
    problem = setup.rpc_check(layout.rpc_server, tmp_path / "rpc.log")
    assert problem == f"ggml-rpc-server died of SIGSEGV (signal 11) before it listened (its output: {tmp_path}/rpc.log)"
    assert (tmp_path / "rpc.log").read_text().startswith("Starting RPC server")
