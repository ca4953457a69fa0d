"""The one reader of a server's launch command (firstlight/engines/command.py), over every engine's real launch
forms: ``python -m``, console scripts, ``env``, ``uv run``, ``torchrun``, ``docker``/``podman run``, shell
wrappers (``bash -c``, a script file); and the readers that use it agree (preflight, the live weights, the URL
guess, the history key)."""

from __future__ import annotations

import dataclasses
import os
import shlex
import stat
from pathlib import Path
from typing import Any

import pytest

from firstlight.config import Config, ProbeConfig
from firstlight.engines import detect_from_command, get_profile, read_command
from firstlight.preflight.target import read_target
from firstlight.redact import Redactor
from firstlight.runner.after_ready import deployment_key
from firstlight.runner.sources import server_command

HF = "-v ~/.cache/huggingface:/root/.cache/huggingface"

# (command, environment it starts in, what the reader must say). Only the named fields are checked; ``url`` is
# where this machine reaches the server (a container's published port).
CASES: list[tuple[str, dict[str, str] | None, dict[str, Any]]] = [
    # --- SGLang ---------------------------------------------------------------------------------------------------
    ("python -m sglang.launch_server --model-path /m --port 30010 --host 0.0.0.0 --tp 2", None,
     dict(engine="sglang", model="/m", port=30010, host="0.0.0.0", tp=2, url="http://127.0.0.1:30010")),
    ("python3 -m sglang.launch_server --model-path=Qwen/Qwen2.5-7B --tp-size=4 --dp-size 2 --pp-size 2 --nnodes 2 "
     "--quantization fp8", None,
     dict(engine="sglang", model="Qwen/Qwen2.5-7B", tp=4, dp=2, pp=2, nnodes=2, quantization="fp8", port=30000,
          url="http://127.0.0.1:30000")),
    ("/opt/venv/bin/python3.11 -u -X faulthandler -m sglang.launch_server --model /m", None,
     dict(engine="sglang", model="/m", module="sglang.launch_server")),
    ("sglang serve --model-path m --port 30011", None, dict(engine="sglang", model="m", port=30011)),
    ("torchrun --nproc_per_node 8 --nnodes 2 --node-rank 0 -m sglang.launch_server --model-path /m", None,
     dict(engine="sglang", model="/m", nnodes=2, wrappers=("torchrun",), role="server")),
    # an SGLang node of rank >= 1 runs only schedulers: a worker (its port opens once they are ready)
    ("python -m sglang.launch_server --model-path /m --nnodes 2 --node-rank 1 --dist-init-addr 10.0.0.1:5000", None,
     dict(engine="sglang", nnodes=2, node_rank=1, role="worker")),
    ("python -m sglang.launch_server --model-path /m --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000", None,
     dict(engine="sglang", nnodes=2, node_rank=0, role="server", head=())),
    ("uv run --with sglang[all] python -m sglang.launch_server --model-path /m --port 30012", None,
     dict(engine="sglang", model="/m", port=30012, wrappers=("uv run",))),
    (f"docker run --gpus all --shm-size 32g -p 30000:30000 {HF} --env HF_TOKEN=x --ipc=host lmsysorg/sglang:latest "
     "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 30000",
     None,
     dict(engine="sglang", model="meta-llama/Llama-3.1-8B-Instruct", model_local="meta-llama/Llama-3.1-8B-Instruct",
          image="lmsysorg/sglang:latest", env_set=(("HF_TOKEN", "x"),), url="http://127.0.0.1:30000",
          wrappers=("docker run",))),
    # --- vLLM -----------------------------------------------------------------------------------------------------
    ("env VLLM_CPU_KVCACHE_SPACE=1 python -m vllm.entrypoints.openai.api_server --model /d", None,
     dict(engine="vllm", model="/d", model_local="/d", port=8000, env_set=(("VLLM_CPU_KVCACHE_SPACE", "1"),),
          wrappers=("env",), module="vllm.entrypoints.openai.api_server", url="http://127.0.0.1:8000")),
    ("python3 -m vllm.entrypoints.openai.api_server --model=/x --port=8001 --host=127.0.0.1", None,
     dict(engine="vllm", model="/x", port=8001, host="127.0.0.1", url="http://127.0.0.1:8001")),
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 4 -pp 2 --quantization awq --port 8001", None,
     dict(engine="vllm", model="Qwen/Qwen3-8B", tp=4, pp=2, quantization="awq", port=8001)),
    ("vllm serve /m -tp 2 --data-parallel-size=2 --nnodes 2 -q fp8", None,
     dict(engine="vllm", model="/m", tp=2, dp=2, nnodes=2, quantization="fp8")),
    ("VLLM_USE_V1=1 CUDA_VISIBLE_DEVICES=0,1 vllm serve m", None,
     dict(engine="vllm", model="m", env_set=(("VLLM_USE_V1", "1"), ("CUDA_VISIBLE_DEVICES", "0,1")))),
    (f"docker run --runtime nvidia --gpus all {HF} --env HF_TOKEN=t -p 8000:8000 --ipc=host vllm/vllm-openai:latest "
     "--model mistralai/Mistral-7B-v0.1", None,
     dict(engine="vllm", model="mistralai/Mistral-7B-v0.1", server=("vllm", "serve", "--model",
                                                                    "mistralai/Mistral-7B-v0.1"),
          url="http://127.0.0.1:8000")),
    ("docker run -it --rm -v /data/models:/models -p 9000:8000 vllm/vllm-openai:v0.8.4 /models/qwen --port 8000",
     None,
     dict(engine="vllm", model="/models/qwen", model_local="/data/models/qwen", port=8000, url="http://127.0.0.1:9000")),
    ("podman run --rm --network host vllm/vllm-openai --model m --port 8100", None,
     dict(engine="vllm", model="m", url="http://127.0.0.1:8100", wrappers=("podman run",))),
    ("docker run -p 8000:8000 vllm/vllm-openai --model /models/q", None,
     dict(engine="vllm", model="/models/q", model_local=None)),  # inside the container, no mount holds it
    ("bash -c 'source /venv/bin/activate && exec vllm serve m --port 9000'", None,
     dict(engine="vllm", model="m", port=9000, wrappers=("bash -c",), server=("vllm", "serve", "m", "--port", "9000"))),
    ("sh -c 'cd /srv; python -m vllm.entrypoints.openai.api_server --model /m' sh", None,
     dict(engine="vllm", model="/m", wrappers=("sh -c",))),
    ("uv run --python 3.12 --with vllm vllm serve m", None, dict(engine="vllm", model="m", wrappers=("uv run",))),
    ("uv run --frozen -m vllm.entrypoints.openai.api_server --model /m", None,
     dict(engine="vllm", model="/m", module="vllm.entrypoints.openai.api_server")),
    ("uvx --from vllm vllm serve m --port 8002", None, dict(engine="vllm", model="m", port=8002)),
    # a vLLM --headless node serves no HTTP (docs/serving/parallelism_scaling.md): a worker joining its head, whose
    # host is --master-addr (TP/PP), --data-parallel-address / -dpa (DP), else vLLM's default 127.0.0.1
    ("vllm serve /m -tp 8 --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --headless", None,
     dict(engine="vllm", nnodes=2, node_rank=1, role="worker", head=("10.0.0.1",))),
    ("vllm serve /m -dp 4 --data-parallel-size-local 2 --headless -dpa 10.0.0.2 --data-parallel-rpc-port 13345", None,
     dict(engine="vllm", dp=4, role="worker", head=("10.0.0.2",), node_rank=None)),
    ("vllm serve /m -n 2 -r 1 --master-addr=10.0.0.1 --data-parallel-address 10.0.0.3 --headless", None,
     dict(nnodes=2, node_rank=1, role="worker", head=("10.0.0.1", "10.0.0.3"))),
    ("vllm serve /m --headless", None, dict(role="worker", head=("127.0.0.1",))),
    # vLLM says "worker" by --headless alone: its head (rank 0) and a rank-1 node that serves an API are servers
    ("vllm serve /m --nnodes 2 --node-rank 0 --master-addr 10.0.0.1", None,
     dict(engine="vllm", node_rank=0, role="server", head=())),
    ("vllm serve /m --nnodes 2 --node-rank 1 --master-addr 10.0.0.1", None, dict(node_rank=1, role="server", head=())),
    ("nohup nice -n 10 taskset -c 0-7 vllm serve m", None, dict(engine="vllm", model="m")),
    # --- llama.cpp ------------------------------------------------------------------------------------------------
    ("llama-server -m a.gguf --port 8081 --host 0.0.0.0", None,
     dict(engine="llamacpp", model="a.gguf", port=8081, host="0.0.0.0", url="http://127.0.0.1:8081")),
    ("./build/bin/llama-server --model=/m/a.gguf --rpc 192.168.1.2:50052,192.168.1.3:50052", None,
     dict(engine="llamacpp", model="/m/a.gguf", port=8080, host="127.0.0.1",
          rpc=("192.168.1.2:50052", "192.168.1.3:50052"))),
    # llama.cpp's RPC server: a worker of a multi-node start (-H/-p, its own defaults), even under a path that
    # names llama.cpp
    ("/cache/llama.cpp/b11434/bin/ggml-rpc-server -H 127.0.1.2 -p 50111 -t 1", None,
     dict(engine="llamarpc", host="127.0.1.2", port=50111, url="http://127.0.1.2:50111", role="worker")),
    ("rpc-server --host 0.0.0.0", None, dict(engine="llamarpc", port=50052, role="worker")),
    ("llama-server -m a.gguf --rpc 127.0.1.2:50052", None, dict(engine="llamacpp", role="server")),
    ("llama-server -hf ggml-org/gemma-3-1b-it-GGUF", None,
     dict(engine="llamacpp", model="ggml-org/gemma-3-1b-it-GGUF")),
    ("env LLAMA_ARG_PORT=9999 llama-server -m a.gguf", None, dict(engine="llamacpp", port=9999, model="a.gguf")),
    ("llama-server -m a.gguf", {"LLAMA_ARG_PORT": "9998"}, dict(port=9998)),  # inherited from the environment
    ("LLAMA_ARG_MODEL=/m/a.gguf llama-server", None, dict(engine="llamacpp", model="/m/a.gguf")),
    ("docker run -p 8080:8080 -v /srv/models:/models ghcr.io/ggml-org/llama.cpp:server -m /models/7B/q4_0.gguf "
     "--port 8080 --host 0.0.0.0", None,
     dict(engine="llamacpp", model="/models/7B/q4_0.gguf", model_local="/srv/models/7B/q4_0.gguf",
          url="http://127.0.0.1:8080", server=("llama-server", "-m", "/models/7B/q4_0.gguf", "--port", "8080",
                                               "--host", "0.0.0.0"))),
    # --- TGI ------------------------------------------------------------------------------------------------------
    ("text-generation-launcher --model-id org/x --num-shard 2 --quantize gptq --port 8080", None,
     dict(engine="tgi", model="org/x", tp=2, quantization="gptq", port=8080, host="0.0.0.0")),
    ("docker run --gpus all --shm-size 1g -p 8080:80 -v /srv/data:/data "
     "ghcr.io/huggingface/text-generation-inference:3.3.4 --model-id /data/m --port 80", None,
     dict(engine="tgi", model="/data/m", model_local="/srv/data/m", port=80, url="http://127.0.0.1:8080")),
    ("docker run -e MODEL_ID=org/x -e PORT=80 -p 127.0.0.2:8081:80 ghcr.io/huggingface/text-generation-inference:3.0",
     None, dict(engine="tgi", model="org/x", port=80, url="http://127.0.0.2:8081")),
    # --- TensorRT-LLM ---------------------------------------------------------------------------------------------
    ("trtllm-serve meta-llama/Llama-3.1-8B --tp_size 2 --pp_size 2 --port 8002", None,
     dict(engine="trtllm", model="meta-llama/Llama-3.1-8B", tp=2, pp=2, port=8002, url="http://localhost:8002")),
    ("trtllm-serve serve /engines/llama --host 0.0.0.0", None,
     dict(engine="trtllm", model="/engines/llama", url="http://127.0.0.1:8000")),
    ("docker run --gpus all -p 8003:8000 -v /e:/engines nvcr.io/nvidia/tensorrt-llm/release:1.0.0 "
     "trtllm-serve /engines/llama --host 0.0.0.0", None,
     dict(engine="trtllm", model_local="/e/llama", url="http://127.0.0.1:8003")),
    # --- LMDeploy -------------------------------------------------------------------------------------------------
    ("lmdeploy serve api_server internlm/internlm2_5-7b-chat --server-port 23334 --tp 2 --model-format awq", None,
     dict(engine="lmdeploy", model="internlm/internlm2_5-7b-chat", port=23334, tp=2, quantization="awq")),
    ("python -m lmdeploy serve api_server /m --server-name 127.0.0.1", None,
     dict(engine="lmdeploy", model="/m", host="127.0.0.1", port=23333)),
    ("docker run --gpus all -p 23333:23333 openmmlab/lmdeploy:latest lmdeploy serve api_server internlm/x", None,
     dict(engine="lmdeploy", model="internlm/x", url="http://127.0.0.1:23333")),
    # --- Ollama ---------------------------------------------------------------------------------------------------
    ("ollama serve", None, dict(engine="ollama", model=None, port=11434, host="127.0.0.1")),
    ("env OLLAMA_HOST=0.0.0.0:11500 ollama serve", None, dict(engine="ollama", port=11500, host="0.0.0.0",
                                                            url="http://127.0.0.1:11500")),
    ("docker run -d -v ollama:/root/.ollama -p 11434:11434 --name ollama ollama/ollama", None,
     dict(engine="ollama", server=("ollama", "serve"), url="http://127.0.0.1:11434")),
    # --- no known engine ------------------------------------------------------------------------------------------
    ("env X=1 python -m firstlight.sim --model-path /d --port 9", None,
     dict(engine=None, model="/d", port=9, url="http://127.0.0.1:9")),
    ("python -m firstlight.sim", None, dict(engine=None, model=None, url=None)),
    ("torchrun --nproc-per-node=2 /srv/serve.py --model /m --port 8007", None,
     dict(engine=None, model="/m", port=8007, server=("python", "/srv/serve.py", "--model", "/m", "--port", "8007"))),
    ("python my_server.py --port 7000", None, dict(engine=None, model=None, port=7000)),
    ("python -c 'import srv; srv.main()' --port 7001 --model /m", None, dict(engine=None, model="/m", port=7001)),
]


