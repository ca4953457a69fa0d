"""The corpus of real startup logs (tests/fixtures/corpus/: logs pasted into public issue threads, each with its
source and a label written from its text alone): its index is well formed and split in two halves, the figures
docs/engines.md quotes are the ones ``bench/bench_corpus.py`` computes, and the rules that the dev half's misses
led to, each on its real line (the corpus file named beside it)."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from firstlight.engines import PROFILES, get_profile
from firstlight.engines.detect import EngineDetector, detect_from_lines
from firstlight.framing import peel
from firstlight.logreplay import replay_lines
from firstlight.logtext import strip_ansi
from firstlight.vocab import FAILURE_CATEGORIES, FAILURE_PHASES, PHASES

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "tests" / "fixtures" / "corpus"
ENGINES_DOC = REPO / "docs" / "engines.md"
ENGINES = {"vllm", "sglang", "llamacpp", "tgi", "ollama", "lmdeploy", "trtllm", "generic"}


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_corpus", REPO / "bench" / "bench_corpus.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_corpus", mod)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()
ROWS = BENCH.rows()


# --- the index -----------------------------------------------------------------------------------------------


def test_every_log_is_listed_once_and_every_row_has_its_log() -> None:
    files = [r["file"] for r in ROWS]
    assert len(files) == len(set(files))
    assert set(files) == {p.name for p in CORPUS.glob("*.log")}
    assert len(files) >= 150


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_a_row_is_well_formed(row: dict[str, str]) -> None:
    assert None not in row and all(v is not None for v in row.values()), row  # no missing or extra column
    assert row["engine"] in ENGINES
    assert row["outcome"] in ("ready", "failed", "incomplete")
    assert all(p in PHASES for p in row["phase"].split("|"))
    failures = row["failure"].split("|")
    if row["outcome"] == "failed":
        assert all(f in FAILURE_CATEGORIES for f in failures)
    else:
        assert failures == ["none"]
    assert row["source"].startswith("https://github.com/"), row["source"]
    assert row["why"].strip()


def _read_half(name: str) -> bool:
    """Of the gathering before the newest, the half whose misses were read: an even first byte of the name's
    SHA-256 (README.md, "The two halves")."""
    return hashlib.sha256(name.encode()).digest()[0] % 2 == 0


def test_the_held_half_is_the_newest_gathering_and_large() -> None:
    """The logs of the newest gathering are held out (scored, never read for a rule), with the unread half of the
    gathering before it; every earlier gathering's, scored once as held before, is dev (README.md, "The two
    halves")."""
    newest = max(r["file"][0] for r in ROWS)
    before = chr(ord(newest) - 1)
    for row in ROWS:
        name, gathering = row["file"], row["file"][0]
        held = gathering == newest or (gathering == before and not _read_half(name))
        assert row["half"] == ("held" if held else "dev"), name
    held = sum(r["half"] == "held" for r in ROWS)
    assert held >= 75 and held >= 0.25 * len(ROWS)


def test_the_readme_and_the_docs_count_the_corpus_and_its_halves() -> None:
    total, held = len(ROWS), sum(r["half"] == "held" for r in ROWS)
    readme = " ".join((CORPUS / "README.md").read_text(encoding="utf-8").split())
    assert f"{total} startup logs of real LLM servers" in readme
    assert f"Now {total - held} logs are `dev`, {held} `held`." in readme
    docs = " ".join(ENGINES_DOC.read_text(encoding="utf-8").split())
    assert f"holds {total} real startup logs" in docs
    assert f"The newest one's {held} logs are the `held` half" in docs and f"The {total - held} earlier logs" in docs


def test_the_bench_lists_the_held_logs_misses_only_when_asked(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Read, a held miss would be tuned on: by default the bench gives the held half's figures, not its misses."""
    counts = []
    for extra in ([], ["--list-held"]):
        monkeypatch.setattr(sys, "argv", ["bench_corpus.py", "--half", "held", *extra])
        BENCH.main()
        out = capsys.readouterr().out
        counts.append(sum(line.startswith("  held ") for line in out.splitlines()))
    assert counts[0] == 0 and counts[1] == len(BENCH.score("held")["all"].misses)


def test_a_label_with_a_bar_is_right_whichever_word_is_said() -> None:
    assert BENCH.right("kv_cache|warmup", "warmup") and BENCH.right("kv_cache|warmup", "kv_cache")
    assert not BENCH.right("kv_cache|warmup", "cuda_graph") and not BENCH.right("oom", "oo")


# --- the figures the docs quote ----------------------------------------------------------------------------

FIGURE_ROW = re.compile(
    r"^\| (?P<half>dev|held), now \| (?P<logs>\d+) \| (?P<all>\d+) \((?P<pct>[\d.]+) %\) \| (?P<engine>[\d.]+) % \| "
    r"(?P<outcome>[\d.]+) % \| (?P<phase>[\d.]+) % \| (?P<failure>[\d.]+) % \|$", re.M)


def test_the_docs_quote_the_figures_the_bench_computes() -> None:
    """When the reader's accuracy on the corpus moves, docs/engines.md's table must move with it."""
    quoted = {m["half"]: m for m in FIGURE_ROW.finditer(ENGINES_DOC.read_text(encoding="utf-8"))}
    assert set(quoted) == {"dev", "held"}, "docs/engines.md has lost its '| dev, now |' / '| held, now |' rows"
    scores = BENCH.score()
    before_row = re.compile(r"^\| (?P<half>dev|held), before \| \d+ \| \d+ \((?P<pct>[\d.]+) %\)", re.M)
    before = {m["half"]: m["pct"] for m in before_row.finditer(ENGINES_DOC.read_text(encoding="utf-8"))}
    prose = " ".join(ENGINES_DOC.read_text(encoding="utf-8").split())
    assert (f"the logs nobody had read from {before['held']} to {quoted['held']['pct']} % all four right, the dev "
            f"logs themselves from {before['dev']} to {quoted['dev']['pct']} %") in prose
    for half, m in quoted.items():
        s = scores[half]
        assert (int(m["logs"]), int(m["all"])) == (s.logs, s.right["all"]), half
        assert float(m["pct"]) == s.pct("all"), half
        for f in BENCH.FIELDS:
            assert float(m[f]) == s.pct(f), (half, f)


# --- rules the dev half's misses led to, each on its real line ---------------------------------------------


@pytest.mark.parametrize("engine, line, phase", [
    # c-generic-nccl-kube-pod-rings-connected.log: NCCL's own init lines under any engine
    ("generic", "adp-us-llm-1-00001-deployment-6f47c67945-s59dl:235:235 [1] NCCL INFO Channel 13/0 : 1[1] -> 2[2] "
                "via P2P/IPC", "distributed_init"),
    ("vllm", "adp-us-llm-1-00001-deployment-6f47c67945-s59dl:235:235 [1] NCCL INFO Channel 13/0 : 1[1] -> 2[2] "
             "via P2P/IPC", "distributed_init"),
])
def test_nccls_own_lines_are_distributed_init(engine: str, line: str, phase: str) -> None:
    m = get_profile(engine).classify(line)
    assert m.phase == phase and m.phase_weak


def test_a_fatal_failure_says_the_phase_it_happens_in() -> None:
    assert FAILURE_PHASES["nccl"] == "distributed_init"
    # c-vllm-ray-llmengine-ncclinternalerror.log: the excerpt starts at the error
    rep = replay_lines(["(LLMEngine pid=2347640, ip=10.58.226.15) ncclInternalError: Internal check failed."],
                       engine="vllm")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "distributed_init", "nccl")
    # b-tgi-openshift-master-port-in-use.log: torch.distributed's rendezvous port taken
    rep = replay_lines(["RuntimeError: The server socket has failed to listen on any local network address. The "
                        "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."],
                       engine="tgi")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "distributed_init", "port_in_use")
    # b-tgi-awq-warmup-prefill-oom.log: said in TGI's warmup
    rep = replay_lines(["RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
                        "`--max-batch-prefill-tokens`"], engine="tgi")
    assert (rep.outcome, rep.phase) == ("failed", "warmup")


def test_a_later_phase_is_never_moved_back_by_a_failure() -> None:
    rep = replay_lines(["INFO 05-10 16:00:15 [gpu_model_runner.py:1] Capturing CUDA graphs (decode, FULL): 1%",
                        "ncclInternalError: Internal check failed."], engine="vllm")
    assert rep.phase == "cuda_graph" and rep.failure == "nccl"


def test_a_log_cut_inside_a_tracebacks_frames_is_a_death() -> None:
    # a-vllm-v0-kubeai-pod-input-scale-attr-error.log: the message, then frames, and the paste ends
    lines = ["ERROR 05-26 00:17:47 [engine.py:448] 'ColumnParallelLinear' object has no attribute 'input_scale'",
             "ERROR 05-26 00:17:47 [engine.py:448] Traceback (most recent call last):",
             'ERROR 05-26 00:17:47 [engine.py:448]   File "/usr/local/lib/python3.12/dist-packages/vllm/engine/'
             'multiprocessing/engine.py", line 436, in run_mp_engine',
             "ERROR 05-26 00:17:47 [engine.py:448]     engine = MQLLMEngine.from_vllm_config("]
    rep = replay_lines(lines, engine="vllm")
    assert (rep.outcome, rep.failure) == ("failed", "other")
    # a header with no frame yet, or a traceback that goes on to plain lines, is no death
    assert replay_lines(lines[:2], engine="vllm").outcome == "incomplete"
    assert replay_lines([*lines, "INFO 05-26 00:17:48 [engine.py:1] Retrying"], engine="vllm").outcome == "incomplete"
    # a Ctrl+C is a stop
    assert replay_lines([*lines, "KeyboardInterrupt"], engine="vllm").outcome == "incomplete"


@pytest.mark.parametrize("line, frame_phase", [
    # a-vllm-v1-sampler-warmup-oom-tp.log: the profile run that sizes the KV cache
    ('  File "/opt/home/s4075740/miniconda3/envs/torch/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py'
     '", line 1544, in _dummy_sampler_run', "kv_cache"),
    # a-vllm-v1-marlin-repack-cuda-driver-oom.log: the weights' repacking after they load
    ('  File "/usr/local/lib/python3.12/dist-packages/vllm/_custom_ops.py", line 1279, in gptq_marlin_repack',
     "weights_loading"),
    # c-vllm-worker-pynccl-allreduce-traceback.log: vLLM's NCCL communicator
    ('  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/pynccl.py", line 142, '
     'in __init__', "distributed_init"),
])
def test_traceback_frames_say_the_phase(line: str, frame_phase: str) -> None:
    assert get_profile("vllm").classify(line).frame_phase == frame_phase


@pytest.mark.parametrize("engine, line, category", [
    # a-vllm-v1-marlin-repack-cuda-driver-oom.log
    ("vllm", "RuntimeError: CUDA driver error: out of memory", "oom"),
    # c-ollama-journal-deepseek-cudamalloc-panic.log, read by any profile
    ("generic", "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 45108.64 MiB on device 0: cudaMalloc failed: "
                "out of memory", "oom"),
    ("generic", "panic: unable to load model: /usr/share/ollama/.ollama/models/blobs/sha256-9801e7fce", "crashed"),
    ("ollama", "panic: unable to load model: /usr/share/ollama/.ollama/models/blobs/sha256-9801e7fce", "crashed"),
    # c-ollama-intel-gpu-abort-docker-desktop.log
    ("ollama", "Abort was called at 63 line in file:", "crashed"),
    # c-ollama-exit-status-2-vram-not-recovered.log: Go exits 2 on a panic
    ("ollama", 'time=2025-02-20T12:24:52.667+08:00 level=ERROR source=sched.go:455 msg="error loading llama server" '
               'error="llama runner process has terminated: exit status 2"', "crashed"),
    # c-sglang-nccl-socket-connect-abort-tp0.log
    ("sglang", "h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.0.0.82<38455> failed : "
               "Software caused connection abort", "nccl"),
])
def test_generic_failure_wordings(engine: str, line: str, category: str) -> None:
    m = get_profile(engine).classify(line)
    assert m.failure is not None and m.failure.category == category


def test_an_ollama_runner_that_exits_2_is_a_crash_not_the_wrapper() -> None:
    m = get_profile("ollama").classify('msg="error loading llama server" error="llama runner process has terminated: '
                                       'exit status 1"')
    assert m.failure is not None and m.failure.category == "other"


def test_an_nccl_info_line_is_no_failure() -> None:
    assert get_profile("sglang").classify("h100-15:132:132 [0] NCCL INFO init.cc:1263 -> 2").failure is None


@pytest.mark.parametrize("lines, engine", [
    # a-vllm-ascend-glm5-shards-stuck.log: a TP/EP worker's process tag
    (["(Worker_TP13_EP13 pid=5766) INFO 02-13 06:25:33 [compilation.py:903] Using OOT custom backend for "
      "compilation."], "vllm"),
    # a-vllm-ray-ip-worker-sigsegv-nccl-proxy.log: vLLM's Ray worker class
    (["(RayWorkerWrapper pid=376235, ip=10.10.10.61) *** SIGSEGV received at time=1745722347 on cpu 48 ***"], "vllm"),
    # a-vllm-v0-gemma3-routes-startup-complete.log: the launcher's routes in vLLM's log format
    (["INFO 03-18 08:51:39 [launcher.py:34] Route: /v1/models, Methods: GET"], "vllm"),
    # a-vllm-gpustack-cuda-graph-bars-full.log: v1's graph capture with its mode
    (["Capturing CUDA graphs (decode, FULL):  46%|████▌     | 16/35 [00:02<00:02,  8.85it/s]"], "vllm"),
    # a-vllm-docker-serve-twice-unrecognized-args.log
    (["/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/completion/protocol.py:176: SyntaxWarning: "
      "invalid escape sequence '\\e'",
      "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...",
      "vllm: error: unrecognized arguments: serve /models/GLM-4.7-Flash-AWQ-4bit"], "vllm"),
    # c-ollama-journal-deepseek-cudamalloc-panic.log: a Go frame of Ollama's
    (["        github.com/ollama/ollama/llama/runner/runner.go:984 +0xde5"], "ollama"),
])
def test_engine_words(lines: list[str], engine: str) -> None:
    assert detect_from_lines(lines, list(PROFILES.values())) == engine


@pytest.mark.parametrize("line, inner", [
    # a-vllm-v1-journalctl-ru-locale-engine-to-apiserver.log: journalctl under a Russian locale
    ("авг 18 14:15:04 llm python3[28059]: (EngineCore pid=28059) INFO 08-18 14:15:04 [vllm.py:1721] Cudagraph is "
     "disabled under eager mode", "(EngineCore pid=28059) INFO 08-18 14:15:04 [vllm.py:1721] Cudagraph is disabled "
                                  "under eager mode"),
    # c-ollama-journal-zh-locale-truncated-listening.log: a numbered month
    ("7月 21 14:47:28 dar systemd[1]: Started Ollama Service.", "Started Ollama Service."),
])
def test_journal_short_under_any_locale(line: str, inner: str) -> None:
    f = peel(line)
    assert f.text == inner and f.framing == "journal-short"


