"""``scripts/setup_vllm.py --print-paths`` trusts only a vLLM whose smoke check passed on this CPU (issue 32): an
install whose check failed (its venv stamp is written before the check) printed its paths as if it served. A
scratch cache holding a stand-in venv python (it answers the version query, and dies when asked to serve) and
the real converted model, linked; nothing is installed and ~/.cache/firstlight is only read."""

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

SCRIPT = REPO / "scripts" / "setup_vllm.py"


@pytest.fixture(scope="module")
def setup() -> ModuleType:
    spec = importlib.util.spec_from_file_location("setup_vllm", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_setup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def _stand_in_venv(setup: ModuleType, tmp_path: Path, passed: bool) -> tuple[Path, Any]:
    real = setup.Layout(setup.default_cache()).model
    require(setup.valid_model(setup.Layout(setup.default_cache())), f"the converted model at {real}; run: python "
                                                                    "scripts/setup_vllm.py")
    cache = tmp_path / "cache"
    layout = setup.Layout(cache)
    layout.python.parent.mkdir(parents=True)
    versions = {**setup.PINS, **dict.fromkeys(setup.REMOVE)}
    layout.python.write_text(f"""#!/bin/sh
if [ "$1" = "-c" ]; then echo '{json.dumps(versions)}'; exit 0; fi
echo "stand-in vLLM: dies before it serves" >&2
exit 1
""")
    layout.python.chmod(0o755)
    stamp = {"format": setup.STAMP_FORMAT, "pins": setup.PINS, "versions": versions}
    if passed:
        stamp["smoke_passed_on"] = [setup._smoke_key(layout)]
    layout.venv_stamp.write_text(json.dumps(stamp))
    layout.models.mkdir(parents=True)
    layout.model.symlink_to(real, target_is_directory=True)
    return cache, layout


def test_print_paths_refuses_an_install_whose_smoke_check_never_passed(setup: ModuleType, tmp_path: Path):
    cache, _ = _stand_in_venv(setup, tmp_path, passed=False)
    p = run_setup("--cache", str(cache), "--print-paths")
    assert p.returncode == 3 and p.stdout == "", p.stderr
    assert "passed its smoke check" in p.stderr and "Traceback" not in p.stderr


def test_a_failed_check_takes_back_the_pass_print_paths_trusted(setup: ModuleType, tmp_path: Path):
    cache, layout = _stand_in_venv(setup, tmp_path, passed=True)
    p = run_setup("--cache", str(cache), "--print-paths")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["python"] == str(layout.python)
    p = run_setup("--cache", str(cache), "--check-only")  # the stand-in dies: the smoke check fails
    assert p.returncode == 1 and "does not serve" in p.stderr, p.stderr
    assert json.loads(layout.venv_stamp.read_text())["smoke_passed_on"] == []
    p = run_setup("--cache", str(cache), "--print-paths")
    assert p.returncode == 3 and p.stdout == "", p.stderr