@pytest.mark.parametrize(("command", "env", "expect"), CASES, ids=[c[0][:70] for c in CASES])
def test_every_launch_form_of_every_engine(command: str, env: dict[str, str] | None, expect: dict[str, Any]) -> None:
    cmd = read_command(shlex.split(command), env=env)
    got = {k: getattr(cmd, k) for k in expect}
    assert got == expect
    assert read_command(command, env=env) == cmd  # one shell string reads as its words


def test_the_engine_is_told_from_the_program_for_every_launch_form() -> None:
    for command, _, expect in CASES:
        cmd = read_command(shlex.split(command))
        assert cmd.named_by_program == (expect.get("engine", cmd.engine) is not None), command
        assert detect_from_command(shlex.split(command)) == cmd.engine


def test_a_word_further_on_does_not_make_the_program_an_engine() -> None:
    cmd = read_command(["python", "bench.py", "--compare-with", "llama-server"])
    assert not cmd.named_by_program  # the stale-server check skips it
    assert read_command(["./llama-server", "-m", "a.gguf"]).named_by_program


def test_the_engine_given_overrides_the_command_and_the_generic_model_flags_still_count() -> None:
    cmd = read_command(["python", "-m", "firstlight.sim", "--dialect", "vllm", "--model-path", "/d"], engine="vllm")
    assert (cmd.engine, cmd.model, cmd.port) == ("vllm", "/d", 8000)