def test_a_numbered_month_keeps_its_time_and_a_word_is_no_month() -> None:
    assert peel("7月 21 14:47:28 dar systemd[1]: Started Ollama Service.").ts is not None
    assert peel("авг 18 14:15:04 llm python3[28059]: x").ts is None  # the month's name is the locale's: no time
    assert peel("Loading 12 10:00:00 foo").framing is None


@pytest.mark.parametrize("engine", ["generic", "ollama", "vllm"])
def test_a_go_fatal_signal_dump_is_a_crash(engine: str) -> None:
    # c-ollama-journal-runner-sigabrt-registers.log (https://github.com/ollama/ollama/issues/8271): the tail of the
    # runner's dump, its registers (rdx 0x6: SIGABRT), and the paste ends
    for line in ("rflags 0x246", "SIGABRT: abort"):
        m = get_profile(engine).classify(line)
        assert m.failure is not None and m.failure.category == "crashed", (engine, line)
    assert get_profile(engine).classify("rdx    0x6").failure is None


def test_ollama_load_failed_and_pull_manifest() -> None:
    # c-ollama-journal-load-canceled-by-stop.log (https://github.com/ollama/ollama/issues/12194)
    rep = replay_lines(['time=2025-09-05T17:06:43.313+08:00 level=INFO source=sched.go:441 msg="Load failed" '
                        'model=/home/u/.ollama/models/blobs/sha256-3e4cb141744604 error="context canceled"'],
                       engine="ollama")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "weights_loading", "other")
    # c-ollama-kubeai-probe-pull-manifest-missing.log (https://github.com/kubeai-project/kubeai/issues/517)
    lines = ["Error: pull model manifest: file does not exist"]
    assert detect_from_lines(lines, list(PROFILES.values())) == "ollama"
    rep = replay_lines(lines)
    assert (rep.engine, rep.outcome, rep.phase, rep.failure) == ("ollama", "failed", "weights_loading",
                                                                 "model_not_found")


def test_ollamas_blob_path_and_llamas_metadata_lines() -> None:
    # c-ollama-journal-deepseek-cudamalloc-panic.log (https://github.com/ollama/ollama/issues/8597)
    assert detect_from_lines(["panic: unable to load model: /usr/share/ollama/.ollama/models/blobs/sha256-9801e7fce27"],
                             list(PROFILES.values())) == "ollama"
    for engine in ("llamacpp", "ollama"):
        m = get_profile(engine).classify("llm_load_print_meta: rope_yarn_log_mul    = 0.1000")
        assert m.phase == "weights_loading"


@pytest.mark.parametrize("lines", [
    # c-llamacpp-invalid-ggml-type-42-bitnet.log (https://github.com/ggml-org/llama.cpp/issues/11975)
    ["main: llama backend init", "main: load the model and apply lora adapter, if any"],
    # c-llamacpp-cli-windows-tensor-out-of-bounds.log (https://github.com/ollama/ollama/issues/6228)
    ["main: build = 0 (unknown)", "main: built with cc (GCC) 14.1.0 for i686-w64-mingw32"],
])
def test_llama_clis_own_head(lines: list[str]) -> None:
    assert detect_from_lines(lines, list(PROFILES.values())) == "llamacpp"


def test_an_unknown_ggml_type_is_a_quantization_failure() -> None:
    # c-llamacpp-invalid-ggml-type-42-bitnet.log
    rep = replay_lines(["main: llama backend init",
                        "gguf_init_from_file_impl: tensor 'blk.25.ffn_down.weight' has invalid ggml type 42 (NONE)",
                        "gguf_init_from_file_impl: failed to read tensor info"])
    assert (rep.engine, rep.outcome, rep.phase, rep.failure) == ("llamacpp", "failed", "weights_loading",
                                                                 "quantization")


def test_a_hub_repo_the_endpoint_does_not_know() -> None:
    # c-llamacpp-hf-mirror-repo-404.log (https://github.com/vtuber-plan/olah/issues/85):
    # llama-server -hf against a mirror; the load then has no file
    rep = replay_lines([
        "0.00.073.098 E get_repo_commit: error: GET failed (404): Sorry, we can't find the page you are looking for.",
        "0.00.073.107 W get_repo_files: failed to resolve commit for unsloth/gemma-4-E4B-it-GGUF",
        "0.00.074.574 I srv    load_model: loading model 'unsloth/gemma-4-E4B-it-GGUF:UD-Q4_K_XL'",
        "0.00.074.625 E llama_model_load_from_file_impl: exactly one out metadata, path_model, and file must be "
        "defined"], engine="llamacpp")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "weights_loading", "model_not_found")


@pytest.mark.parametrize("lines", [
    # a-vllm-v0-worker-process-weights-took-bars-done.log (https://github.com/vllm-project/vllm/issues/17666)
    ["(VllmWorkerProcess pid=167225) INFO 05-05 23:52:00 [loader.py:458] Loading weights took 22.82 seconds"],
    # a-vllm-v1-rocm-worker-prefix-split-shard-bars.log (https://github.com/vllm-project/vllm/issues/19332): the tag
    # alone, before the bar's next redraw
    ["(VllmWorker rank=0 pid=241) "],
    # a-vllm-macos-cpu-c-import-warning-rank0-tb.log (https://github.com/vllm-project/vllm/issues/15066)
    ["WARNING 03-19 00:20:58 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('dlopen(/Users/qle/"
     "Downloads/vllm1/vllm/vllm/_C.abi3.so, 0x0002): Symbol not found: __ZNK3c1011StorageImpl27th')"],
])
def test_vllms_worker_tags_and_extension(lines: list[str]) -> None:
    assert detect_from_lines(lines, list(PROFILES.values())) == "vllm"


def test_a_wrappers_fatal_line_takes_the_phase_of_the_cause_it_wraps() -> None:
    # c-sglang-nccl-socket-connect-abort-tp0.log (https://github.com/sgl-project/sglang/issues/5594): NCCL's
    # WARN line, then the scheduler's wrapper
    rep = replay_lines(["h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.0.0.82<38455> "
                        "failed : Software caused connection abort",
                        "h100-15:132:132 [0] NCCL INFO init.cc:1263 -> 2",
                        "[2025-04-21 07:28:41 TP0] Scheduler hit an exception: Traceback (most recent call last):"],
                       engine="sglang")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "distributed_init", "nccl")


def test_tritons_tensorrt_llm_backend() -> None:
    # b-trtllm-triton-compose-loading.log (https://github.com/NVIDIA/TensorRT-LLM/issues/2813)
    loading = ['triton-models-1    | I0223 11:55:15.535936 123 model_lifecycle.cc:472] "loading: postprocessing:1"',
               'triton-models-1    | I0223 11:55:15.572309 123 model_lifecycle.cc:472] "loading: tensorrt_llm:1"']
    rep = replay_lines(loading)
    assert (rep.engine, rep.outcome, rep.phase) == ("trtllm", "incomplete", "weights_loading")
    # b-trtllm-triton-tp2-double-spaced.log (https://github.com/triton-inference-server/tensorrtllm_backend/issues/577):
    # the engine file read, then each rank's execution context once its engine is on the GPU
    m = get_profile("trtllm").classify("[TensorRT-LLM][INFO] Loaded engine size: 8231 MiB")
    assert m.phase == "weights_loading"
    m = get_profile("trtllm").classify("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 480.04 MiB for execution "
                                       "context memory.")
    assert m.phase == "weights_loaded"
    # b-trtllm-triton-unfilled-template-params.log (https://github.com/triton-inference-server/server/issues/7950)
    m = get_profile("trtllm").classify("I0117 09:50:04.022585 4096 model_lifecycle.cc:835] successfully loaded "
                                       "'postprocessing'")
    assert m.phase == "weights_loading"
    # b-trtllm-triton-tp8-http-before-engines.log
    # (https://github.com/triton-inference-server/tensorrtllm_backend/issues/149): Triton serves once its models loaded
    rep = replay_lines(['I0327 13:12:22.342290 146 grpc_server.cc:2558] "Started GRPCInferenceService at 0.0.0.0:8001"',
                       'I0327 13:12:22.342523 146 http_server.cc:4725] "Started HTTPService at 0.0.0.0:8000"',
                       "[TensorRT-LLM][INFO] Loaded engine size: 8745 MiB"], engine="trtllm")
    assert (rep.outcome, rep.phase) == ("ready", "ready")


@pytest.mark.parametrize("lines", [
    # a-vllm-omni-ci-webui-copy-stage-core-traceback.log (https://github.com/vllm-project/vllm-omni/issues/4975)
    ["(StageEngineCoreProc_stage0_replica0 pid=904) ERROR 07-09 00:46:36 [stage_engine_core_proc.py:176]     "
     "engine_core = StageEngineCoreProc("],
    # a-vllm-v0-cpu-compose-wrapped-lines.log (https://github.com/opea-project/GenAIExamples/issues/2068)
    ["vllm-service  | INFO 06-16 09:48:14 [api_server.py:246] Started engine process with PID 280"],
    ["vllm-service  | WARNING 06-16 09:48:14 [_logger.py:72] device type=cpu is not supported by the V1 Engine. "
     "Falling                            back to V0."],
])
def test_vllms_process_tags_and_v0_lines(lines: list[str]) -> None:
    assert replay_lines(lines).engine == "vllm"


def test_vllms_routes_and_a_wrapped_kv_cache_error() -> None:
    # a-vllm-k9s-routes-box-border.log (https://github.com/kubernetes-sigs/gateway-api-inference-extension/pull/550)
    rep = replay_lines(["│ INFO 03-21 20:19:24 [launcher.py:34] Route: /v1/models, Methods: GET        │",
                        "│ INFO 03-21 20:19:24 [launcher.py:34] Route: /version, Methods: GET          │",
                        "│ INFO 03-21 20:19:24 [launcher.py:34] Route: /v1/completions, Methods: POST  │"])
    assert (rep.engine, rep.outcome, rep.phase) == ("vllm", "incomplete", "http_listening")
    # a-vllm-v1-xpu-wrapped-kv-cache-too-small.log
    # (https://github.com/SergiioB/intel-arc-pro-b70-inference-cookbook/issues/4): the message cut by the wrap
    rep = replay_lines(["(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len "
                        "(100000), (4.26 GiB KV cach"], engine="vllm")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "kv_cache", "kv_cache")


def test_llama_cpp_under_localai_and_a_routers_child() -> None:
    # c-llamacpp-localai-grpc-loads-ok.log (https://github.com/mudler/LocalAI/issues/5216):
    # LocalAI's gRPC backend, then LocalAI's word
    frame = "1:59PM DBG GRPC(ibm-granite_granite-3.3-2b-instruct-127.0.0.1:36571): "
    rep = replay_lines([
        frame + "stderr common_init_from_params: setting dry_penalty_last_n to ctx_size = 4096",
        frame + "stderr common_init_from_params: warming up the model with an empty run - please wait ... "
                "(--no-warmup to disable)",
        frame + 'stdout {"timestamp":1745071171,"level":"INFO","function":"initialize","line":574,"message":'
                '"initializing slots","n_slots":1}',
        frame + "stderr set_warmup: value = 0",
        "1:59PM INF [llama-cpp] Loads OK"])
    assert (rep.engine, rep.outcome, rep.phase) == ("llamacpp", "ready", "ready")
    # c-llamacpp-router-child-loading-progress.log (https://github.com/ggml-org/llama.cpp/pull/25271)
    state = '[38957] cmd_child_to_router:state:{"state":"loading","payload":{"stages":["text_model"],"current":' \
            '"text_model","value":%s}}'
    rep = replay_lines([state % v for v in ("0.1797194480895996", "0.2262534499168396", "0.2662183940410614",
                                            "0.5177286267280579")])
    assert (rep.engine, rep.outcome, rep.phase) == ("llamacpp", "incomplete", "weights_loading")
    assert rep.progress is not None and rep.progress["fraction"] == pytest.approx(0.5177, abs=1e-3)


def test_llama_servers_bind_failure_is_its_http_servers() -> None:
    # c-llamacpp-windows-couldnt-bind-8080.log (https://github.com/neavo/OneClickLLAMA/issues/10)
    rep = replay_lines(["main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080"], engine="llamacpp")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "http_listening", "port_in_use")


def test_turbomind_lines() -> None:
    # b-lmdeploy-turbomind-ready-then-asgi-error.log (https://github.com/InternLM/lmdeploy/issues/569)
    rep = replay_lines(["[WARNING] gemm_config.in is not found; using default GEMM algo",
                        "INFO:     Started server process [1016]",
                        "INFO:     Waiting for application startup.",
                        "INFO:     Application startup complete.",
                        "INFO:     Uvicorn running on http://0.0.0.0:6006 (Press CTRL+C to quit)"])
    assert (rep.engine, rep.outcome) == ("lmdeploy", "ready")
    # b-lmdeploy-turbomind-pointer-mapping-abort.log (https://github.com/InternLM/lmdeploy/issues/3259)
    rep = replay_lines(["[WARNING] gemm_config.in is not found; using default GEMM algo",
                        "terminate called after throwing an instance of 'std::runtime_error'",
                        "  what():  [TM][ERROR] pointer_mapping_ does not have information of ptr at 0x1a9a0c2800. "
                        "Assertion fail: /opt/lmdeploy/src/turbomind/utils/allocator.h:284 ",
                        "Aborted (core dumped)"])
    assert (rep.engine, rep.outcome, rep.phase, rep.failure) == ("lmdeploy", "failed", "weights_loading", "crashed")
    # b-lmdeploy-turbomind-tp2-34b-config.log (https://github.com/InternLM/lmdeploy/issues/2229): a setting's value
    # in TurboMind's model_config dump is no KV cache being built
    assert get_profile("lmdeploy").classify("cache_max_entry_count = 0.8").phase is None


def test_tgis_router_failure_is_in_its_http_start() -> None:
    # b-tgi-podman-webserver-failed.log (https://github.com/ogx-ai/ogx/issues/2421)
    rep = replay_lines(["2025-09-16T20:40:48.879127Z  INFO shard-manager: text_generation_launcher: shard terminated "
                        "rank=0", "Error: WebserverFailed"], engine="tgi")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "http_listening", "other")