def test_a_container_starts_from_its_own_environment_and_takes_named_variables_from_this_one() -> None:
    cmd = read_command(["docker", "run", "-e", "HF_TOKEN", "-e", "A=1", "vllm/vllm-openai", "--model", "m"],
                       env={"HF_TOKEN": "t", "PATH": "/usr/bin", "LLAMA_ARG_PORT": "1"})
    assert dict(cmd.env) == {"HF_TOKEN": "t", "A": "1"} and cmd.in_container


def test_env_i_and_u_change_the_environment_the_server_sees() -> None:
    cmd = read_command(["env", "-u", "A", "B=2", "vllm", "serve", "m"], env={"A": "1", "C": "3"})
    assert dict(cmd.env) == {"B": "2", "C": "3"}
    assert dict(read_command(["env", "-i", "B=2", "vllm", "serve", "m"], env={"C": "3"}).env) == {"B": "2"}


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_shell_script_file_is_read_for_the_line_that_starts_the_server(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script(tmp_path / "serve.sh", "#!/usr/bin/env bash\nset -euo pipefail\nsource /venv/bin/activate\n"
                     "exec python -m vllm.entrypoints.openai.api_server --model /m \"$@\"  # the server\n")
    cmd = read_command([str(script), "--port", "8011"])
    assert (cmd.engine, cmd.model, cmd.port, cmd.wrappers) == ("vllm", "/m", 8011, ("serve.sh",))
    monkeypatch.chdir(tmp_path)
    cmd = read_command(["bash", "serve.sh", "--port", "8012"])
    assert (cmd.engine, cmd.model, cmd.port, cmd.wrappers) == ("vllm", "/m", 8012, ("bash serve.sh",))


def test_a_script_that_names_no_engine_and_a_python_console_script_are_left_as_they_are(tmp_path: Path) -> None:
    plain = _script(tmp_path / "run.sh", "#!/bin/sh\necho hello\n")
    assert read_command([str(plain), "--port", "1"]).server == (str(plain), "--port", "1")
    # pip's trampoline for a long interpreter path: a shell line, then the console script's Python
    trampoline = _script(tmp_path / "sglang", "#!/bin/sh\n'''exec' \"/x/python\" \"$0\" \"$@\"\n' '''\n"
                         "from sglang.launch_server import main\nmain()\n")
    cmd = read_command([str(trampoline), "--model-path", "/m"])
    assert cmd.wrappers == () and cmd.server == (str(trampoline), "--model-path", "/m") and cmd.model == "/m"


def test_the_reading_is_a_frozen_value() -> None:
    cmd = read_command(["vllm", "serve", "m"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        cmd.model = "x"  # type: ignore[misc]


def test_a_port_that_is_no_port_falls_back_to_the_engine_default() -> None:
    assert read_command(["vllm", "serve", "m", "--port", "notaport"]).port == 8000
    assert read_command(["python", "serve.py"]).url is None  # no port known: no URL guessed


# --- the readers agree ------------------------------------------------------------------------------------------
FORMS = [
    "env VLLM_CPU_KVCACHE_SPACE=1 python -m vllm.entrypoints.openai.api_server --model {d} --port 8123",
    "python3 -m sglang.launch_server --model-path {d} --port 8123",
    "vllm serve {d} --port 8123",
    "uv run --with vllm python -m vllm.entrypoints.openai.api_server --model={d} --port=8123",
    "torchrun --nproc-per-node 2 -m sglang.launch_server --model-path {d} --port 8123",
    "bash -c 'exec vllm serve {d} --port 8123'",
    "docker run -v {parent}:/models -p 8123:8000 vllm/vllm-openai /models/{name}",
    "env X=1 python -m firstlight.sim --model-path {d} --port 8123",
]


@pytest.mark.parametrize("form", FORMS)
def test_preflight_the_live_weights_the_url_guess_and_the_history_key_read_the_same_model(tmp_path: Path,
                                                                                        form: str) -> None:
    from firstlight.cli.options import url_from_command

    d = tmp_path / "model"
    d.mkdir()
    argv = shlex.split(form.format(d=d, parent=tmp_path, name="model"))
    target = read_target(argv)
    assert target.model_path == d  # preflight
    cfg = Config(command=argv, probe=ProbeConfig())
    live = server_command(cfg)
    assert live.model_local is not None and Path(live.model_local) == d  # what `up` sizes for the weights fraction
    profile = get_profile(target.engine or "generic")
    assert url_from_command(argv, profile) == "http://127.0.0.1:8123"  # the URL guess
    key = deployment_key(cfg, profile, argv, Redactor())
    assert key.model == live.model and key.model not in ("vllm.entrypoints.openai.api_server", "firstlight.sim")


def test_the_api_guesses_the_url_and_the_model_from_the_same_reading(tmp_path: Path) -> None:
    from firstlight.settings import url_from_command as _url_from_command

    argv = ["env", "A=1", "python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(tmp_path),
            "--host", "0.0.0.0", "--port", "8124"]
    assert _url_from_command(argv, get_profile("vllm")) == "http://127.0.0.1:8124"
    assert os.path.samefile(read_target(argv).model_path or "", tmp_path)


def test_preflight_checks_the_port_a_container_publishes_on_this_machine() -> None:
    t = read_target(["docker", "run", "-p", "127.0.0.1:9001:8000", "vllm/vllm-openai", "--model", "m"], env={})
    assert (t.host, t.port, t.interpreter) == ("127.0.0.1", 9001, None)
    assert "container image vllm/vllm-openai" in t.interpreter_source


def test_the_environment_never_reaches_the_reading_s_repr() -> None:
    cmd = read_command(["env", "HF_TOKEN=hf_secret123", "vllm", "serve", "m"], env={"OPENAI_API_KEY": "sk-abc"})
    assert dict(cmd.env_set) == {"HF_TOKEN": "hf_secret123"} and cmd.env["OPENAI_API_KEY"] == "sk-abc"
    assert "sk-abc" not in repr(cmd)
    assert repr(cmd).count("hf_secret123") == 1  # in argv only, as given (command lines go through the redactor)


# Each wrapper's own options, as its manual gives them: the ones that take a value take the next word (or
# ``--opt=V``), the others none, and ``--`` ends them. (command, environment, what the reader must say.)
WRAPPERS: list[tuple[str, dict[str, str] | None, dict[str, Any]]] = [
    # env: -u NAME, --unset=NAME, -i (only what it sets), -C DIR, -S "split string", --
    ("env -u A --unset=B -C /srv C=3 vllm serve m", {"A": "1", "B": "2", "D": "4"},
     dict(server=("vllm", "serve", "m"), env_set=(("C", "3"),), wrappers=("env",), env={"C": "3", "D": "4"})),
    ("env --unset A -- vllm serve m", {"A": "1"}, dict(server=("vllm", "serve", "m"), env={})),
    ("env -u NOT_SET vllm serve m", {"A": "1"}, dict(env={"A": "1"})),  # unsetting what is not set is no error
    # a variable the outer env set, unset by the inner one: gone from what the server sees and from what was set
    ("env A=1 B=2 env -u A vllm serve m", {}, dict(env={"B": "2"}, env_set=(("B", "2"),))),
    ("env A=1 B=2 env --unset=A vllm serve m", {}, dict(env={"B": "2"}, env_set=(("B", "2"),))),
    ("env --chdir /srv -i X=1 vllm serve m", {"A": "1"}, dict(server=("vllm", "serve", "m"), env={"X": "1"})),
    ("env - X=1 vllm serve m --port 8101", {"A": "1"}, dict(port=8101, env={"X": "1"})),
    ("env --ignore-environment X=1 vllm serve m", {"A": "1"}, dict(server=("vllm", "serve", "m"), env={"X": "1"})),
    ("env -S 'X=1 vllm serve m --port 8102'", None, dict(engine="vllm", port=8102, env_set=(("X", "1"),))),
    ("env --split-string 'vllm serve m' --port 8103", None,
     dict(engine="vllm", port=8103, server=("vllm", "serve", "m", "--port", "8103"))),
    # the launchers that only run it
    ("exec -a vllm vllm serve m --port 8104", None, dict(server=("vllm", "serve", "m", "--port", "8104"))),
    ("nohup vllm serve m", None, dict(server=("vllm", "serve", "m"), wrappers=())),
    ("time -- vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("setsid -f vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("sudo -u svc -g gpu -E vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("sudo -C 3 -D /srv -h host -p pw -r role -t type -U other -T 10 vllm serve m", None,
     dict(server=("vllm", "serve", "m"))),
    ("conda run -n llm --no-capture-output vllm serve m", None,
     dict(server=("vllm", "serve", "m"), wrappers=("conda run",))),
    ("conda run --name llm --prefix /c --cwd /srv vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("conda run -p /c vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("nice -n 10 stdbuf -oL -e 0 -i 0 vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("stdbuf -o L vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("taskset 0xff vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("taskset -c 0-7 vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("numactl -N 0 -m 0 -C 0-7 -p 1 -i all -P 0 --localalloc vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("uv tool run --from vllm vllm serve m", None, dict(server=("vllm", "serve", "m"), wrappers=("uvx",))),
    ("uv run --python 3.12 -m vllm.entrypoints.openai.api_server --model /m", None,
     dict(module="vllm.entrypoints.openai.api_server", model="/m", wrappers=("uv run",))),
    ("uv run -- vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("uvx --from vllm vllm serve m --port 8116", None,
     dict(server=("vllm", "serve", "m", "--port", "8116"), wrappers=("uvx",))),
    ("uv pip list", None, dict(server=("uv", "pip", "list"), wrappers=())),  # not a run: uv itself
    # torchrun: its own options with and without values, --nnodes read, -m / a script / --no-python
    ("torchrun --standalone --nnodes=2 --nproc-per-node 8 --rdzv-endpoint h:29500 -m sglang.launch_server "
     "--model-path /m", None, dict(engine="sglang", nnodes=2, model="/m", wrappers=("torchrun",))),
    ("torchrun --nnodes 3 --run-path -- /srv/serve.py --port 8105", None,
     dict(nnodes=3, port=8105, server=("python", "/srv/serve.py", "--port", "8105"))),
    ("torchrun --no-python vllm serve m", None, dict(server=("vllm", "serve", "m"), engine="vllm")),
    ("torchrun --no_python vllm serve m", None, dict(server=("vllm", "serve", "m"))),
    ("torchrun --module sglang.launch_server --model-path /m", None,
     dict(server=("python", "-m", "sglang.launch_server", "--model-path", "/m"), module="sglang.launch_server")),
    ("python -m torch.distributed.run --nproc_per_node 2 -m sglang.launch_server --model-path /m", None,
     dict(engine="sglang", wrappers=("torchrun",), model="/m", module="sglang.launch_server",
          server=("python", "-m", "sglang.launch_server", "--model-path", "/m"))),
    ("python3 -m torch.distributed.launch --nnodes=2 -m sglang.launch_server --model-path /m", None,
     dict(nnodes=2, wrappers=("torchrun",))),
    # containers: podman and docker, run / create / container run, their options, mounts and ports
    ("podman run --rm -it --name x -v /srv/m:/m:ro -p 127.0.0.3:8106:8000/tcp vllm/vllm-openai --model /m/q", None,
     dict(engine="vllm", model_local="/srv/m/q", url="http://127.0.0.3:8106", wrappers=("podman run",))),
    ("docker container run -dit --mount type=bind,source=/srv/m,target=/m -p [::1]:8107:8000 vllm/vllm-openai "
     "--model /m/q", None, dict(model_local="/srv/m/q", url="http://[::1]:8107", image="vllm/vllm-openai")),
    ("docker create --mount type=bind,src=/srv/m,dst=/m --publish 8108:8000 vllm/vllm-openai --model /m/q", None,
     dict(model_local="/srv/m/q", url="http://127.0.0.1:8108")),
    ("docker run --mount type=bind,source=/srv/m,destination=/m -v named:/cache -v ./rel:/r vllm/vllm-openai "
     "--model /m/q", None, dict(model_local="/srv/m/q")),
    ("docker run -p 8000 -v /srv/m:/m vllm/vllm-openai --model /x/q", None, dict(model_local=None)),
    ("docker run --network=host --env=A=1 --entrypoint 'python3 -m vllm.entrypoints.openai.api_server' "
     "vllm/vllm-openai --model /m --port 8109", None,
     dict(url="http://127.0.0.1:8109", env_set=(("A", "1"),), module="vllm.entrypoints.openai.api_server")),
    ("docker run --net host --env A=2 ghcr.io/ggml-org/llama.cpp:server -m /a.gguf --port 8110", None,
     dict(engine="llamacpp", url="http://127.0.0.1:8110", env_set=(("A", "2"),))),
    ("docker run -- ollama/ollama", None, dict(server=("ollama", "serve"), image="ollama/ollama")),
    ("docker run ghcr.io/ggml-org/llama.cpp:server", None, dict(server=("llama-server",))),  # its own entrypoint
    ("docker container run vllm/vllm-openai --model /m", None,
     dict(image="vllm/vllm-openai", server=("vllm", "serve", "--model", "/m"))),
    ("docker container create vllm/vllm-openai --model /m", None, dict(image="vllm/vllm-openai", model="/m")),
    ("docker run --volume /srv/m:/m vllm/vllm-openai --model /m/q", None, dict(model_local="/srv/m/q")),
    # on the host's network a published port means nothing: the server's own port is the one to reach
    ("docker run --network host -p 9001:8000 vllm/vllm-openai --model m", None, dict(url="http://127.0.0.1:8000")),
    ("docker run --net=host -p 9002:8000 vllm/vllm-openai --model m", None, dict(url="http://127.0.0.1:8000")),
    ("docker run --network bridge -p 9003:8000 vllm/vllm-openai --model m", None,
     dict(url="http://127.0.0.1:9003")),
    ("docker run ollama/ollama", None, dict(server=("ollama", "serve"), engine="ollama")),
    ("docker container ls", None, dict(server=("docker", "container", "ls"), wrappers=())),
    # shells: -c SCRIPT with $0 and its arguments, options before it, a script file's "$@"
    ("bash -lc 'exec vllm serve m \"$@\"' bash --port 8111", None,  # $0 is "bash": "$@" starts after it
     dict(port=8111, wrappers=("bash -c",), engine="vllm", server=("vllm", "serve", "m", "--port", "8111"))),
    ("bash -O extglob -c 'vllm serve m --port 8115'", None, dict(port=8115, wrappers=("bash -c",))),
    ("bash +O extglob -c 'vllm serve m --port 8117'", None, dict(port=8117, wrappers=("bash -c",))),
    ("bash -c", None, dict(server=("bash", "-c"), wrappers=())),  # no script: the shell itself
    ("sh -e -o pipefail -c 'cd /srv && vllm serve m --port 8112'", None, dict(port=8112, wrappers=("sh -c",))),
    ("bash +o history -c 'vllm serve m --port 8113 | tee log'", None, dict(port=8113)),
    ("bash -c -- 'vllm serve m --port 8114'", None, dict(port=8114)),
    ("sh -c 'echo start; sleep 1'", None, dict(server=("sleep", "1"), engine=None)),
]


@pytest.mark.parametrize(("command", "env", "expect"), WRAPPERS, ids=[c[0][:70] for c in WRAPPERS])
def test_each_wrappers_options_are_skipped_as_its_manual_says(command: str, env: dict[str, str] | None,
                                                               expect: dict[str, Any]) -> None:
    cmd = read_command(shlex.split(command), env=env)
    assert {k: getattr(cmd, k) for k in expect} == expect


def test_the_start_flags_are_the_servers_arguments_without_its_port_and_host() -> None:
    cmd = read_command(["vllm", "serve", "m", "--port", "8000", "--host", "0.0.0.0", "--max-model-len", "4096",
                        "--port=9", "--host=h", "--dtype=half", "--enforce-eager"])
    assert cmd.start_flags == ("serve", "m", "--max-model-len", "4096", "--dtype=half", "--enforce-eager")


@pytest.mark.parametrize("argv", [[], ["uv"], ["uv", "run"], ["docker"], ["docker", "run"], ["docker", "run", "--name"],
                                  ["bash"], ["bash", "-e"], ["bash", "--"], ["env"], ["env", "-u"], ["torchrun"],
                                  ["torchrun", "-m"], ["sudo", "-u"], ["nohup"]])
def test_a_wrapper_with_nothing_after_it_reads_as_no_engine_without_an_error(argv: list[str]) -> None:
    cmd = read_command(argv)
    assert (cmd.engine, cmd.model) == (None, None)


def test_a_shell_s_options_before_its_script_file_are_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a short option holding ``c`` makes the script inline; ``--norc`` holds a c and is not ``-c``; ``-O``
    takes a value; a lone ``-`` ends the options as ``--`` does (bash(1))."""
    _script(tmp_path / "serve.sh", "#!/bin/bash\nexec vllm serve /m \"$@\"\n")
    monkeypatch.chdir(tmp_path)
    for shell in (["bash", "-e"], ["bash", "--norc"], ["bash", "-O", "extglob"], ["bash", "-"], ["bash", "--"],
                  ["sh", "-eu", "-o", "pipefail"]):
        cmd = read_command([*shell, "serve.sh", "--port", "8118"])
        assert (cmd.server, cmd.wrappers) == (("vllm", "serve", "/m", "--port", "8118"),
                                              (f"{shell[0]} serve.sh",)), shell


def test_which_files_are_read_as_shell_scripts(tmp_path: Path) -> None:
    """A ``#!`` line naming a shell (directly, through ``env``, or ``env -S``, with the shell's own options), or a
    ``.sh`` file without one; a script's bytes that are not UTF-8 do not stop the reading."""
    line = "exec vllm serve /m --port 8119\n"
    for name, text in [("serve", "#!/bin/bash\n" + line), ("serve-eu", "#!/bin/bash -eu\n" + line),
                       ("serve-env", "#!/usr/bin/env bash\n" + line),
                       ("serve-env-s", "#!/usr/bin/env -S bash -e\n" + line),
                       ("plain.sh", "set -e\n" + line), ("latin1.sh", "#!/bin/sh\n# caf\xe9\n" + line)]:
        path = tmp_path / name
        path.write_bytes(text.encode("latin-1"))
        path.chmod(0o755)
        cmd = read_command([str(path)])
        assert (cmd.engine, cmd.port, cmd.wrappers) == ("vllm", 8119, (name,)), name


def test_files_that_are_not_shell_scripts_are_left_as_they_are(tmp_path: Path) -> None:
    """A Python script naming an engine in its text, a ``#!`` with no interpreter, a binary, a missing file, and
    a script whose server line comes after the first 64 KiB read (scripts can be long)."""
    cases = {"py": b"#!/usr/bin/env python3\nimport os\nos.system('vllm serve /m --port 8120')\n",
             "bare": b"#!\nvllm serve /m --port 8120\n",
             "binary": b"\x7fELF\x02\x01\x01\x00vllm serve /m --port 8120\n",
             "long.sh": b"#!/bin/sh\n" + b": filler\n" * 8000 + b"vllm serve /m --port 8120\n"}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        path.chmod(0o755)
        cmd = read_command([str(path), "--x"])
        assert (cmd.server, cmd.wrappers, cmd.port) == ((str(path), "--x"), (), None), name
    missing = str(tmp_path / "missing.sh")
    assert read_command(["bash", missing]).server == ("bash", missing)


def test_a_program_named_like_an_engine_is_the_engine_even_when_it_is_a_shell_script(tmp_path: Path) -> None:
    """pip's own entry point for vllm may be a shell script (a venv on a long path): the program says vllm, so it
    is the server as written, not the script's inside."""
    vllm = _script(tmp_path / "vllm", "#!/bin/sh\nexec /opt/llama/llama-server \"$@\"\n")
    cmd = read_command([str(vllm), "serve", "/m"])
    assert (cmd.engine, cmd.server, cmd.wrappers) == ("vllm", (str(vllm), "serve", "/m"), ())


def test_an_engine_named_further_on_is_the_engine_but_not_the_program() -> None:
    cmd = read_command(["python", "bench.py", "--compare-with", "llama-server"])
    assert (cmd.engine, cmd.named_by_program) == ("llamacpp", False)


# The numbers, mounts and ports a command states, at their edges. (command, what the reader must say.)
EDGES: list[tuple[str, dict[str, Any]]] = [
    ("vllm serve m --port 65535", dict(port=65535)),
    ("vllm serve m --port 65536", dict(port=8000)),  # no port: the engine's default
    ("vllm serve m --port 1", dict(port=1)),
    ("vllm serve m --port 0", dict(port=8000)),  # "any free port": nothing to probe before the log says which
    ("vllm serve m --host [::1] --port 8001", dict(url="http://[::1]:8001")),
    ("vllm serve m --tensor-parallel-size 1", dict(tp=1)),
    ("vllm serve m --tensor-parallel-size 0", dict(tp=None)),
    ("vllm serve m --tensor-parallel-size x", dict(tp=None)),
    ("torchrun --nnodes 1:4 -m sglang.launch_server --model-path /m", dict(nnodes=4)),  # elastic MIN:MAX: at most
    ("env A=b=c vllm serve m", dict(env_set=(("A", "b=c"),))),
    ("nice -n 5 -- vllm serve m", dict(server=("vllm", "serve", "m"))),
    ("uv run --module vllm.entrypoints.openai.api_server --model /m",
     dict(module="vllm.entrypoints.openai.api_server", model="/m")),
    ("python -c 'import srv; srv.main()' --port 7001 --model /m",
     dict(module=None, server=("python", "-c", "import srv; srv.main()", "--port", "7001", "--model", "/m"))),
    # mounts: relative and home host paths, a trailing slash, the root, the longest mount that holds the model
    ("docker run -v ./models:/m vllm/vllm-openai --model /m/q", dict(model_local="models/q")),
    ("docker run -v ~/models:/m vllm/vllm-openai --model /m/q",
     dict(model_local=os.path.expanduser("~/models/q"))),
    ("docker run -v /srv/m:/m/ vllm/vllm-openai --model /m/q", dict(model_local="/srv/m/q")),
    ("docker run -v /srv/root:/ vllm/vllm-openai --model /m/q", dict(model_local="/srv/root/m/q")),
    ("docker run -v /srv:/data -v /fast/m:/data/m vllm/vllm-openai --model /data/m/q", dict(model_local="/fast/m/q")),
    ("docker run -v /fast/m:/data/m -v /srv:/data vllm/vllm-openai --model /data/m/q", dict(model_local="/fast/m/q")),
    ("docker run -v /srv/m:/m vllm/vllm-openai --model ./q", dict(model_local=None)),  # relative inside: unknown
    ("docker run --mount type=bind,source=/srv/a=b,target=/m vllm/vllm-openai --model /m/q",
     dict(model_local="/srv/a=b/q")),
    ("docker run -v /cache vllm/vllm-openai --model /cache/q", dict(model_local=None)),  # an anonymous volume
    ("docker run -v hf:/root/.cache/huggingface vllm/vllm-openai --model /root/.cache/huggingface/m",
     dict(model_local=None)),  # a named volume is no host path
    ("docker run -p x:8000 vllm/vllm-openai --model m", dict(url="http://127.0.0.1:8000")),
    # a script given inline: the last command when none names an engine; "${@}" and friends; continued lines
    ("sh -c 'cd /srv; echo start; exec ./serve --port 9'", dict(server=("./serve", "--port", "9"))),
    ("bash -c 'vllm serve m ${@}' bash --port 8125", dict(port=8125)),
    ("bash -c 'vllm serve m $*' bash --port 8126", dict(port=8126)),
    ("bash -c 'vllm serve m ${*}' bash --port 8127", dict(port=8127)),
    ("bash -c 'vllm serve m \\\n  --port 8121'", dict(port=8121, server=("vllm", "serve", "m", "--port", "8121"))),
    ("bash -c 'vllm serve /srv/m-1.5 --port 8122 && echo ok'", dict(model="/srv/m-1.5", port=8122)),
    ("bash -c \"vllm serve m --port 8124 'unbalanced\"", dict(engine="vllm")),
]


@pytest.mark.parametrize(("command", "expect"), EDGES, ids=[c[0][:70] for c in EDGES])
def test_numbers_mounts_ports_and_inline_scripts_at_their_edges(command: str, expect: dict[str, Any]) -> None:
    cmd = read_command(shlex.split(command))
    assert {k: getattr(cmd, k) for k in expect} == expect


REREAD = [
    "python serve.py --model-path /m/a --tp 2 --port 30000 --quantization fp8",
    "env CUDA_VISIBLE_DEVICES=0,1 uv run -m mypkg.server --model /m/b --tensor-parallel-size 2",
    "torchrun --nnodes 2 --nproc-per-node 8 -m server --model-id org/m --num-shard 4 --port 8081",
    "docker run --rm -it -p 9000:8000 -v /data/models:/models -e MODEL_ID=org/x img --model /models/y --port 8000",
    "bash -c 'exec /opt/bin/srv -m /m/z.gguf --port 8090 --rpc 10.0.0.2:50052'",
]


@pytest.mark.parametrize("argv", REREAD)
@pytest.mark.parametrize("engine", ["sglang", "vllm", "llamacpp", "tgi", "generic"])
def test_a_command_reread_by_another_engine_is_what_a_fresh_reading_by_it_gives(argv: str, engine: str):
    """An engine learnt while the server starts rereads the command's flags (ServerCommand.for_profile) from the
    one parse: the same reading as parsing the command again as that engine, field by field."""
    words = shlex.split(argv)
    env = {"LLAMA_ARG_PORT": "7001", "MODEL_ID": "env/model"}
    reread = read_command(words, env=env).for_profile(get_profile(engine))
    fresh = read_command(words, engine=engine, env=env)
    if engine == "generic":  # none of them names an engine: read as generic, it still names none
        fresh = dataclasses.replace(fresh, engine=None)
    assert reread == fresh