def test_ansi_escapes_pasted_in_caret_notation_are_escapes() -> None:
    # a-vllm-v1-caret-ansi-apiserver-routes.log (https://github.com/vllm-project/vllm/pull/33756):
    # the colour of vLLM's process tag as ``cat -v`` shows it
    rep = replay_lines(["^[[0;36m(APIServer pid=31)^[[0;0m INFO 02-03 19:00:05 [api_server.py:946] Starting vLLM API "
                        "server 0 on http://0.0.0.0:8000",
                        "^[[0;36m(APIServer pid=31)^[[0;0m INFO 02-03 19:00:05 [launcher.py:46] Route: /docs, "
                        "Methods: HEAD, GET"])
    assert (rep.engine, rep.phase) == ("vllm", "http_listening")
    assert strip_ansi("[GIN] |^[[97;42m 200 ^[[0m|") == "[GIN] | 200 |"


def test_vllms_ray_placement_group_stats_and_installed_frames() -> None:
    # a-vllm-aibrix-ray-placement-group-wait.log (https://github.com/vllm-project/aibrix/issues/927)
    rep = replay_lines(["INFO 04-01 02:46:00 ray_utils.py:214] Waiting for creating a placement group of specs for 10 "
                        "seconds. specs=[{'node:10.163.194.101': 0.001, 'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` "
                        "to see if you have enough resources."])
    assert (rep.engine, rep.outcome, rep.phase) == ("vllm", "incomplete", "distributed_init")
    # a-vllm-get-open-port-errno98.log (https://github.com/vllm-project/vllm/issues/11617): a bare traceback
    rep = replay_lines(["Traceback (most recent call last):",
                        '  File "/miniforge3/envs/vllm/lib/python3.10/site-packages/vllm/utils.py", line 572, in '
                        "get_open_port",
                        '    s.bind(("", 0))',
                        "OSError: [Errno 98] Address already in use"])
    assert (rep.engine, rep.outcome, rep.failure) == ("vllm", "failed", "port_in_use")
    # a-vllm-v0-kserve-trace-serving.log (https://github.com/kserve/kserve/pull/4470): KServe mounts the API under
    # /openai; v0's periodic stats
    rep = replay_lines(['2025-05-14 17:45:10.901 uvicorn.access INFO:     127.0.0.1:42226 1647689 - "POST '
                        '/openai/v1/chat/completions HTTP/1.1" 200 OK',
                        "INFO 05-14 17:45:10 [metrics.py:486] Avg prompt throughput: 2.4 tokens/s, Avg generation "
                        "throughput: 0.2 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache "
                        "usage: 0.0%, CPU KV cache usage: 0.0%."])
    assert (rep.engine, rep.outcome, rep.phase) == ("vllm", "ready", "ready")


def test_llama_servers_json_log_is_its_own() -> None:
    # c-llamacpp-json-2024-model-loaded-listening.log (https://github.com/ollama/ollama/issues/4803)
    rep = replay_lines(['{"function":"main","level":"INFO","line":3064,"msg":"model loaded","tid":"139847421562880",'
                        '"timestamp":1717470350}',
                        '{"function":"main","hostname":"127.0.0.1","level":"INFO","line":3267,"msg":"HTTP server '
                        'listening","n_threads_http":"71","port":"24108","tid":"139847421562880","timestamp":1717470350}'])
    assert (rep.engine, rep.outcome, rep.phase) == ("llamacpp", "ready", "ready")


def test_the_loaders_refusal_and_llama_servers_own_name() -> None:
    # c-llamacpp-compose-up-libgomp-exit-127.log (https://github.com/fboulnois/llama-cpp-docker/issues/8)
    rep = replay_lines(["+ llama-server --model /models/llama-2-13b-chat.Q5_K_M.gguf --ctx-size 2048 --n-gpu-layers 99",
                        "llama-server: error while loading shared libraries: libgomp.so.1: cannot open shared object "
                        "file: No such file or directory"])
    assert (rep.engine, rep.outcome, rep.phase, rep.failure) == ("llamacpp", "failed", "process_start", "import_error")
    # c-llamacpp-llama-swap-compose-libmtmd-missing.log (https://github.com/mostlygeek/llama-swap/issues/398)
    assert get_profile("generic").classify(
        "/app/llama-server: error while loading shared libraries: libmtmd.so.0: cannot open shared object file: No "
        "such file or directory").failure.category == "import_error"  # type: ignore[union-attr]
    # c-llamacpp-compose-invalid-argument-restart-loop.log (https://github.com/StartupHakk/OpenMonoAgent.ai/issues/23):
    # ggml's backend registry
    assert detect_from_lines(["load_backend: loaded CPU backend from /app/libggml-cpu-alderlake.so"],
                             list(PROFILES.values())) == "llamacpp"


@pytest.mark.parametrize("lines, failure", [
    # b-sglang-deepseek-ocr-bracketed-iso-prefix.log (https://github.com/sgl-project/sglang/issues/12827)
    (["[2025-11-06 02:09:46] Ignore import error when loading sglang.srt.multimodal.processors.glm4v: No module "
      "named 'transformers.models.glm4v_moe'"], "none"),
    # b-sglang-musa-piecewise-compile.log (https://github.com/sgl-project/sglang/pull/26437)
    (["[2026-05-27 03:36:40] Capture piecewise CUDA graph end. Time elapsed: 176.68 s. mem usage=5.12 GB. avail "
      "mem=31.68 GB."], "none"),
    # b-sglang-sgl-kernel-common-ops-import.log (https://github.com/sgl-project/sglang/pull/13948)
    (["ImportError: ", "[sgl_kernel] CRITICAL: Could not load any common_ops library!"], "import_error"),
])
def test_sglangs_module_names_kernel_package_and_piecewise_graphs(lines: list[str], failure: str) -> None:
    rep = replay_lines(lines)
    assert (rep.engine, rep.failure) == ("sglang", failure)


@pytest.mark.parametrize("lines, outcome, failure", [
    # c-ollama-debug-model-load-progress.log (https://github.com/ollama/ollama/issues/10517)
    (['time=2025-05-01T16:40:14.182+02:00 level=DEBUG source=server.go:625 msg="model load progress 0.18"'],
     "incomplete", "none"),
    # c-ollama-jetson-gemma27b-signal-killed.log (https://github.com/ollama/ollama/issues/9685): the Go engine's
    # weights, then the runner killed
    (['time=2025-03-12T12:11:39.337Z level=INFO source=ggml.go:289 msg="model weights" buffer=CUDA0 size="16.2 GiB"'],
     "incomplete", "none"),
    # c-ollama-intel-gpu-abort-docker-desktop.log (https://github.com/mattcurf/ollama-intel-gpu/issues/22)
    (['time=2025-01-19T17:58:17.608+08:00 level=ERROR source=sched.go:455 msg="error loading llama server" '
      'error="llama runner process has terminated: exit status 2"'], "failed", "crashed"),
    # c-ollama-phi3-unknown-architecture.log (https://github.com/ollama/ollama/issues/3904): llama.cpp's loader
    (["llama_model_load: error loading model: error loading model architecture: unknown model architecture: 'phi3'",
      'time=2024-04-25T18:30:30.049+02:00 level=ERROR source=routes.go:120 msg="error loading llama server" '
      'error="llama runner process no longer running: 3221226505 "'], "failed", "other"),
])
def test_an_ollama_runner_is_started_to_load_a_model(lines: list[str], outcome: str, failure: str) -> None:
    rep = replay_lines(lines, engine="ollama")
    assert (rep.outcome, rep.phase, rep.failure) == (outcome, "weights_loading", failure)


def test_a_process_tag_leaves_a_tracebacks_indentation_and_a_cut_traceback_names_the_error_before_it() -> None:
    # a-vllm-v1-spark-no-module-flashinfer.log (https://github.com/eugr/spark-vllm-docker/issues/267): the engine
    # core's exception, then the API server's traceback, cut before its own exception line
    rep = replay_lines([
        "(EngineCore pid=126)   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/attention/backends/"
        "flashinfer.py\", line 11, in <module>",
        "(EngineCore pid=126)     from flashinfer import (",
        "(EngineCore pid=126) ModuleNotFoundError: No module named 'flashinfer'",
        "(APIServer pid=7) Traceback (most recent call last):",
        '(APIServer pid=7)   File "/usr/local/bin/vllm", line 10, in <module>',
        "(APIServer pid=7)     sys.exit(main())",
        "(APIServer pid=7)              ^^^^^^",
        '(APIServer pid=7)   File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/serve.py", line 148, '
        "in cmd",
        "(APIServer pid=7)     uvloop.run(run_server(args))"])
    assert (rep.engine, rep.outcome, rep.failure) == ("vllm", "failed", "import_error")


@pytest.mark.parametrize("engine, line", [
    # a-vllm-v1-interleaved-tp-workers-quant-scheme-frames.log (https://github.com/vllm-project/vllm/issues/26297)
    ("vllm", '(Worker_TP1 pid=3928602) ERROR 10-06 22:12:39 [multiproc_executor.py:597]   File "/home/u/miniconda3/'
             'envs/v/lib/python3.12/site-packages/vllm/model_executor/layers/linear.py", line 918, in __init__'),
    # b-sglang-awq-fusedmoe-assert.log (https://github.com/sgl-project/sglang/issues/2270)
    ("sglang", '  File "/home/.local/lib/python3.10/site-packages/sglang/srt/layers/fused_moe_triton/layer.py", line '
               '227, in __init__'),
])
def test_a_frame_building_a_models_layers_is_its_load(engine: str, line: str) -> None:
    assert get_profile(engine).classify(line).frame_phase == "weights_loading"


def test_vllms_per_shape_graph_capture_at_debug() -> None:
    # a-vllm-v1-compose-worker-cudagraph-capture-hang.log (https://github.com/vllm-project/vllm-ascend/issues/2416)
    rep = replay_lines(["vllm     | (Worker_TP1_EP1 pid=43) DEBUG 09-13 16:16:38 [compilation/cuda_graph.py:134] "
                        "Capturing a cudagraph on (PIECEWISE,BatchDescriptor(num_tokens=2, uniform_decode=False))"])
    assert (rep.engine, rep.outcome, rep.phase) == ("vllm", "incomplete", "cuda_graph")


@pytest.mark.parametrize("lines, phase, failure", [
    # b-tgi-falcon-signal4-cannot-start.log (https://github.com/huggingface/text-generation-inference/issues/1627),
    # with SIGSEGV for SIGILL (SIGILL keeps its own hint, and shared/logs' label of the same thread: other)
    (["2024-03-06T17:53:22.336246Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0",
      "2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to "
      "shutdown with signal 11 rank=0"], "weights_loading", "crashed"),
    # b-tgi-falcon-heads-not-divisible.log (https://github.com/huggingface/text-generation-inference/issues/1354):
    # a shard that cannot start was loading its model
    (["Error: ShardCannotStart"], "weights_loading", "other"),
    # b-tgi-ipex-download-error.log (https://github.com/opea-project/GenAIExamples/issues/1991)
    (["2025-05-23T03:12:17.327895Z  INFO download: text_generation_launcher: Starting check and download process for "
      "meta-llama/Meta-Llama-3-8B-Instruct", "Error: DownloadError"], "download", "other"),
])
def test_tgis_shard_deaths_and_download_step(lines: list[str], phase: str, failure: str) -> None:
    rep = replay_lines(lines, engine="tgi")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", phase, failure)


def test_vllms_load_and_model_path_check_tell_it() -> None:
    # a-vllm-v1-granite-download-bars.log (https://github.com/vllm-project/vllm/issues/12917): v0.7's log format
    rep = replay_lines(["INFO 02-07 19:23:56 gpu_model_runner.py:867] Starting to load model "
                        "ibm-granite/granite-3.0-3b-a800m-instruct...",
                        "model-00002-of-00002.safetensors: 100%|█████████| 1.75G/1.75G [00:56<00:00, 30.8MB/s]"])
    assert (rep.engine, rep.phase) == ("vllm", "download")
    # a-vllm-v1-invalid-repository-id.log (https://github.com/vllm-project/vllm/issues/13510)
    rep = replay_lines(["ValueError: Invalid repository ID or local directory specified: "
                        "'neuralmagic/Meta-Llama-3-8B-Instruct-FP8-dynamic'.",
                        "   - For Mistral models: ensure the presence of a 'params.json'."])
    assert (rep.engine, rep.outcome, rep.failure) == ("vllm", "failed", "model_not_found")


@pytest.mark.parametrize("lines, expected", [
    # c-llamacpp-vulkan-rpc-remote-crashed.log (https://github.com/ggml-org/llama.cpp/issues/15055)
    (["llama_kv_cache_unified:    Vulkan0 KV buffer size =   200.00 MiB",
      "/opt/llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:615: Remote RPC server crashed or returned malformed response"],
     ("llamacpp", "failed", "kv_cache", "crashed")),
    # c-llamacpp-wasi-nn-tensor-out-of-bounds.log (https://github.com/moly-ai/moly-local/issues/13): WasmEdge's
    # spdlog prefix, and llama.cpp's loader inside its line
    (["[2024-12-11 21:39:23.552] [error] [WASI-NN] llama.cpp: llama_model_load: error loading model: tensor "
      "'blk.3.attn_qkv.weight' data is not within the file bounds, model is corrupted or incomplete"],
     ("llamacpp", "failed", "weights_loading", "corrupt_weights")),
    # c-llamacpp-gpustack-llama-box-server-ready.log (https://github.com/gpustack/gpustack/issues/2556): llama-box
    (["[2025-07-21 06:52:38.758083] I srv                     start: starting",
      "[2025-07-21 06:52:38.758084] I srv                     start: listening host = 0.0.0.0, port = 40006",
      "[2025-07-21 06:52:38.758084] I srv                     start: server is ready"],
     ("llamacpp", "ready", "ready", "none")),
])
def test_llama_cpps_lines_inside_hosts_and_forks(lines: list[str], expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


@pytest.mark.parametrize("lines", [
    # c-llamacpp-1m-ctx-kv-alloc-fail.log (https://github.com/ggml-org/llama.cpp/issues/8101)
    ["ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 137438953504",
     "llama_kv_cache_init: failed to allocate buffer for kv cache"],
    # c-llamacpp-khoj-kv-cache-alloc-fail.log (https://github.com/khoj-ai/khoj/issues/1127)
    ["ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 17179869216",
     "llama_new_context_with_model: llama_kv_cache_init() failed for self-attention cache"],
])
def test_llama_cpps_kv_cache_allocation_is_a_kv_cache_failure(lines: list[str]) -> None:
    rep = replay_lines(lines, engine="llamacpp")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "kv_cache", "kv_cache")


@pytest.mark.parametrize("lines, phase, outcome, failure", [
    # b-trtllm-serve-qwen3-tp8-kv-insufficient.log (https://github.com/NVIDIA/TensorRT-LLM/issues/5872)
    (["[07/08/2025-19:47:15] [TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: Executor creation failed "
      "due to insufficient GPU memory.", "", "The following component could not be created: KV cache"],
     "kv_cache", "failed", "kv_cache"),
    # b-trtllm-triton-v100-cudamalloc-oom.log (https://github.com/NVIDIA/TensorRT-LLM/issues/260): the wrap left the
    # message's tail on its own line
    # (Triton's instance of the model failing: its load)
    (["E1103 02:59:01.152656 81041 backend_model.cc:553] ERROR: Failed to create instance: unexpected error when "
      "creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaSt",
      "ream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)"],
     "weights_loading", "failed", "oom"),
    # b-trtllm-nim-kvcache-json.log (https://github.com/NVIDIA/nim-deploy/issues/24)
    (["[TensorRT-LLM][INFO] Loaded engine size: 15323 MiB", "[TensorRT-LLM][INFO] Max KV cache pages per sequence: 128",
      "[TensorRT-LLM][INFO] Max tokens in paged KV cache: 38400. Allocating 5033164800 bytes."],
     "kv_cache", "incomplete", "none"),
])
def test_tensorrt_llms_memory_failures_and_paged_kv_cache(lines: list[str], phase: str, outcome: str,
                                                          failure: str) -> None:
    rep = replay_lines(lines, engine="trtllm")
    assert (rep.outcome, rep.phase, rep.failure) == (outcome, phase, failure)


def test_a_projectors_load_an_ollama_blob_anywhere_and_tgis_head_split() -> None:
    # c-llamacpp-llamafile-json-listen-then-clip.log (https://github.com/mozilla-ai/llamafile/issues/297)
    assert get_profile("llamacpp").classify("clip_model_load: loaded meta data with 19 key-value pairs and 377 "
                                            "tensors from llava-v1.5-7b-mmproj-Q4_0.gguf").phase == "weights_loading"
    # c-ollama-windows-cpu-buffer-alloc-panic.log (https://github.com/ollama/ollama/issues/12634): OLLAMA_MODELS
    # elsewhere
    lines = ["llama_model_load: error loading model: unable to allocate CPU buffer",
             "panic: unable to load model: D:\\Ollama_Models\\blobs\\sha256-ac9bc7a69dab38da1c790838955f1293420b55ab555"
             "ef6b4615efa1c1507b1ed"]
    assert replay_lines(lines).engine == "ollama"
    # b-tgi-falcon-heads-not-divisible.log (https://github.com/huggingface/text-generation-inference/issues/1354)
    rep = replay_lines(['  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/models/custom_modeling/'
                        'flash_rw_modeling.py", line 138, in __init__',
                        "    raise ValueError(",
                        "ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 71 and "
                        "`num_shards`: 2"], engine="tgi")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "weights_loading", "bad_argument")


def test_an_ollama_runner_terminated_by_sigterm_is_no_crash() -> None:
    # c-ollama-codespaces-runner-signal-terminated.log (https://github.com/ollama/ollama/issues/4912): a stop asked
    # of the runner, not a native death
    line = ('time=2024-08-26T09:53:44.346Z level=ERROR source=sched.go:451 msg="error loading llama server" '
            'error="llama runner process has terminated: signal: {}"')
    assert get_profile("ollama").classify(line.format("terminated")).failure.category == "other"  # type: ignore[union-attr]
    assert get_profile("ollama").classify(line.format("killed")).failure.category == "crashed"  # type: ignore[union-attr]


@pytest.mark.parametrize("line, engine", [
    # b-sglang-gpustack-ascend-provisioning.log (https://github.com/gpustack/gpustack/issues/4377)
    ("2026-01-29 11:29:45.409872+08:00 - gpustack.worker.backends.sglang - INFO - Starting SGLang model instance: "
     "qwen3-30b-a3b-instruct-2507-lgMuu", "sglang"),
    # c-llamacpp-gpustack-worker-starting-llama-box-rpc.log (https://github.com/gpustack/gpustack/issues/1576)
    ("2025-04-06T09:57:41+02:00 - gpustack.worker.backends.llama_box - INFO - Starting llama-box server", "llamacpp"),
    # c-llamacpp-docker-model-runner-install-backend.log (https://github.com/docker/model-runner/issues/608)
    ("[2026-02-05T07:15:19.034849300Z][inference.inference-llama.cpp][W] proceeding to update llama.cpp binary",
     "llamacpp"),
])
def test_a_platform_naming_the_engine_it_runs(line: str, engine: str) -> None:
    assert detect_from_lines([line], list(PROFILES.values())) == engine


def test_tritons_http_service_is_ready_under_any_backend() -> None:
    # b-generic-triton-baichuan-services-started.log
    # (https://github.com/triton-inference-server/tensorrtllm_backend/issues/169): Triton's lines alone
    rep = replay_lines(["I1118 07:23:26.676895 28532 grpc_server.cc:2451] Started GRPCInferenceService at 0.0.0.0:8001",
                        "I1118 07:23:26.677120 28532 http_server.cc:3558] Started HTTPService at 0.0.0.0:8000"])
    assert (rep.engine, rep.outcome, rep.phase) == ("generic", "ready", "ready")


def test_llama_cpps_buffers_are_sized_before_their_load_and_its_slots_follow_the_context() -> None:
    # c-llamacpp-llama-swap-windows-health-503.log (https://github.com/mostlygeek/llama-swap/issues/57)
    rep = replay_lines(["load_tensors: loading model tensors, this can take a while... (mmap = true)",
                        "load_tensors:   CPU_Mapped model buffer size = 17908.51 MiB"], engine="llamacpp")
    assert rep.phase == "weights_loading"
    # c-llamacpp-llama-box-rpc-compute-buffers.log (https://github.com/gpustack/llama-box/issues/34)
    rep = replay_lines(["9.03.660.282 I srv                      main: initializing server",
                        "9.03.660.284 I srv                      init: initializing slots, n_slots = 4"],
                       engine="llamacpp")
    assert (rep.outcome, rep.phase) == ("incomplete", "kv_cache")


def test_turbominds_block_manager_and_model_instance_are_the_kv_cache() -> None:
    # b-lmdeploy-windows-tm-blockmanager-gemm.log (https://github.com/InternLM/lmdeploy/issues/3825)
    assert get_profile("lmdeploy").classify("[TM][INFO] [BlockManager] max_block_count = 863").phase == "kv_cache"
    # b-lmdeploy-llama3-l40-thread-oom.log (https://github.com/InternLM/lmdeploy/issues/1459)
    rep = replay_lines(['  File "/home/mel/.local/lib/python3.9/site-packages/lmdeploy/turbomind/turbomind.py", '
                        "line 444, in _create_model_instance",
                        "    model_inst = self.tm_model.model_comm.create_model_instance(",
                        "RuntimeError: [TM][ERROR] CUDA runtime error: out of memory "
                        "/lmdeploy/src/turbomind/utils/allocator.h:231 "], engine="lmdeploy")
    assert (rep.outcome, rep.phase, rep.failure) == ("failed", "kv_cache", "oom")


def test_a_routers_child_line_and_ggmls_cuda_error() -> None:
    # c-llamacpp-router-child-warmup-cuda-shared-object.log
    # (https://github.com/openclaw/openclaw-windows-node/issues/1242): the router forwards "[port] " + the child's line
    rep = replay_lines(["[54881] cmn  common_init_: warming up the model with an empty run - please wait ... "
                        "(--no-warmup to disable)",
                        "[54881] CUDA error: shared object initialization failed",
                        "[54881] D:\\a\\llama.cpp\\llama.cpp\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:107: CUDA error"])
    # a death the log names no cause of, in the warmup: the warmup failed
    assert (rep.engine, rep.outcome, rep.phase, rep.failure) == ("llamacpp", "failed", "warmup", "warmup_failed")


def test_a_bracket_expression_is_no_caret_escape() -> None:
    assert strip_ansi("grep -E '^[[:space:]]*#'") == "grep -E '^[[:space:]]*#'"


def _read(lines: list[str]) -> tuple[str, str, str, str]:
    """(engine, outcome, phase, failure) of a replay of these lines, the engine learnt from them."""
    rep = replay_lines(lines)
    return rep.engine, rep.outcome, rep.phase, rep.failure


# -- the rules read off gathering d ------------------------------------------------------------------------------
@pytest.mark.parametrize("lines, expected", [
    # d-llamacpp-print-info-deepseek-eight-gpu-buffers.log (https://github.com/ollama/ollama/issues/9782): its model
    # summary and load_tensors tell llama.cpp
    (["print_info: vocab type       = BPE", "print_info: n_vocab          = 129280",
      "load_tensors: offloading 61 repeating layers to GPU"], ("llamacpp", "incomplete", "weights_loading", "none")),
    # d-llamacpp-log-viewer-tabbed-print-info-gemma9b.log (https://github.com/ollama/ollama/issues/12408): a viewer's
    # date and source columns before them
    (["24/09/2025 22:45\tollama\tprint_info: n_embd_k_gqa     = 2048",
      "24/09/2025 22:45\tollama\tprint_info: model type       = 9B"], ("llamacpp", "incomplete", "weights_loading",
                                                                        "none")),
    # d-llamacpp-llama-box-metal-rpc-tensor-progress.log (https://github.com/gpustack/gpustack/issues/1399)
    (["0.02.208.203 I loaded  36% model tensors into buffer", "0.02.209.436 I loaded  37% model tensors into buffer"],
     ("llamacpp", "incomplete", "weights_loading", "none")),
    # d-llamacpp-textgen-flash-attn-bad-value-exit-1.log (https://github.com/oobabooga/textgen/issues/7237): its
    # usage text names its environment variables
    (["error while handling argument \"--flash-attn\": error: unkown value for --flash-attn: '--numa'", "usage:",
      "-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto', default: 'auto')",
      "                                        (env: LLAMA_ARG_FLASH_ATTN)"],
     ("llamacpp", "failed", "process_start", "bad_argument")),
    # d-llamacpp-main-ggjt-invalid-magic.log (https://github.com/ggml-org/llama.cpp/issues/3492): a 2023 .bin
    (["gguf_init_from_file: invalid magic number 67676a74",
      "error loading model: llama_model_loader: failed to load model from /var/www/html/models/7B/alpaca/"
      "ggml-model-q8_0.bin"], ("llamacpp", "failed", "weights_loading", "corrupt_weights")),
    # d-llamacpp-server-2023-json-no-such-file.log (https://github.com/ggml-org/llama.cpp/issues/2867)
    (["error loading model: failed to open llama-2-7b-chat.ggmlv3.q5_1.bin: No such file or directory",
      "llama_load_model_from_file: failed to load model"],
     ("llamacpp", "failed", "weights_loading", "model_not_found")),
])
def test_llama_cpps_model_summary_forks_usage_and_2023_loader(lines: list[str],
                                                               expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


def test_a_supervisor_saying_llama_server_exited_ends_the_start() -> None:
    # d-llamacpp-tabby-supervisor-starting-ctrl-c-exit.log (https://github.com/TabbyML/tabby/issues/2719)
    prefix = ("2024-07-24T07:25:28.289106Z  WARN llama_cpp_server::supervisor: "
              "crates/llama-cpp-server/src/supervisor.rs:")
    rep = replay_lines([f"{prefix}111: <embedding>: ggml_cuda_init: found 1 CUDA devices:",
                        f"{prefix}99: llama-server <embedding> exited with status code -1",
                        f"{prefix}111: <embedding>: llama_model_loader: loaded meta data with 23 key-value pairs"])
    assert (rep.engine, rep.outcome, rep.failure) == ("llamacpp", "failed", "other")
    assert replay_lines([f"{prefix}99: llama-server <embedding> exited with status code 0"]).outcome != "failed"


@pytest.mark.parametrize("lines, expected", [
    # d-trtllm-triton-engine-config-parse-error.log (https://github.com/triton-inference-server/tensorrtllm_backend/
    # issues/61)
    (["I1030 07:31:12.980758 4933 model_lifecycle.cc:461] loading: tensorrt_llm:1",
      "E1030 07:31:13.009883 4933 backend_model.cc:634] ERROR: Failed to create instance: unexpected error when "
      "creating modelInstanceState: [json.exception.parse_error.101] parse error at line 1, column 1: "],
     ("trtllm", "failed", "weights_loading", "other")),
    # d-trtllm-triton-compose-fmha-key-not-found.log (https://github.com/triton-inference-server/server/issues/7362)
    (["triton-models-1  | E0618 08:11:17.058465 1 model_repository_manager.cc:614] \"Invalid argument: ensemble "
      "'ensemble' depends on 'tensorrt_llm' which has no loaded version. Model 'tensorrt_llm' loading failed with "
      "error: version 1 is at UNAVAILABLE state\""], ("trtllm", "failed", "weights_loading", "other")),
    # d-generic-triton-vllm-backend-failed-to-load-all-models.log (https://github.com/triton-inference-server/server/
    # issues/8578): Triton alone, no backend named
    (["I1216 02:12:50.904992 179 server.cc:343] \"All models are stopped, unloading models\"",
      "error: creating server: Internal - failed to load all models"], ("generic", "failed", "weights_loading",
                                                                       "other")),
    # d-trtllm-triton-tp-kv-allocated-ensemble-loaded.log (https://github.com/triton-inference-server/
    # tensorrtllm_backend/issues/309)
    (["[TensorRT-LLM][INFO] Allocate 3657433088 bytes for k/v cache. ",
      "[TensorRT-LLM][INFO] Using 13952 total tokens in paged KV cache, and 24 blocks per sequence"],
     ("trtllm", "incomplete", "kv_cache", "none")),
])
def test_tritons_model_load_failures_and_the_runtimes_kv_cache(lines: list[str],
                                                                expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


@pytest.mark.parametrize("lines, expected", [
    # d-vllm-production-stack-enginecore-hit-exception.log (https://github.com/vllm-project/production-stack/
    # issues/407): the exception below the excerpt
    (["ERROR 05-06 01:55:26 [core.py:383] EngineCore hit an exception: Traceback (most recent call last):",
      "ERROR 05-06 01:55:26 [core.py:383]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", "
      "line 374, in run_engine_core"], ("vllm", "failed", "process_start", "other")),
    # d-vllm-v1-ci-webui-enginecore-exception.log (https://github.com/vllm-project/vllm/issues/14574): a CI's log
    # view brackets its time
    (["[2025-03-10T15:07:20Z] INFO 03-10 08:07:20 [gpu_model_runner.py:1067] Model loading took 0.2389 GB and "
      "0.977005 seconds",
      "  | [2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] EngineCore hit an exception: Traceback (most "
      "recent call last):"], ("vllm", "failed", "weights_loaded", "other")),
    # d-vllm-gguf-minicpm-vocab-assert-rpc-died.log (https://github.com/vllm-project/vllm/issues/8096)
    (["INFO 09-03 11:29:20 model_runner.py:915] Starting to load model /models/minicpm.gguf...",
      "AssertionError",
      "ERROR 09-03 11:29:27 api_server.py:171] RPCServer process died before responding to readiness probe"],
     ("vllm", "failed", "weights_loading", "other")),
    # d-vllm-llava-bnb-quantization-unsupported.log (https://github.com/vllm-project/vllm/issues/9967)
    (["  File \"/home/asadfgglie/vllm/venv/lib/python3.12/site-packages/vllm/model_executor/model_loader/loader.py\", "
      "line 1033, in _load_weights", "    raise AttributeError(",
      "AttributeError: Model LlavaForConditionalGeneration does not support BitsAndBytes quantization yet."],
     ("vllm", "failed", "weights_loading", "quantization")),
    # d-vllm-kserve-hfserver-debug-platform-probe.log (https://github.com/kserve/kserve/issues/5056)
    (["DEBUG 02-11 02:14:15 [__init__.py:31] No plugins for group vllm.platform_plugins found.",
      "DEBUG 02-11 02:14:15 [__init__.py:35] Checking if TPU platform is available."],
     ("vllm", "incomplete", "process_start", "none")),
])
def test_vllms_engine_core_banner_rpc_death_and_plugin_lookup(lines: list[str],
                                                              expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


def test_gloo_peers_and_nccl_version_are_distributed_init_and_a_glued_progress_bar_is_a_redraw() -> None:
    # d-sglang-compose-tp2-gloo-custom-allreduce.log (https://github.com/sgl-project/sglang/issues/12496)
    rep = replay_lines(["sglang-1  | [Gloo] Rank 1 is connected to 1 peer ranks. Expected number of connected peer "
                        "ranks is : 1", "sglang-1  | [2025-11-01 16:50:36 TP0] sglang is using nccl==2.27.3"])
    assert (rep.engine, rep.phase) == ("sglang", "distributed_init")
    # d-sglang-deepseek-2node-a100-capture-jit-stuck.log (https://github.com/sgl-project/sglang/issues/4007)
    rep = replay_lines(["  0%|          | 0/23 [00:00<?, ?it/s][2025-03-03 18:46:44 TP3] Capture cuda graph begin. "
                        "This can take up to several minutes."])
    assert (rep.engine, rep.phase) == ("sglang", "cuda_graph")


@pytest.mark.parametrize("lines, outcome, phase", [
    # d-ollama-journal-0139-listening-extracting-runners.log (https://github.com/ollama/ollama/issues/4636): the
    # daemon listening, no model asked for: it serves
    (['May 27 12:32:31 test-server ollama[233346]: time=2024-05-27T12:32:31.493Z level=INFO source=routes.go:1074 '
      'msg="Listening on 127.0.0.1:11434 (version 0.1.39)"',
      'May 27 12:32:31 test-server ollama[233346]: time=2024-05-27T12:32:31.493Z level=INFO source=payload.go:30 '
      'msg="extracting embedded files" dir=/tmp/ollama1428713392/runners'], "ready", "ready"),
    # c-ollama-journal-zh-locale-truncated-listening.log (https://github.com/ollama/ollama/issues/17080): the pager
    # cut the line after the address
    (['7月 21 14:47:28 dar ollama[1814780]: time=2026-07-21T14:47:28.640+08:00 level=INFO source=routes.go:2004 '
      'msg="Listening on 127.0.0.>'], "ready", "ready"),
    # d-ollama-serve-019-jetson-runner-json-build-info.log (https://github.com/ollama/ollama/issues/1289): a model
    # asked for is the start, to its own ready line
    (["2023/11/28 13:49:20 routes.go:696: Listening on 127.0.0.1:11434 (version 0.1.9)",
      "2023/11/28 13:49:39 llama.go:415: starting llama runner",
      "2023/11/28 13:49:39 llama.go:473: waiting for llama runner to start responding"], "incomplete", "process_start"),
    # d-ollama-runner-start-cuda-init-system-info.log (https://github.com/ollama/ollama/issues/8525): the runner's
    # start is a process starting; the load begins with the model's own lines
    (['time=2025-01-21T10:00:00.000Z level=INFO source=server.go:376 msg="starting llama server" cmd="/usr/bin/ollama '
      'runner --model /root/.ollama/models/blobs/sha256-x"',
      'time=2025-01-21T10:00:00.000Z level=INFO source=server.go:555 msg="waiting for llama runner to start '
      'responding"'], "incomplete", "process_start"),
])
def test_an_ollama_daemon_listening_idle_serves_and_a_model_asked_for_is_the_start(lines: list[str], outcome: str,
                                                                                  phase: str) -> None:
    rep = replay_lines(lines)
    assert (rep.engine, rep.outcome, rep.phase) == ("ollama", outcome, phase)


# --- the fourth round: gathering e's misses, each rule on its real lines ----------------------------------------


@pytest.mark.parametrize("lines, expected", [
    # e-vllm-stripped-prefix-max-seq-len-exceeds-kv-cache.log (https://github.com/vllm-project/vllm/issues/10517): v0's
    # model runner and memory profiler with no prefix left, then its KV-cache check
    (["Loading model weights took 14.9888 GB", "# GPU blocks: 1478, # CPU blocks: 2048",
      "Maximum concurrency for 29000 tokens per request: 0.82x",
      "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache "
      "(23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."],
     ("vllm", "failed", "kv_cache", "kv_cache")),
    # e-vllm-omni-npu-hunyuanimage-multithread-shards.log (https://github.com/vllm-project/vllm-omni/issues/5122): its
    # attention registry tells vLLM, and SGLang's shard bar (printed by vLLM's plugin too) does not take it
    (["INFO 07-17 08:42:43 [mm_encoder_attention.py:372] Using AttentionBackendEnum.TORCH_SDPA for "
      "MMEncoderAttention.", "Multi-thread loading shards:   3% Completed | 1/32 [00:00<00:13,  2.34it/s]"],
     ("vllm", "incomplete", "weights_loading", "none")),
    # e-llamacpp-llama-gpt-compose-ggjt-v3-load-internal.log (https://github.com/getumbrel/llama-gpt/issues/162): the
    # GGML era's loader
    (["llama-gpt-llama-gpt-api-1  | llama_model_load_internal: format     = ggjt v3 (latest)",
      "llama-gpt-llama-gpt-api-1  | llama_model_load_internal: n_vocab    = 32000"],
     ("llamacpp", "incomplete", "weights_loading", "none")),
    # e-ollama-compose-2023-fork-exec-llama-server-missing.log (https://github.com/ollama/ollama/issues/458): the runner
    # binary could not be started, before any load
    (["ollama  | 2023/09/04 18:31:32 routes.go:437: Listening on [::]:11434",
      "ollama  | 2023/09/04 18:31:32 ggml_llama.go:295: error starting llama.cpp server: error starting the external "
      "llama.cpp server: fork/exec /tmp/llama-2755348604/server: no such file or directory"],
     ("ollama", "failed", "process_start", "other")),
])
def test_vllms_v0_lines_and_registry_llama_cpps_ggml_loader_and_ollamas_2023_runner(
        lines: list[str], expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


def test_the_shard_bar_alone_is_not_enough_for_sglang_and_runpods_config_is_vllm() -> None:
    assert detect_from_lines(["Multi-thread loading shards:   3% Completed | 1/32 [00:00<00:13,  2.34it/s]"],
                             list(PROFILES.values())) is None
    # e-vllm-runpod-worker-trust-remote-code-eoferror.log (https://github.com/runpod-workers/worker-vllm/issues/43)
    assert detect_from_lines(["2024-02-08T08:40:56.016480879Z engine.py           :43   2024-02-08 08:40:56,015 "
                              "vLLM config: {'model': 'TheBloke/Nous-Capybara-34B-AWQ', 'quantization': 'awq'}"],
                             list(PROFILES.values())) == "vllm"
    # e-vllm-dynamo-worker-memory-profiling-kv-reserved.log (https://github.com/ai-dynamo/dynamo/issues/787): a cut tag
    dynamo = "2025-04-23T03:32:58.533Z  INFO dynamo_engine_vllm::worker: VLLM: (VllmWorkerProcess 04-23 11:32:58 "
    loaded = dynamo + "model_runner.py:1115] Loading model weights took 8.4974 GB"
    assert detect_from_lines([loaded], list(PROFILES.values())) is None  # one of v0's lines is not enough alone
    assert detect_from_lines([loaded, dynamo + "worker.py:270] Memory profiling takes 57.38 seconds"],
                             list(PROFILES.values())) == "vllm"


@pytest.mark.parametrize("line, scores", [
    # e-vllm-stripped-prefix-max-seq-len-exceeds-kv-cache.log (https://github.com/vllm-project/vllm/issues/10517)
    ("Loading model weights took 14.9888 GB", {"vllm": 3}),
    ("Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB",
     {"vllm": 3}),
    ("# GPU blocks: 1478, # CPU blocks: 2048", {"vllm": 4}),
    ("Maximum concurrency for 29000 tokens per request: 0.82x", {"vllm": 4}),
    ("The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache "
     "(23648).", {"vllm": 4}),
    # e-vllm-dynamo-worker-memory-profiling-kv-reserved.log (https://github.com/ai-dynamo/dynamo/issues/787)
    ("2025-04-23T03:32:58.533Z  INFO dynamo_engine_vllm::worker: VLLM: (VllmWorkerProcess 04-23 11:32:58 "
     "model_runner.py:1115] Loading model weights took 8.4974 GB", {"vllm": 3}),
    ("2025-04-23T03:33:57.400Z  INFO dynamo_engine_vllm::worker: VLLM: (VllmWorkerProcess 04-23 11:33:57 "
     "worker.py:270] Memory profiling takes 57.38 seconds", {"vllm": 3}),
    # e-vllm-runpod-worker-trust-remote-code-eoferror.log (https://github.com/runpod-workers/worker-vllm/issues/43)
    ("2024-02-08T08:40:56.016480879Z engine.py           :43   2024-02-08 08:40:56,015 vLLM config: {'model': "
     "'TheBloke/Nous-Capybara-34B-AWQ', 'quantization': 'awq'}", {"vllm": 4}),
    # e-vllm-omni-npu-hunyuanimage-multithread-shards.log (https://github.com/vllm-project/vllm-omni/issues/5122)
    ("Using default backend AttentionBackendEnum.TORCH_SDPA for vit attention", {"vllm": 4}),
    ("Using AttentionBackendEnum.TORCH_SDPA for MMEncoderAttention.", {"vllm": 4}),
    ("Multi-thread loading shards:   3% Completed | 1/32 [00:00<00:13,  2.34it/s]", {"sglang": 3}),
    # e-llamacpp-llama-gpt-compose-ggjt-v3-load-internal.log (https://github.com/getumbrel/llama-gpt/issues/162)
    ("llama-gpt-llama-gpt-api-1  | llama_model_load_internal: format     = ggjt v3 (latest)", {"llamacpp": 4}),
])
def test_each_line_of_the_fourth_round_weighs_what_its_rule_says(line: str, scores: dict[str, int]) -> None:
    """Each new detection rule alone, on its real line: the weight it gives, and to which engine only."""
    detector = EngineDetector(list(PROFILES.values()))
    detector.feed(line)
    assert {name: score for name, score in detector.scores.items() if score} == scores


# --- the fifth round: gathering f's misses, each rule on its real lines -----------------------------------------


@pytest.mark.parametrize("lines, expected", [
    # f-generic-fastchat-model-worker-uvicorn-ready.log (https://github.com/lm-sys/FastChat/issues/244): a server no
    # profile knows is up once uvicorn is bound after its app's startup
    (["INFO:     Started server process [66945]", "INFO:     Waiting for application startup.",
      "INFO:     Application startup complete.",
      "INFO:     Uvicorn running on http://localhost:21002 (Press CTRL+C to quit)"],
     ("generic", "ready", "ready", "none")),
    # ... and not at its app's startup alone (the bind may fail after it)
    (["INFO:     Started server process [66945]", "INFO:     Application startup complete."],
     ("generic", "incomplete", "http_listening", "none")),
    # f-generic-gpustack-docker-server-serving-tools-download.log (https://github.com/gpustack/gpustack/issues/450):
    # a server's own word that it serves on an address; the llama-box release it downloads is not llama-box running
    (["2024-10-24T06:25:06+00:00 - gpustack.server.server - INFO - Starting GPUStack server.",
      "2024-10-24T06:25:06+00:00 - gpustack.server.server - INFO - Serving on 0.0.0.0:80.",
      "2024-10-24T06:25:07+00:00 - gpustack.worker.tools_manager - INFO - downloading llama-box-linux-amd64-cuda-12.4 "
      "'v0.0.67'"],
     ("generic", "ready", "ready", "none")),
    # f-generic-bentoml-runner-missing-tensorflow.log (https://github.com/bentoml/OpenLLM/issues/104): Python's import
    # failure inside a framework's own exception
    (["Traceback (most recent call last):",
      "bentoml.exceptions.MissingDependencyException: None (reason: No module named 'tensorflow')"],
     ("generic", "failed", "process_start", "import_error")),
    # f-generic-tei-compose-distilbert-missing-tensor.log
    # (https://github.com/huggingface/text-embeddings-inference/issues/600): a Rust main's last word
    (["dense-embed  | 2025-04-23T03:14:05.341111Z  INFO text_embeddings_router: router/src/lib.rs:230: Starting model "
      "backend", "dense-embed  | Error: Could not create backend"],
     ("generic", "failed", "process_start", "other")),
    # f-generic-aphrodite-ray-load-model-error.log (https://github.com/dphnAI/sonar/issues/522): a Ray worker's method
    # raised, and the method says the step
    (["(RayWorkerAphrodite pid=34201) INFO:     Aphrodite is using nccl==2.20.5",
      "(RayWorkerAphrodite pid=34320) ERROR:    Error executing method load_model. This might cause deadlock in "
      "distributed execution."],
     ("generic", "failed", "weights_loading", "other")),
    # e-vllm-v0-deepseek-r1-70b-worker-load-model-oom.log (https://github.com/vllm-project/vllm/issues/14092): v0's
    # multiprocessing worker names the method it failed in, after its traceback; the OOM above stays the cause
    (["(VllmWorkerProcess pid=195295) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] torch.OutOfMemoryError: "
      "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 2 has a total capacity of 14.62 GiB of which 3.31 MiB "
      "is free.",
      "(VllmWorkerProcess pid=195297) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] Exception in worker "
      "VllmWorkerProcess while processing method load_model."],
     ("vllm", "failed", "weights_loading", "oom")),
    (["(VllmWorkerProcess pid=195297) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] Exception in worker "
      "VllmWorkerProcess while processing method init_device."],
     ("vllm", "failed", "distributed_init", "other")),
    # f-trtllm-triton-llava-orte-init-failed.log
    # (https://github.com/triton-inference-server/tensorrtllm_backend/issues/712): Open MPI's own init failing
    (['I0221 15:25:20.264782 3002 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: tensorrt_llm_bls_0_0 '
      '(CPU device 0)"', "It looks like orte_init failed for some reason; your parallel process is"],
     ("trtllm", "failed", "distributed_init", "other")),
    # f-ollama-quoted-journalctl-x-mkdir-models-permission-denied.log (https://github.com/ollama/ollama/issues/9335):
    # systemd's word that the service's main process exited with an error
    (["Feb 25 17:49:00 host app[3156758]: starting",
      "Feb 25 17:49:00 host systemd[1]: app.service: Main process exited, code=exited, status=1/FAILURE"],
     ("generic", "failed", "process_start", "other")),
    (["Feb 25 17:49:00 host systemd[1]: app.service: Main process exited, code=dumped, status=11/SEGV"],
     ("generic", "failed", "process_start", "crashed")),
    # f-llamacpp-rocm-docker-4gpu-gfx906-context-destroyed.log (https://github.com/ggml-org/llama.cpp/issues/17583):
    # ggml's own abort on a ROCm error, mid-upload of the tensors
    (["load_tensors:        ROCm0 model buffer size =  2948.23 MiB",
      "......................ROCm error: context is destroyed",
      "  current device: 1, in function ggml_backend_cuda_buffer_set_tensor at /app/ggml/src/ggml-cuda/"
      "ggml-cuda.cu:625", "/app/ggml/src/ggml-cuda/ggml-cuda.cu:89: ROCm error"],
     ("llamacpp", "failed", "weights_loading", "crashed")),
    # f-llamacpp-llamafile-llava-gpu-nvidia-segfault.log (https://github.com/mozilla-ai/llamafile/issues/560)
    (["import_cuda_impl: initializing gpu module...", "link_cuda_dso: GPU support loaded", "Segmentation fault"],
     ("llamacpp", "failed", "process_start", "crashed")),
    # f-llamacpp-router-child-debug-create-tensor-loading.log (https://github.com/ggml-org/llama.cpp/pull/23398)
    (["0.00.288.375 D create_tensor: loading tensor blk.56.ssm_alpha.weight"],
     ("llamacpp", "incomplete", "weights_loading", "none")),
    # f-llamacpp-llamabox-split-gguf-4slots-ready.log (https://github.com/gpustack/llama-box/issues/7): llama-box's
    # own serving line, after its slots
    (["0.05.047.659 I srv                       main: initializing server",
      "0.05.047.938 I srv                       init: initializing slots, n_slots = 4",
      "0.05.049.245 I srv                       main: starting server"],
     ("llamacpp", "ready", "ready", "none")),
    # f-llamacpp-llamacpppython-llava-metal-uvicorn-ready.log (https://github.com/abetlen/llama-cpp-python/issues/1354):
    # llama.cpp's timings of a generation it answered
    (["INFO:     Uvicorn running on http://localhost:9007 (Press CTRL+C to quit)",
      "llama_print_timings:        load time =    1491.98 ms",
      "llama_print_timings: prompt eval time =    1491.90 ms /    37 tokens (   40.32 ms per token,    24.80 tokens "
      "per second)"],
     ("llamacpp", "ready", "ready", "none")),
    # f-llamacpp-windows-gemma-slow-response-ready.log (https://github.com/ggml-org/llama.cpp/issues/9013): the 2024
    # server's text log
    (['INFO [                    main] HTTP server listening | tid="11744" timestamp=1723514861 hostname="127.0.0.1" '
      'port="11484" n_threads_http="15"', 'INFO [            update_slots] all slots are idle | tid="11744" '
      'timestamp=1723514861'],
     ("llamacpp", "ready", "ready", "none")),
    # f-lmdeploy-api-server-usage-dump-arg-rejected.log (https://github.com/InternLM/lmdeploy/issues/2006): argparse's
    # usage block, printed as it rejects the command line
    (["usage: lmdeploy serve api_server [-h] [--server-name SERVER_NAME] [--server-port SERVER_PORT]"],
     ("lmdeploy", "failed", "process_start", "bad_argument")),
    # f-lmdeploy-pytorch-tp2-baichuan-rank1-failed-dist-model.log (https://github.com/InternLM/lmdeploy/issues/983)
    (["01/18 15:13:25 - lmdeploy - INFO - distribute model parameters.",
      "01/18 15:13:28 - lmdeploy - ERROR - /root/miniconda3/envs/aichat/lib/python3.9/site-packages/lmdeploy/pytorch/"
      "engine/model_agent.py - _start_tp_process - 855 - Rank[1] failed."],
     ("lmdeploy", "failed", "weights_loading", "other")),
    (["01/18 15:13:28 - lmdeploy - INFO - model_source: hf_model", "Traceback (most recent call last):",
      '  File "/root/miniconda3/envs/aichat/lib/python3.9/site-packages/lmdeploy/pytorch/models/patch.py", line 211, '
      'in _dist_model'],
     # its frame says the phase; cut before its exception line, the traceback alone is no death (the index's rule)
     ("lmdeploy", "incomplete", "weights_loading", "none")),
    # f-ollama-compose-unknown-arch-pangu-newllamaserver-failed.log (https://github.com/ollama/ollama/issues/12984)
    (['ollama  | time=2025-11-06T06:23:22.759Z level=INFO source=sched.go:418 msg="NewLlamaServer failed" '
      'model=/root/.ollama/models/blobs/sha256-8fc8 error="unable to load model: /root/.ollama/models/blobs/x"'],
     ("ollama", "failed", "weights_loading", "other")),
    # f-ollama-journalctl-reverse-mkdir-home-crashloop.log (https://github.com/ollama/ollama/issues/5938): the CLI's
    # last word as `ollama serve` exits
    (["2024/07/26 18:32:53 routes.go:1100: INFO server config env=\"map[CUDA_VISIBLE_DEVICES:]\"",
      "Error: mkdir /home/try/ollama: permission denied"],
     ("ollama", "failed", "process_start", "other")),
    # f-ollama-windows-app-log-server-crash-respawn-loop.log (https://github.com/ollama/ollama/issues/9960)
    (['time=2025-03-24T14:07:26.157+08:00 level=INFO source=server.go:127 msg="started ollama server with pid 8792"',
      'time=2025-03-24T14:07:26.226+08:00 level=WARN source=server.go:163 msg="server crash 9 - exit code 1 - '
      'respawning"'],
     ("ollama", "failed", "process_start", "other")),
    # f-ollama-journalctl-host-redacted-key-dir-permission-restart.log (https://github.com/ollama/ollama/issues/12700):
    # systemd starting the unit Ollama's installer writes
    (["Started Ollama Service.",
      "Oct 19 20:39:14 ollama[57241]: Error: could not create directory mkdir /var/lib/ollama/.ollama: permission "
      "denied"],
     ("ollama", "failed", "process_start", "other")),
    # f-ollama-msty-json-wrapped-ggml-assert-runner-died.log (https://github.com/ollama/ollama/issues/11418): a runner
    # that died of ggml's failed assert crashed
    (['time=2025-07-14T19:16:12.750+01:00 level=ERROR source=sched.go:457 msg="error loading llama server" '
      'error="llama runner process has terminated: GGML_ASSERT(tensor->op == GGML_OP_UNARY) failed"'],
     ("ollama", "failed", "weights_loading", "crashed")),
    # f-trtllm-grps-deepseek-4gpu-xqa-assert.log (https://github.com/NetEase-Media/grps_trtllm/issues/6): a C++
    # exception as it is thrown, its backtrace in TensorRT's plugin deserialization
    (["[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] Assertion failed: len <= "
      "remaining_buffer_size (/workspace/tensorrt_llm/cpp/tensorrt_llm/kernels/cubinObj.cpp:34)",
      "7       0x7fdd040952b2 tensorrt_llm::plugins::GPTAttentionPluginCreator::deserializePlugin(char const*, void "
      "const*, unsigned long) + 50"],
     ("trtllm", "failed", "weights_loading", "other")),
    # f-trtllm-serve-pytorch-autotune-gemm-assert.log (https://github.com/NVIDIA/TensorRT-LLM/issues/5389)
    (["[06/21/2025-01:30:42] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: [TensorRT-LLM][ERROR] "
      "Assertion failed: Error occurred when running GEMM!"],
     ("trtllm", "failed", "process_start", "other")),
    # f-trtllm-k8s-llmaz-qwen2-engine-build.log (https://github.com/InftyAI/llmaz/pull/392): the LLM API's loader
    (["[TensorRT-LLM] TensorRT-LLM version: 0.18.0", "Loading Model: [1/2]\tLoading HF model to memory"],
     ("trtllm", "incomplete", "weights_loading", "none")),
    (["[TensorRT-LLM] TensorRT-LLM version: 0.18.0", "Loading Model: [1/2]\tLoading HF model to memory",
      "Loading Model: [2/2]\tBuilding TRT-LLM engine"],
     ("trtllm", "incomplete", "compile", "none")),
    (["[TensorRT-LLM] TensorRT-LLM version: 0.18.0", "Loading Model: [1/2]\tLoading HF model to memory",
      "Loading model done."],
     ("trtllm", "incomplete", "weights_loaded", "none")),
    # f-llamacpp-router-compose-gemma4-mmproj-slots-init.log (https://github.com/ggml-org/llama.cpp/issues/22373):
    # the newer builds' slots, made in the model's load step
    (["srv    load_model: loading model '/opt/models/unsloth/gemma-4-26B-A4B-it-GGUF/x.gguf'",
      "srv    load_model: initializing slots, n_slots = 2"],
     ("llamacpp", "incomplete", "kv_cache", "none")),
    # f-generic-aphrodite-wsl-ray-gguf-after-weights.log (https://github.com/dphnAI/sonar/issues/360),
    # f-generic-infinity-rich-wrapped-warmup.log (https://github.com/michaelfeil/infinity/issues/58) and
    # f-generic-dynamo-serve-graph-frontend-http.log (https://github.com/ai-dynamo/dynamo/pull/839): a server no
    # profile knows says its weights are in, it warmed up, it starts its HTTP server
    (["INFO:     Model weights loaded. Memory usage: 17.15 GiB x 4 = 68.60 GiB"],
     ("generic", "incomplete", "weights_loaded", "none")),
    (["INFO     2024-01-12 16:09:39,441 infinity_emb INFO: model     select_model.py:81",
      "         warmed up, between 0.74-54.98 embeddings/sec at"],
     ("generic", "incomplete", "warmup", "none")),
    (["2025-04-28T20:48:26.301Z  INFO frontend.start_http_server: [Frontend:1] Starting HTTP server   "],
     ("generic", "incomplete", "http_listening", "none")),
    # f-trtllm-triton-v100-models-ready-table.log and f-trtllm-triton-chatglm2-mpisize-unavailable.log
    # (https://github.com/triton-inference-server/tensorrtllm_backend/issues/208, /33): Triton's model table
    (["| tensorrt_llm   | 1       | READY  |"], ("trtllm", "incomplete", "weights_loaded", "none")),
    (["| tensorrt_llm   | 1       | UNAVAILABLE: Internal: unexpected error when creating modelInstanceState: "
      "[TensorRT-LLM][ERROR] Assertion failed:  |"], ("trtllm", "failed", "weights_loading", "other")),
])
def test_the_fifth_rounds_rules_on_their_real_lines(lines: list[str], expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


@pytest.mark.parametrize("lines, expected", [
    # f-vllm-ascend-qwen3-next-910b4-no-free-memory.log (https://github.com/vllm-project/vllm-ascend/issues/3843):
    # the NPU worker left nothing for the KV cache
    (["(Worker_TP2 pid=554) INFO 10-28 21:14:48 [worker_v1.py:259] Available memory: 0, total memory: 65452113920",
      "(EngineCore_DP0 pid=415) ERROR 10-28 21:14:49 [core.py:708] EngineCore failed to start."],
     ("vllm", "failed", "kv_cache", "kv_cache")),
    # f-vllm-ascend-glm5-dp2-tp8-apiserver-died.log (https://github.com/vllm-project/vllm-ascend/issues/9071)
    (["(EngineCore_DP1 pid=347) INFO 05-11 11:39:27 [platform.py:536] Set PYTORCH_NPU_ALLOC_CONF=expandable_segments:"
      "True", "INFO 05-11 11:39:27 [utils.py:250] Waiting for API servers to complete ...",
      "ERROR 05-11 11:39:27 [utils.py:291] Exception occurred while running API servers: Process ApiServer_0 "
      "(PID: 359) died with exit code 1"],
     ("vllm", "failed", "process_start", "other")),
    # f-vllm-cpu-gemma2-sdpa-softcap-load-fail.log (https://github.com/vllm-project/vllm/issues/8660)
    (["(VllmWorkerProcess pid=143) ERROR 09-20 08:05:48 multiproc_worker_utils.py:226] Exception in worker "
      "VllmWorkerProcess while processing method load_model: Torch SPDA does not support logits soft cap., Traceback "
      "(most recent call last):"],
     ("vllm", "failed", "process_start", "other")),
    # f-vllm-ray-mlp-speculator-tp-worker-init.log (https://github.com/vllm-project/vllm/pull/6050)
    (["(RayWorkerWrapper pid=401734) INFO 07-02 05:17:20 utils.py:719] Found nccl from library libnccl.so.2"],
     ("vllm", "incomplete", "distributed_init", "none")),
    # f-vllm-tpu-ray-pixtral-compiling-shapes.log (https://github.com/vllm-project/vllm/issues/11132)
    (["INFO 12-12 11:19:10 tpu_model_runner.py:274] Compiling the model with different input shapes...",
      "(RayWorkerWrapper pid=311759) INFO 12-12 11:19:16 tpu_model_runner.py:274] Compiling the model with different "
      "input shapes..."],
     ("vllm", "incomplete", "compile", "none")),
    # f-vllm-v0-memory-profiling-results-table.log (https://github.com/vllm-project/vllm/pull/10511): its v0 logger's
    # format and its profiler's table head
    (["INFO 12-13 19:54:18 worker.py:243] Memory profiling results:",
      "INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    53.29GiB"],
     ("vllm", "incomplete", "kv_cache", "none")),
    # f-vllm-v0-routes-uvicorn-port5000-ready.log (https://github.com/vllm-project/vllm/issues/12664)
    (["INFO 02-02 18:01:49 launcher.py:27] Route: /v1/completions, Methods: POST",
      "INFO:     Application startup complete."],
     ("vllm", "ready", "ready", "none")),
    # f-vllm-v1-uvicorn-ready-models-200.log (https://github.com/vllm-project/vllm/pull/12600)
    (["INFO:     Application startup complete.",
      "INFO 01-31 19:05:39 chat_utils.py:330] Detected the chat template content format to be 'string'. You can set "
      "`--chat-template-content-format` to override this."],
     ("vllm", "ready", "ready", "none")),
    # f-vllm-gb10-spark-chat-template-warmup.log (https://github.com/vllm-project/vllm/pull/31740) and
    # f-vllm-v1-eager-engine-init-done-api-setup.log (https://github.com/vllm-project/vllm/pull/20707): the API
    # server's app state, once the engine is up
    (["(EngineCore_0 pid=1399537) INFO 08-19 14:58:40 [kv_cache_utils.py:849] GPU KV cache size: 922,496 tokens",
      "(APIServer pid=1391815) INFO 08-19 14:58:41 [api_server.py:1639] Supported_tasks: ['generate']"],
     ("vllm", "incomplete", "http_listening", "none")),
    (["(EngineCore_DP0 pid=4599) INFO 01-06 23:26:32 [kv_cache_utils.py:849] GPU KV cache size: 922,496 tokens",
      "(APIServer pid=4548) INFO 01-06 23:26:32 [serving_chat.py:180] Warming up chat template processing..."],
     ("vllm", "incomplete", "http_listening", "none")),
    # f-vllm-llmd-nested-prefix-kv-connector-init-error.log (https://github.com/llm-d/llm-d/issues/661): the worker
    # given its KV cache config
    (["(EngineCore_DP0 pid=181) (Worker_TP1 pid=189) ERROR 01-29 22:59:30 [multiproc_executor.py:852]   File "
      "\"/opt/vllm-source/vllm/v1/worker/gpu_worker.py\", line 403, in initialize_from_config"],
     ("vllm", "incomplete", "kv_cache", "none")),
])
def test_the_fifth_rounds_vllm_rules_on_their_real_lines(lines: list[str],
                                                         expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


@pytest.mark.parametrize("line, scores", [
    # f-vllm-v0-memory-profiling-results-table.log (https://github.com/vllm-project/vllm/pull/10511)
    ("INFO 12-13 19:54:18 worker.py:243] duration     0.75 seconds", {"vllm": 2}),
    ("INFO 12-13 19:54:18 worker.py:243] Memory profiling results:", {"vllm": 5}),
    # f-vllm-xpu-ipex-operator-override-platform-detect.log (https://github.com/vllm-project/vllm/pull/14612)
    ("INFO 03-13 10:36:11 [__init__.py:256] Automatically detected platform xpu.", {"vllm": 6}),
    # f-vllm-dynamo-serve-http-up-weights-loading.log (https://github.com/ai-dynamo/dynamo/pull/532)
    ("2025-04-07T00:31:08.614Z  INFO config._resolve_task: This model supports multiple tasks: {'classify', 'score', "
     "'reward', 'generate', 'embed'}. Defaulting to 'generate'.", {"vllm": 3}),
    # f-vllm-v1-uvicorn-ready-models-200.log (https://github.com/vllm-project/vllm/pull/12600), its prefix gone
    ("Detected the chat template content format to be 'string'. You can set `--chat-template-content-format` to "
     "override this.", {"vllm": 2}),
    # f-vllm-v0-routes-uvicorn-port5000-ready.log (https://github.com/vllm-project/vllm/issues/12664)
    ("INFO 02-02 18:01:49 launcher.py:27] Route: /v1/completions, Methods: POST", {"vllm": 4}),
    # f-llamacpp-windows-gemma-slow-response-ready.log (https://github.com/ggml-org/llama.cpp/issues/9013)
    ('INFO [            update_slots] all slots are idle | tid="11744" timestamp=1723514861', {"llamacpp": 4}),
    # f-llamacpp-llamafile-llava-gpu-nvidia-segfault.log (https://github.com/mozilla-ai/llamafile/issues/560)
    ("link_cuda_dso: note: dynamically linking /home/lab/.llamafile/v/0.8.11/ggml-cuda.so", {"llamacpp": 4}),
    # f-llamacpp-router-child-debug-create-tensor-loading.log (https://github.com/ggml-org/llama.cpp/pull/23398)
    ("[58649] 0.00.288.375 D create_tensor: loading tensor blk.56.ssm_alpha.weight", {"llamacpp": 4}),
    # f-llamacpp-llamacpppython-llava-metal-uvicorn-ready.log (https://github.com/abetlen/llama-cpp-python/issues/1354)
    ("llama_print_timings:        load time =    1491.98 ms", {"llamacpp": 4}),
    # f-llamacpp-rocm-docker-4gpu-gfx906-context-destroyed.log (https://github.com/ggml-org/llama.cpp/issues/17583)
    ("  current device: 1, in function ggml_backend_cuda_buffer_set_tensor at /app/ggml/src/ggml-cuda/ggml-cuda.cu:625",
     {"llamacpp": 3}),
    # f-generic-gpustack-docker-server-serving-tools-download.log (https://github.com/gpustack/gpustack/issues/450):
    # the platform downloading llama-box's release is not llama-box's line
    ("2024-10-24T06:25:07+00:00 - gpustack.worker.tools_manager - INFO - downloading llama-box-linux-amd64-cuda-12.4 "
     "'v0.0.67'", {}),
    ("2025-02-09T18:32:29-03:00 - gpustack.worker.backends.llama_box - INFO - Starting llama-box server",
     {"llamacpp": 4}),
    # f-lmdeploy-api-server-usage-dump-arg-rejected.log (https://github.com/InternLM/lmdeploy/issues/2006)
    ("usage: lmdeploy serve api_server [-h] [--server-name SERVER_NAME]", {"lmdeploy": 10}),
    # f-ollama-journalctl-host-redacted-key-dir-permission-restart.log (https://github.com/ollama/ollama/issues/12700)
    ("Started Ollama Service.", {"ollama": 4}),
    ("Started ollama.service - Ollama Service.", {"ollama": 4}),
    # f-trtllm-triton-v100-models-ready-table.log, f-trtllm-triton-llava-orte-init-failed.log
    # (https://github.com/triton-inference-server/tensorrtllm_backend/issues/208, /712)
    ("| tensorrt_llm   | 1       | READY  |", {"trtllm": 7}),
    ('I0221 15:25:20.264782 3002 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: tensorrt_llm_bls_0_0 '
     '(CPU device 0)"', {"trtllm": 7}),
])
def test_each_line_of_the_fifth_round_weighs_what_its_rule_says(line: str, scores: dict[str, int]) -> None:
    """Each new detection rule alone, on its real line: the weight it gives, and to which engine only."""
    detector = EngineDetector(list(PROFILES.values()))
    detector.feed(line)
    assert {name: score for name, score in detector.scores.items() if score} == scores


# -- the rules read off gathering g ------------------------------------------------------------------------------
@pytest.mark.parametrize("engine, line, phase", [
    # g-vllm-aiperf-custom-timestamp-compile-cut.log (https://github.com/ai-dynamo/aiperf/issues/439): a logging
    # config that prints the year; g-vllm-gpustack-stripped-prefix-api-server-starting.log
    # (https://github.com/gpustack/gpustack/issues/2493): a wrapper's stamp before the logger's "[file.py:N] "
    ("vllm", "INFO 2025-11-07 17:18:33.192 kv_cache_utils.py:637] GPU KV cache size: 417,136 tokens", "kv_cache"),
    ("vllm", "[07-16 05:15:26] [kv_cache_utils.py:637] Maximum concurrency for 8,192 tokens per request: 19.87x  ",
     "kv_cache"),
    # g-vllm-rocm-lemonade-wrapped-enginecore-loading.log (https://github.com/lemonade-sdk/lemonade/issues/1734)
    ("vllm", "2026-05-08 11:44:34.123 [Info] (Process) (EngineCore pid=2651) INFO 05-08 11:44:34 "
             "[gpu_model_runner.py:4777] Starting to load model Qwen/Qwen3.5-4B...", "weights_loading"),
    # g-vllm-tpu-jax-precompile-sample.log, g-vllm-tenstorrent-tt-kv-alloc-init-engine.log, g-vllm-v0-tp-mm-profile-
    # workers-exit.log, g-vllm-rocm-gfx1151-quark-memory-access-fault-abort.log, g-vllm-5090-dflash-engine-init-done-
    # mm-warmup.log, g-vllm-hpu-gaudi1-pt-lazy-fatal-after-load.log (their URLs in INDEX.tsv)
    ("vllm", "(EngineCore_DP0 pid=2982916) INFO 10-20 00:03:47 [compilation_manager.py:57] Precompile sample --> "
             "{'num_reqs': 16, 'do_sampling': True}", "compile"),
    ("vllm", "Allocating TT kv caches for each layer (submesh 1): 100%|██████████| 32/32 [00:04<00:00,  7.63it/s]",
     "kv_cache"),
    ("vllm", "INFO 10-15 03:59:01 enc_dec_model_runner.py:301] Starting profile run for multi-modal models.",
     "kv_cache"),
    ("vllm", "(EngineCore pid=5379) [QUARK-INFO]: C++ kernel build directory: /home/ross/.cache/torch_extensions/"
             "py312_cpu/kernel_ext. First-time compilation may take a few minutes...", "compile"),
    ("vllm", "(EngineCore pid=59) INFO 05-07 04:54:33 [gpu_worker.py:619] CUDA graph pool memory: 0.04 GiB (actual), "
             "0.05 GiB (estimated), difference: 0.01 GiB (18.2%).", "cuda_graph"),
    ("vllm", "INFO 02-04 12:35:23 hpu_model_runner.py:794] Loading model weights took in total 15.05 GiB of device "
             "memory (15.05 GiB/30.15 GiB used)", "weights_loaded"),
    # g-vllm-xpu-arc-ipexllm-ray-ccl-init.log (https://github.com/intel/ipex-llm/issues/12066): oneCCL, any engine
    ("generic", "2024:09:14-11:02:35:(  241) |CCL_WARN| topology recognition shows PCIe connection between devices.",
     "distributed_init"),
    ("generic", "-----> current rank: 0, world size: 4, byte_count: 33554432", "distributed_init"),
    # g-lmdeploy-turbomind-debug-blockmanager-gemm-tuning.log, g-trtllm-triton-paged-kv-693-tokens-failed-load.log,
    # g-trtllm-triton-tp4-mpi-ranks-engine-load-cut.log, g-llamacpp-rocm-apertus-70b-compute-buffer-oom.log,
    # g-llamacpp-lcpp-python-docker-gguf-on-ggml-build.log, g-ollama-orin-jetpack7-cuda-init-operation-not-supported-
    # cpu-only.log
    ("lmdeploy", "[TM][INFO] [Gemm2] Tuning sequence: 8, 16, 32, 48, 64, 96, 128", "compile"),
    ("trtllm", "[TensorRT-LLM][INFO] Using 693 tokens in paged KV cache.", "kv_cache"),
    ("llamacpp", "graph_reserve: failed to allocate compute buffers", "kv_cache"),
    ("llamacpp", "llama.cpp: loading model from /models/llama-2-13b.Q5_K_M.gguf", "weights_loading"),
    ("ollama", 'time=2026-08-30T20:53:48.625Z level=DEBUG source=ggml.go:326 msg="key with type not found" '
               "key=llama.block_count default=0", "weights_loading"),
    # g-generic-llmserver-rs-rk3588-compose-rkllm-load-actix-workers.log (https://github.com/darkautism/llmserver-rs/
    # issues/12), g-generic-ovms-llm-cb-grpc-rest-started-cut.log (https://github.com/openvinotoolkit/model_server/
    # issues/2693)
    ("generic", "I rkllm: loading rkllm model from /root/.cache/huggingface/hub/Qwen3-4B-rk3588-w8a8.rkllm",
     "weights_loading"),
    ("generic", "[2025-07-13T13:06:35Z INFO  actix_server::builder] starting 8 workers", "http_listening"),
    ("generic", "[2024-09-20 16:37:31.757][60][serving][info][http_server.cpp:269] REST server listening on port 8000 "
                "with 256 threads", "http_listening"),
])
def test_the_sixth_rounds_phase_lines(engine: str, line: str, phase: str) -> None:
    assert get_profile(engine).classify(line).phase == phase


@pytest.mark.parametrize("lines, engine", [
    # the program named by its own first words, its command line as a shell echoed it, its modules and enums
    (["Couldn't find '/home/wangbin/.ollama/id_ed25519'. Generating new private key.",
      "Error: listen tcp 127.0.0.1:11434: bind: address already in use"], "ollama"),
    (["ls@ls-B460MDS3H:~$ lmdeploy serve api_server --backend pytorch --tp 2 /home/ls/Projects/Baichuan2-7B-Chat"],
     "lmdeploy"),
    (["./start.sh: line 22:  5255 Aborted                    (core dumped) vllm serve amd/gpt-oss-120b-w-mxfp4-a-fp8"],
     "vllm"),
    (["(WrapperWithLoadBit pid=4874) INFO 09-14 11:01:33 selector.py:127] Cannot use _Backend.FLASH_ATTN backend on "
      "XPU."], "vllm"),
    (['(EngineCore_DP0 pid=626)   File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/worker_v1.py", line 90, in '
      "__init__"], "vllm"),
    (["(EngineCore_0 pid=9973) [2025-09-09 23:55:45,832] LMCache INFO: Reqid: cmpl-c17b, Total tokens 6",
      "INFO 09-09 23:55:45 [async_llm.py:270] Added request cmpl-c17b24bdcec745cf9acfb46dc47e3014-0."], "vllm"),
    (["[2026-01-20 02:39:49] Launch DP0 starting at GPU #0."], "sglang"),
    # g-sglang-diffusion-http-not-ready-warmup-abort.log (https://github.com/sgl-project/sglang/issues/28493)
    (["[06-17 13:46:56] Server warmup failed; aborting startup: HTTP server did not become ready at "
      "http://[::1]:10454/health"], "sglang"),
    (["[2025-04-28 00:19:04 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00"],
     "sglang"),
    (["root@GPU-26:/tensorrtllm_backend/tensorrtllm_backend# I1030 10:36:44.146919 3659 pinned_memory_manager.cc:241] "
      "Pinned memory pool is created at '0x7f207a000000' with size 268435456"], "trtllm"),
    (["llama.cpp: loading model from /models/llama-2-13b.Q5_K_M.gguf"], "llamacpp"),
    (["ggml_cuda_init: found 2 CUDA devices:", "error: invalid argument: -rpc"], "llamacpp"),
])
def test_the_sixth_rounds_lines_name_their_engine(lines: list[str], engine: str) -> None:
    assert replay_lines(lines).engine == engine


@pytest.mark.parametrize("lines, expected", [
    # a traceback cut before its exception line is no death (the index's rule; g-vllm-nohup-source-build-import-
    # traceback.log, https://github.com/vllm-project/vllm/issues/28138) ...
    (["Automatically detected platform cuda.", "Traceback (most recent call last):",
      '  File "/root/vllm/vllm/entrypoints/cli/main.py", line 8, in <module>',
      "    import vllm.entrypoints.cli.benchmark.main"], ("vllm", "incomplete", "process_start", "none")),
    # ... but it is where a logged exception's message comes just before it (g-vllm-hpu-gaudi1-pt-lazy-fatal-after-
    # load.log, https://github.com/HabanaAI/vllm-fork/issues/754) ...
    (["INFO 02-04 12:35:23 hpu_model_runner.py:794] Loading model weights took in total 15.05 GiB of device memory",
      "ERROR 02-04 12:35:23 engine.py:387] [Rank:0] FATAL ERROR :: MODULE:PT_LAZY Error, ValidateSyncInputTensors "
      "tensor_data is empty.",
      "ERROR 02-04 12:35:23 engine.py:387] Traceback (most recent call last):",
      'ERROR 02-04 12:35:23 engine.py:387]   File "/home/ubuntu/git/vllm-fork/vllm/engine/multiprocessing/engine.py", '
      "line 378, in run_mp_engine"], ("vllm", "failed", "weights_loaded", "other")),
    # ... or another process's exception just before it, a module's lower-case one included (e-vllm-compose-2024-get-
    # ip-gaierror-traceback.log, https://github.com/vllm-project/vllm/issues/3950)
    (["qwen1.5  | socket.gaierror: [Errno -3] Temporary failure in name resolution",
      "qwen1.5  | Traceback (most recent call last):",
      'qwen1.5  |   File "/workspace/vllm/engine/async_llm_engine.py", line 369, in _init_engine'],
     ("vllm", "failed", "process_start", "other")),
    # an error said after the exception line is no recovery from it (g-vllm-ascend-npu-init-setprecisionmode-500001.log,
    # https://github.com/vllm-project/vllm-ascend/issues/4719)
    (["(EngineCore_DP0 pid=626) Traceback (most recent call last):",
      '(EngineCore_DP0 pid=626)   File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/worker_v1.py", line 90, in '
      "__init__",
      "(EngineCore_DP0 pid=626) RuntimeError: SetPrecisionMode:torch_npu/csrc/framework/LazyInitAclops.cpp:155 NPU "
      "function error",
      "(EngineCore_DP0 pid=626) [ERROR] 2025-12-05-07:51:00 (PID:626, Device:0, RankID:-1) ERR00100 PTA call acl api "
      "failed"], ("vllm", "failed", "process_start", "other")),
    # the lines that tell a death after its first say where it happened (g-llamacpp-rocm-apertus-70b-compute-buffer-
    # oom.log, https://github.com/ggml-org/llama.cpp/issues/16114), and a traceback's frames after its fatal line
    # (g-vllm-v1-enginecore-linear-weights-oom.log, https://github.com/vllm-project/vllm/issues/28230)
    (["ggml_backend_cuda_buffer_type_alloc_buffer: allocating 14136.04 MiB on device 0: cudaMalloc failed: out of "
      "memory", "graph_reserve: failed to allocate compute buffers",
      "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers"],
     ("llamacpp", "failed", "kv_cache", "oom")),
    (["(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [linear.py:210] Failed to create unquantized linear weights: "
      "CUDA out of memory. Tried to allocate 896.00 MiB.",
      "(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [core.py:708] EngineCore failed to start.",
      "(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [core.py:708] Traceback (most recent call last):",
      '(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [core.py:708]   File "/home/localadmin/Documents/vllm/.venv/lib/'
      'python3.10/site-packages/vllm/model_executor/layers/linear.py", line 202, in create_weights'],
     ("vllm", "failed", "weights_loading", "oom")),
    # a server no profile knows: a desktop server's listening word, a launcher's "Model is ready" (g-generic-lmstudio-
    # server-listening-1234-endpoints.log, https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/1129; g-generic-
    # openllm-hello-bentoml-serve-model-is-ready.log, https://github.com/bentoml/OpenLLM/issues/1053)
    (["[2026-08-05 06:35:30][INFO][LM STUDIO SERVER] Success! HTTP server listening on port 1234"],
     ("generic", "ready", "ready", "none")),
    (["$ bentoml serve llama3.1:8b-instruct-fp16-6d7b --port 38720", "Model server started 101331",
      "Model loading...", "Model is ready"], ("generic", "ready", "ready", "none")),
    # llama-cpp-python's server (g-llamacpp-lcpp-python-ailab-recipe-uvicorn-ready.log,
    # https://github.com/containers/ai-lab-recipes/issues/36)
    (["llama_model_loader: loaded meta data with 20 key-value pairs and 291 tensors from /locallm/models/m.gguf",
      "INFO:     Uvicorn running on http://0.0.0.0:8001 (Press CTRL+C to quit)"],
     ("llamacpp", "ready", "ready", "none")),
])
def test_the_sixth_rounds_rules_on_their_real_lines(lines: list[str], expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected


# -- the rules read off gathering h's dev half (their URLs in INDEX.tsv) -----------------------------------------
@pytest.mark.parametrize("engine, line, phase", [
    # h-trtllm-serve-gptoss120b-rtxpro-kv-window-reduced.log: the PyTorch backend's model init, then its KV cache
    ("trtllm", "Model init total -- 20.72s", "weights_loaded"),
    ("trtllm", "[10/07/2025-18:33:58] [TRT-LLM] [W] Both free_gpu_memory_fraction and max_tokens are set (to "
               "0.8999999761581421 and 8224 with free memory 7.2676849365234375 of total memory 23.742691040039062, "
               "respectively). The smaller value will be used.", "kv_cache"),
    # h-lmdeploy-gradio-bind-ipv6-errno99.log, h-lmdeploy-v100-tp8-debug-forward-stall.log
    ("lmdeploy", "server is gonna mount on: http://localhost:6009", "http_listening"),
    ("lmdeploy", "[TM][DEBUG] void turbomind::UnifiedAttentionLayer::Forward(turbomind::UnifiedAttentionLayer::"
                 "ForwardParam)", "warmup"),
    # h-lmdeploy-internlm-chat-7b-tp4-turbomind-config-cut.log: the setting in a JSON dump is no KV cache yet
    ("lmdeploy", '  "cache_max_entry_count": 0.5,', None),
    # h-sglang-v01-rpyc-tp2-awq-70b-load.log
    ("sglang", "Rank 0: load weight begin.", "weights_loading"),
    # h-generic-localai-compose-fiber-banner-cut.log, h-generic-tei-qwen3-cpu-compose-download.log,
    # h-generic-mistralrs-gguf-config-null-usize.log (the bar, split from the line glued to it)
    ("generic", " │                   Fiber v2.47.0                   │ ", "http_listening"),
    ("generic", "2025-07-01T02:13:27.735068Z  INFO download_artifacts: text_embeddings_core::download: "
                "core/src/download.rs:20: Starting download", "download"),
    ("generic", "config.json [00:00:00] [" + "█" * 274 + "] 596 B/596 B 3.50 KiB/s (0s)", "download"),
])
def test_the_seventh_rounds_phase_lines(engine: str, line: str, phase: str | None) -> None:
    assert get_profile(engine).classify(line).phase == phase


@pytest.mark.parametrize("line, phase", [
    # h-vllm-kaito-mistral-large3-attn-backend-keyerror.log: the attention backends of the KV-cache groups
    ('(APIServer pid=5693) (EngineCore_DP0 pid=7960)   File "/usr/local/lib/python3.12/site-packages/vllm/v1/worker/'
     'gpu_model_runner.py", line 5539, in initialize_attn_backend', "kv_cache"),
    # h-vllm-llmcompressor-awq-no-compatible-scheme-killed.log: a quantization method's layers
    ('ERROR 05-13 16:04:42 [core.py:387]   File "/data/home/fangxuwei/mambaforge/envs/vllm/lib/python3.12/site-'
     'packages/vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py", line 375, in '
     "_get_scheme_from_parts", "weights_loading"),
    # h-vllm-gaudi-oss-warmup-graphs-traceback-ansi.log: caret notation, its "^M" included
    ('^[[1;36m(Worker_TP6 pid=142964)^[[0;0m ERROR 09-17 20:31:15 [multiproc_executor.py:671]   File "/vllm-gaudi/'
     'vllm_gaudi/v1/worker/hpu_model_runner.py", line 3327, in warmup_graphs^M', "warmup"),
    # h-generic-triton-fastertransformer-neox-kserve-segfault.log: a C++ backtrace's frame
    (" 3 0x000000000002263c TRITONBACKEND_ModelInstanceInitialize()  ???:0", "weights_loading"),
])
def test_the_seventh_rounds_frames(line: str, phase: str) -> None:
    assert replay_lines(["Traceback (most recent call last):", line]).phase == phase


@pytest.mark.parametrize("lines, engine", [
    # h-vllm-windows-build-compile-aot-save.log, h-vllm-glm4-api-rms-norm-missing-op-fatal-shutdown.log,
    # h-vllm-llmd-openshift-triton-cache-permission.log: vLLM's own words
    (["INFO 09-21 01:10:59 [backends.py:1094] Using cache directory: D:\\Cache\\pnpm\\cache\\vllm\\torch_compile_cache"
      "\\55da4658b9\\rank_0_0\\backbone for vLLM's torch.compile"], "vllm"),
    (["INFO 08-01 16:22:41 multiproc_worker_utils.py:123] Killing local vLLM worker processes"], "vllm"),
    (["RuntimeError: Engine core initialization failed."], "vllm"),
    # h-vllm-torchserve-llama31-8b-tp2-gpu-blocks.log: TorchServe's stamp peeled
    (["2024-09-13T22:25:41,496 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - INFO 09-13 22:25:41 "
      "distributed_gpu_executor.py:57] # GPU blocks: 61913, # CPU blocks: 4096"], "vllm"),
    # h-sglang-mi300x-dsv3-launch-import-traceback-cut.log, h-sglang-v01-rpyc-tp2-awq-70b-load.log
    (['  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 6, in <module>'], "sglang"),
    (["router init state: Traceback (most recent call last):"], "sglang"),
    # h-lmdeploy-internlm-chat-7b-tp4-turbomind-config-cut.log, h-lmdeploy-gradio-bind-ipv6-errno99.log
    (["model_source: hf_model"], "lmdeploy"),
    (["server is gonna mount on: http://localhost:6009"], "lmdeploy"),
    # h-generic-tei-qwen3-cpu-compose-download.log: TEI shares TGI's "Args {" line and router path, never its name
    (['embedding-model-1  | 2025-07-01T02:13:27.612853Z  INFO text_embeddings_router: router/src/main.rs:189: Args { '
      'model_id: "Qwe*/*****-*********-0.6B", revision: None }',
      "embedding-model-1  | 2025-07-01T02:13:27.735068Z  INFO download_artifacts: text_embeddings_core::download: "
      "core/src/download.rs:20: Starting download"], "generic"),
])
def test_the_seventh_rounds_lines_name_their_engine(lines: list[str], engine: str) -> None:
    assert replay_lines(lines).engine == engine


@pytest.mark.parametrize("lines, expected", [
    # a progress bar's last redraw glued to a crash names its engine and phase (h-sglang-rocm-dsr1-aiter-graph-
    # capture-segfault.log)
    (["Capturing batches (bs=448 avail_mem=87.41 GB):   8%|" + "█" * 11 + "▋" + " " * 137 + "| 4/51 [00:20<03:35,  "
      "4.59s/it]Fatal Python error: Segmentation fault"], ("sglang", "failed", "cuda_graph", "crashed")),
    # ... and an indicatif bar glued to the error that ends the start (h-generic-mistralrs-gguf-config-null-usize.log)
    (["config.json [00:00:00] [" + "█" * 274 + "] 596 B/596 B 3.50 KiB/s (0s)Error: invalid type: null, expected "
      "usize at line 19 column 24"], ("generic", "failed", "download", "other")),
    # a traceback's header alone, after another process's exception (h-vllm-dgx-spark-torch-sdpa-backend-not-
    # registered.log)
    (["(EngineCore pid=85) ERROR 06-23 18:39:58 [core.py:1229] ValueError: Backend TORCH_SDPA must be registered "
      "before use. Use register_backend(Backend.TORCH_SDPA, 'your.module.YourClass')",
      "(EngineCore pid=85) Process EngineCore:", "(EngineCore pid=85) Traceback (most recent call last):"],
     ("vllm", "failed", "process_start", "bad_argument")),
    # the interpreter's complaint at shutdown is no crash: the missing op is the cause (h-vllm-glm4-api-rms-norm-
    # missing-op-fatal-shutdown.log)
    (["[rank0]: AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'",
      "INFO 08-01 16:22:41 multiproc_worker_utils.py:123] Killing local vLLM worker processes",
      "Fatal Python error: _enter_buffered_busy: could not acquire lock for <_io.BufferedWriter name='<stdout>'> at "
      "interpreter shutdown, possibly due to daemon threads"], ("vllm", "failed", "process_start", "import_error")),
    # torch.compile's exception is the compile (h-vllm-llmd-openshift-triton-cache-permission.log)
    (["(EngineCore pid=84) torch._inductor.exc.InductorError: PermissionError: [Errno 13] Permission denied: "
      "'/.triton'", "(EngineCore pid=84) ERROR ... EngineCore failed to start.",
      "RuntimeError: Engine core initialization failed."], ("vllm", "failed", "compile", "other")),
    # Triton 24.x's quoted load failure (h-trtllm-triton-compose-engine-config-key-missing.log)
    (["triton-models-1  | E0618 08:11:13.251518 1 model_lifecycle.cc:641] \"failed to load 'tensorrt_llm' version 1: "
      "Internal: unexpected error when creating modelInstanceState: [json.exception.out_of_range.403] key "
      "'use_context_fmha_for_generation' not found\"",
      "triton-models-1  | I0618 08:11:13.251528 1 model_lifecycle.cc:776] \"failed to load 'tensorrt_llm'\""],
     ("trtllm", "failed", "weights_loading", "other")),
    # lmdeploy's gradio server up (h-lmdeploy-gradio-turbomind-tp4-peer-access-ready.log)
    (["[TM][WARNING] Device 3 peer access Device 2 is not available.",
      "server is gonna mount on: http://0.0.0.0:6006", "Running on local URL:  http://0.0.0.0:6006"],
     ("lmdeploy", "ready", "ready", "none")),
    # Fiber's banner, bound (c-generic-localai-fiber-banner-ready.log)
    (["  ┌───────────────────────────────────────────────────┐",
      "  │                   Fiber v2.50.0                   │",
      "  │               http://127.0.0.1:8080               │",
      "  │       (bound on host 0.0.0.0 and port 8080)       │"], ("generic", "ready", "ready", "none")),
    # llama-box's rejection of a flag (h-llamacpp-llama-box-override-tensor-invalid-argument.log)
    (["Invalid argument: --override-tensor", "Available buffer types:", "  CPU", "  CUDA0"],
     ("generic", "failed", "process_start", "bad_argument")),
])
def test_the_seventh_rounds_rules_on_their_real_lines(lines: list[str], expected: tuple[str, str, str, str]) -> None:
    assert _read(lines) == expected
