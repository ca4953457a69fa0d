"""Engine profiles: classify() on real wordings (old and new), detection from commands, log lines and
HTTP responses, command-line port/host parsing, LineSplitter, and bounded-memory replay."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest

from firstlight.engines import (
    FAILURE_CATEGORIES,
    PHASES,
    PROFILES,
    EngineProfile,
    LineMatch,
    clean_line,
    detect_from_command,
    detect_from_endpoint,
    detect_from_lines,
    detection_paths,
    get_profile,
    read_command,
)
from firstlight.engines.prefilter import required_literal
from firstlight.engines.profile import CATEGORY_RANK
from firstlight.logreplay import replay_log
from firstlight.logtext import LineSplitter, split_redraws
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import REPO as _REPO
from tests.support.engines_profiles import CLASSIFY_CASES

FIXTURES = _FIXTURES / "engines"


SHARED_LOGS = _REPO.parent / "shared" / "logs"


def _check(m: LineMatch, expected: dict[str, Any]) -> None:
    if not expected:
        assert m.failure is None and not m.ready, m
    for key, want in expected.items():
        if key == "failure":
            assert m.failure is not None, m
            assert (m.failure.category, m.failure.fatal) == want, m.failure
        elif key == "progress":
            assert m.progress is not None, m
            assert (m.progress.kind, m.progress.done, m.progress.total) == want
            assert m.progress.fraction is not None and 0 <= m.progress.fraction <= 1
        else:
            assert getattr(m, key) == want, (key, m)


@pytest.mark.parametrize(
    ("engine", "line", "expected"),
    CLASSIFY_CASES,
    ids=[f"{e}-{i}" for i, (e, _, _) in enumerate(CLASSIFY_CASES)],
)
def test_classify(engine: str, line: str, expected: dict[str, Any]) -> None:
    _check(get_profile(engine).classify(line), expected)


def test_classify_strips_ansi_and_prefixes() -> None:
    p = get_profile("sglang")
    m = p.classify("\x1b[32m[2025-03-07 09:31:43 DP0 TP6 EP6]\x1b[0m Load weight begin. avail mem=70 GB\r\n")
    assert m.phase == "weights_loading"
    v = get_profile("vllm")
    assert v.classify(
        "vllm-1  | (VllmWorker rank=1 pid=77) ERROR 05-07 02:14:18 [core.py:396] NCCL error: x"
    ).failure
    assert clean_line("(RayWorkerWrapper pid=123, ip=10.0.0.1) INFO 05-12 10:11:12 [x.py:1] hello") == "hello"
    assert clean_line("Nov 30 02:55:01 host python3[123]: [2025-08-11 02:20:13 TP0] hi") == "hi"
    assert (
        clean_line("2024-03-06T17:53:22.335714Z  INFO text_generation_launcher: x")
        == "text_generation_launcher: x"
    )


def test_classify_is_pure_and_repeatable() -> None:
    p = get_profile("sglang")
    line = "[2026-05-25 17:42:54 TP0] Scheduler hit an exception: Traceback (most recent call last):"
    assert p.classify(line) == p.classify(line)


# --- the word index never hides a match ---------------------------------------------------------------


@functools.cache
def _corpus() -> tuple[str, ...]:
    lines = [line for _, line, _ in CLASSIFY_CASES]
    for folder in (FIXTURES, SHARED_LOGS):
        if folder.is_dir():
            for path in sorted(folder.glob("*.log")):
                for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    lines.extend(seg for seg in raw.split("\r") if seg.strip())
    return tuple(lines)


def _brute_force(profile: EngineProfile, text: str) -> tuple[Any, ...]:
    """Every pattern tried on the line, one by one: what the word index must always agree with."""
    rx = _compiled(profile)

    def first(patterns: list[re.Pattern[str]]) -> int | None:
        for i, pat in enumerate(patterns):
            if pat.search(text):
                return i
        return None

    phase = first(rx["phase"])
    prog = first(rx["progress"])
    fails = sorted({s.category for s, pat in zip(profile.failure_signatures, rx["failure"], strict=True)
                    if pat.search(text)})
    ready = any(pat.search(text) for pat in rx["ready"])
    listening = any(pat.search(text) for pat in rx["listening"])
    frame = first(rx["frame"])
    ph = profile.phase_markers[phase].phase if phase is not None else None
    if ph is None and prog is not None:
        ph = profile.progress_markers[prog].phase
    return (
        ph,
        profile.progress_markers[prog].kind if prog is not None else None,
        fails,
        ready,
        listening,
        profile.frame_markers[frame].phase if frame is not None else None,
    )


@functools.cache
def _compiled(profile: EngineProfile) -> dict[str, list[re.Pattern[str]]]:
    return {"phase": [re.compile(m.pattern) for m in profile.phase_markers],
            "progress": [re.compile(m.pattern) for m in profile.progress_markers],
            "failure": [re.compile(s.pattern) for s in profile.failure_signatures],
            "ready": [re.compile(p) for p in profile.ready_markers],
            "listening": [re.compile(p) for p in profile.listening_markers],
            "frame": [re.compile(m.pattern) for m in profile.frame_markers]}


@pytest.mark.parametrize("engine", sorted(PROFILES))
def test_index_matches_brute_force(engine: str) -> None:
    profile = get_profile(engine)
    for line in _corpus():
        text = clean_line(line)
        m = profile.classify_clean(text)
        want = _brute_force(profile, text)
        got_fail = [m.failure.category] if m.failure else []
        assert (m.phase, m.progress.kind if m.progress else None) == want[:2], (line, m, want)
        assert (not want[2]) == (not got_fail), (line, m, want)
        if got_fail:
            assert got_fail[0] in want[2]
        assert (m.ready, m.listening, m.frame_phase) == want[3:], (line, m, want)


def test_required_literal() -> None:
    assert required_literal(r"Load weight begin\. avail mem=([\d.]+) GB") == (
        ("Load weight begin. avail mem=",),
        False,
    )
    assert required_literal(r"^(?:ModuleNotFoundError|ImportError): ") == (
        ("ModuleNotFoundError", "ImportError"),
        False,
    )
    assert required_literal(r"ab|x") is None
    lits, nocase = required_literal(r"(?i)No Kernel Image") or ((), False)
    assert lits == ("no kernel image",) and nocase


# --- profile data integrity ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", sorted(PROFILES))
def test_profile_data_is_valid(engine: str) -> None:
    p = get_profile(engine)
    assert p.name == engine and p.display_name
    for m in p.phase_markers:
        assert m.phase in PHASES
        re.compile(m.pattern)
    for m in p.frame_markers:
        assert m.phase in PHASES
    for s in p.failure_signatures:
        assert s.category in FAILURE_CATEGORIES and s.hint and isinstance(s.fatal, bool)
        re.compile(s.pattern)
    for pat in (*p.ready_markers, *p.listening_markers, *p.command_patterns):
        re.compile(pat)
    assert p.role in ("server", "worker")
    if p.role == "worker":  # serves no HTTP: its readiness is its port, observed (probes/ladder.py)
        assert not p.endpoints.health and p.endpoints.models is None and p.endpoints.metrics is None
        assert not p.ready_markers and p.command_patterns and p.detect_patterns and p.default_port > 0
        return
    assert p.endpoints.health.startswith("/")
    for path in (*p.endpoints.info, *p.endpoints.lying_while_loading):
        assert path.startswith("/")
    for metric in p.spec_decoding:
        assert metric.source in (
            "server_info",
            "prometheus",
            "response_timings",
            "response_meta",
            "perf_metrics",
            "log",
            "slots",
        )
    if engine != "generic":
        assert p.ready_markers, "every real engine has a ready marker"
        assert p.command_patterns and p.detect_patterns and p.default_port > 0


def test_every_failure_category_has_a_signature() -> None:
    seen = {s.category for p in PROFILES.values() for s in p.failure_signatures}
    assert seen == set(FAILURE_CATEGORIES)
    assert set(CATEGORY_RANK) == set(FAILURE_CATEGORIES)


def test_new_engine_is_a_data_change() -> None:
    """A profile written with plain tuples works end to end (detection, classify, replay)."""
    from firstlight.engines import Endpoints, register_profile
    from firstlight.logreplay import replay_lines

    toy = EngineProfile(
        name="toy",
        display_name="Toy",
        default_port=9999,
        command_patterns=(r"(?:^|\s)toy-serve\b",),
        endpoints=Endpoints(health="/healthz", models=None),
        phase_markers=((r"^loading weights", "weights_loading"),),
        failure_signatures=((r"toy exploded", "other", "it exploded", True),),
        ready_markers=(r"^toy ready$",),
        detect_patterns=((r"^toy ", 4),),
    )
    register_profile(toy)
    try:
        assert detect_from_command(["toy-serve", "--port", "1"]) == "toy"
        assert read_command(["toy-serve", "--port", "1"]).port == 1
        assert detect_from_lines(["toy starting"]) == "toy"
        assert replay_lines(["toy starting", "loading weights", "toy ready"]).outcome == "ready"
        rep = replay_lines(["toy starting", "loading weights", "toy exploded"])
        assert (rep.outcome, rep.phase, rep.failure, rep.hint) == (
            "failed",
            "weights_loading",
            "other",
            "it exploded",
        )
    finally:
        del PROFILES["toy"]


def test_get_profile_unknown_raises_value_error_listing_names() -> None:
    with pytest.raises(ValueError) as exc:
        get_profile("nope")
    for name in ("sglang", "vllm", "llamacpp", "tgi", "trtllm", "lmdeploy", "ollama", "generic"):
        assert name in str(exc.value)


def test_listens_before_ready_flags() -> None:
    flags = {n: p.endpoints.listens_before_ready for n, p in PROFILES.items()}
    assert flags["llamacpp"] and flags["sglang"] and flags["ollama"]
    assert not flags["vllm"] and not flags["tgi"] and not flags["trtllm"]


# --- detection --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (
            ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B", "--port", "30010"],
            "sglang",
        ),
        (["sglang", "serve", "--model-path", "m"], "sglang"),
        (["/opt/vllm-env/bin/python", "-m", "sglang.launch_server", "--model-path", "m"], "sglang"),
        (["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8001"], "vllm"),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
        (["docker", "run", "--gpus", "all", "vllm/vllm-openai:latest", "--model", "m"], "vllm"),
        (["./build/bin/llama-server", "-m", "model.gguf", "--port", "8081"], "llamacpp"),
        (["llama-server.exe", "-m", "m.gguf"], "llamacpp"),
        (["text-generation-launcher", "--model-id", "m", "--port", "8080"], "tgi"),
        (["trtllm-serve", "meta-llama/Llama-3.1-8B", "--port", "8002"], "trtllm"),
        (
            ["lmdeploy", "serve", "api_server", "internlm/internlm2_5-7b-chat", "--server-port", "23334"],
            "lmdeploy",
        ),
        (["ollama", "serve"], "ollama"),
        (["bash", "-c", "exec vllm serve m --port 9000"], "vllm"),
        (["python", "my_server.py"], None),
    ],
)
def test_detect_from_command(argv: list[str], engine: str | None) -> None:
    assert detect_from_command(argv) == engine


def test_detect_from_lines() -> None:
    assert detect_from_lines(["[2025-08-11 02:20:00] server_args=ServerArgs(model_path='m')"]) == "sglang"
    assert (
        detect_from_lines(["INFO 05-12 10:11:12 [api_server.py:1043] vLLM API server version 0.8.4"])
        == "vllm"
    )
    assert detect_from_lines(["srv  log_server_r: request: GET /health 127.0.0.1 503"]) == "llamacpp"
    assert detect_from_lines(["Error: ShardCannotStart"]) == "tgi"
    assert detect_from_lines(["hello", "world"]) is None
    # SGLang 2024 logs contain vLLM-style loader lines; SGLang embeds them
    mixed = [
        "INFO 10-31 21:53:54 weight_utils.py:243] Using model weights format ['*.safetensors']",
        "[2024-10-31 21:53:50 TP0] Load weight begin. avail mem=78.59 GB",
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/model_loader/loader.py", line 1',
    ]
    assert detect_from_lines(mixed) == "sglang"
    # Ollama runs llama.cpp underneath
    ollama = (FIXTURES / "ollama-ready.log").read_text(encoding="utf-8").splitlines()
    assert detect_from_lines(ollama) == "ollama"
    assert (
        # llama.cpp's own lines read as llama.cpp (a path in Ollama's model store is Ollama's word)
        detect_from_lines([line.replace("/root/.ollama/models/blobs/", "/models/") for line in ollama
                           if "llama" in line and "source=" not in line])
        == "llamacpp"
    )


@pytest.mark.parametrize("name", ["sglang-llama31-8b-cudagraph-2024.log", "sglang-qwen25-7b-nocudagraph-2025-03.log",
                                  "sglang-eagle-llama2-specdec.log"])
def test_an_sglang_start_joined_at_its_checkpoint_bar_is_never_vllm(name: str) -> None:
    # SGLang prints vLLM's checkpoint bar word for word: a watch that joins at the bar (attached late, or the
    # start's first second dropped by the log's own timestamps) must wait for a line of SGLang's own.
    lines = (SHARED_LOGS / name).read_text("utf-8", "replace").splitlines()
    joined = lines[next(i for i, ln in enumerate(lines) if "checkpoint shards:" in ln):]
    bars = [ln for ln in joined if "checkpoint shards:" in ln]
    assert detect_from_lines(bars) is None
    assert detect_from_lines(joined) == "sglang"


def test_vllms_checkpoint_bar_after_one_of_its_own_lines_is_vllm() -> None:
    assert detect_from_lines(["INFO 05-12 10:11:12 [default_loader.py:262] Loading weights took 0.2 seconds",
                              "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.61s/it]"]
                             ) == "vllm"


def test_detect_from_lines_respects_max_lines() -> None:
    lines = ["nothing here"] * 10 + ["[2025-08-11 02:20:00] server_args=ServerArgs(model_path='m')"]
    assert detect_from_lines(lines, max_lines=5) is None
    assert detect_from_lines(lines) == "sglang"


@pytest.mark.parametrize(
    ("path", "status", "body", "engine"),
    [
        (
            "/server_info",
            200,
            '{"model_path": "m", "mem_fraction_static": 0.8, "version": "0.5.2"}',
            "sglang",
        ),
        ("/get_server_info", 200, '{"internal_states": [{"avg_spec_accept_length": 2.1}]}', "sglang"),
        ("/server_info", 200, '{"disaggregated_params": null}', "trtllm"),
        ("/model_info", 200, '{"model_path": "m", "is_generation": true}', "sglang"),
        ("/props", 200, '{"default_generation_settings": {}, "total_slots": 1}', "llamacpp"),
        (
            "/props",
            503,
            '{"error":{"message":"Loading model","type":"unavailable_error","code":503}}',
            "llamacpp",
        ),
        (
            "/health",
            503,
            '{"error":{"message":"Loading model","type":"unavailable_error","code":503}}',
            "llamacpp",
        ),
        ("/health", 503, '{"error":"unhealthy","error_type":"healthcheck"}', "tgi"),
        ("/info", 200, '{"model_id": "m", "max_total_tokens": 4096, "version": "3.0.1"}', "tgi"),
        ("/api/version", 200, '{"version": "0.6.0"}', "ollama"),
        ("/", 200, "Ollama is running", "ollama"),
        ("/version", 200, '{"version": "0.8.4"}', "vllm"),
        (
            "/v1/models",
            200,
            '{"object":"list","data":[{"id":"m","object":"model","owned_by":"lmdeploy"}]}',
            "lmdeploy",
        ),
        ("/v1/models", 200, '{"object":"list","data":[{"id":"m","owned_by":"vllm"}]}', "vllm"),
        ("/v1/models", 200, '{"object":"list","data":[{"id":"m","owned_by":"sglang"}]}', "sglang"),
        ("/v1/models", 200, '{"object":"list","data":[{"id":"m","owned_by":"llamacpp"}]}', "llamacpp"),
        ("/metrics", 200, "# HELP vllm:num_requests_running x\nvllm:num_requests_running 0\n", "vllm"),
        ("/metrics", 200, "[]", "trtllm"),
        ("/server_info", 404, '{"detail":"Not Found"}', None),
        ("/props", 200, "<html>hi</html>", None),
        ("/info", 200, '{"name": "something else"}', None),
        ("/version", 500, "boom", None),
    ],
)
def test_detect_from_endpoint(path: str, status: int, body: str, engine: str | None) -> None:
    assert detect_from_endpoint(path, status, body) == engine


def test_detection_paths_are_the_profiles_rules_in_their_weighing_order() -> None:
    # the server naming itself first, each engine's own endpoints, a bare version, metric names last
    assert detection_paths() == ["/v1/models", "/server_info", "/get_server_info", "/props", "/info", "/api/version",
                                 "/version", "/metrics"]
    for p in PROFILES.values():
        for rule in p.endpoint_rules:
            assert all(path.startswith("/") for path in rule.paths) and set(rule.asked) <= set(rule.paths)


# --- command-line port / host -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "argv", "env", "port", "host"),
    [
        ("sglang", ["python", "-m", "sglang.launch_server", "--model-path", "m"], None, 30000, "127.0.0.1"),
        ("sglang", ["sglang", "serve", "--port", "30010", "--host", "0.0.0.0"], None, 30010, "0.0.0.0"),
        ("vllm", ["vllm", "serve", "m"], None, 8000, None),
        ("vllm", ["vllm", "serve", "m", "--port=8001", "--host=127.0.0.1"], None, 8001, "127.0.0.1"),
        ("vllm", ["bash", "-c", "vllm serve m --port 9000"], None, 9000, None),
        ("llamacpp", ["llama-server", "-m", "m.gguf"], None, 8080, "127.0.0.1"),
        (
            "llamacpp",
            ["llama-server", "-m", "m.gguf", "--port", "8081", "--host", "0.0.0.0"],
            None,
            8081,
            "0.0.0.0",
        ),
        ("llamacpp", ["llama-server", "-m", "m.gguf"], {"LLAMA_ARG_PORT": "9999"}, 9999, "127.0.0.1"),
        ("tgi", ["text-generation-launcher", "--model-id", "m"], None, 3000, "0.0.0.0"),
        (
            "tgi",
            ["text-generation-launcher", "--model-id", "m", "-p", "8080", "--hostname", "::"],
            None,
            8080,
            "::",
        ),
        ("tgi", ["text-generation-launcher", "--model-id", "m"], {"PORT": "80"}, 80, "0.0.0.0"),
        ("trtllm", ["trtllm-serve", "m"], None, 8000, "localhost"),
        ("lmdeploy", ["lmdeploy", "serve", "api_server", "m"], None, 23333, "0.0.0.0"),
        (
            "lmdeploy",
            ["lmdeploy", "serve", "api_server", "m", "--server-port", "8000", "--server-name", "127.0.0.1"],
            None,
            8000,
            "127.0.0.1",
        ),
        ("ollama", ["ollama", "serve"], None, 11434, "127.0.0.1"),
        ("ollama", ["ollama", "serve"], {"OLLAMA_HOST": "0.0.0.0:8080"}, 8080, "0.0.0.0"),
        ("ollama", ["ollama", "serve"], {"OLLAMA_HOST": "http://10.0.0.5:11500"}, 11500, "10.0.0.5"),
        ("ollama", ["ollama", "serve"], {"OLLAMA_HOST": "0.0.0.0"}, 11434, "0.0.0.0"),
        ("generic", ["python", "serve.py"], None, None, None),
        ("generic", ["python", "serve.py", "--port", "7000"], None, 7000, None),
    ],
)
def test_command_port_and_host(
    engine: str, argv: list[str], env: dict[str, str] | None, port: int | None, host: str | None
) -> None:
    cmd = read_command(argv, engine=engine, env=env)
    assert (cmd.port, cmd.host) == (port, host)


def test_command_port_ignores_bad_values() -> None:
    tgi = get_profile("tgi")
    # docker's "-p 8080:80" publish mapping is not TGI's port flag value
    assert (
        read_command(["docker", "run", "-p", "8080:80", "ghcr.io/huggingface/text-generation-inference"],
                     engine=tgi.name).port
        == 3000
    )
    assert read_command(["vllm", "serve", "m", "--port", "notaport"]).port == 8000


# --- LineSplitter -----------------------------------------------------------------------------------


def test_splitter_basic_and_partial_lines() -> None:
    sp = LineSplitter()
    assert sp.feed(b"one\ntw") == ["one"]
    assert sp.feed(b"o\nthree") == ["two"]
    assert sp.flush() == ["three"]
    assert sp.flush() == []


def test_splitter_crlf_across_chunks() -> None:
    sp = LineSplitter()
    assert sp.feed(b"a\r") == []
    assert sp.feed(b"\nb\r\n") == ["a", "b"]


def test_splitter_invalid_utf8_and_split_multibyte() -> None:
    sp = LineSplitter()
    out = sp.feed(b"bad \xff\xfe bytes\n")
    assert out == ["bad \ufffd\ufffd bytes"]
    bar = "█".encode()
    assert sp.feed(b"x" + bar[:1]) == []
    assert sp.feed(bar[1:] + b"y\n") == ["x█y"]


def test_splitter_redraws() -> None:
    sp = LineSplitter()
    events = sp.feed_events(b"Loading:  10%| 1/10\rLoading:  50%| 5/10\rLoad")
    assert events == [("Loading:  10%| 1/10", False), ("Loading:  50%| 5/10", False)]
    events = sp.feed_events(b"ing: 100%| 10/10\n")
    assert events == [("Loading: 100%| 10/10", True)]
    # a bar that ends with \r then \n keeps its last drawing
    assert sp.feed(b"bar 1\rbar 2\r\n") == ["bar 2"]
    assert sp.feed(b"bar 3\r") == []
    assert sp.feed(b"\n") == ["bar 3"]
    assert split_redraws("a\rb\r\rc") == (["a", "b"], "c")


def test_splitter_strips_ansi() -> None:
    sp = LineSplitter()
    assert sp.feed(b"\x1b[32mINFO\x1b[0m ok \x1b]8;;http://x\x07link\x1b]8;;\x07\n") == ["INFO ok link"]


def test_splitter_caps_line_length() -> None:
    sp = LineSplitter(max_line_bytes=1000)
    out = sp.feed(b"x" * 5000)
    assert all(len(line) <= 1000 for line in out) and sum(map(len, out)) + len(sp.flush()[0]) == 5000


def test_redraw_progress_reaches_the_replay(tmp_path: Path) -> None:
    log = tmp_path / "bar.log"
    log.write_bytes(
        b"[2025-08-11 02:20:13 TP0] Load weight begin. avail mem=78.58 GB\n"
        b"Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]\r"
        b"Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.3it/s]\r"
    )
    rep = replay_log(log)
    assert rep.engine == "sglang" and rep.outcome == "incomplete" and rep.phase == "weights_loading"
    assert rep.progress is not None and (rep.progress["done"], rep.progress["total"]) == (2, 4)
    assert rep.lines == 2


# --- bounded memory ----------------------------------------------------------------------------------


def test_llamacpp_b11434_gguf_reader_errors_are_corrupt_weights():
    # Seen on the real llama-server b11434 (scripts/llama_server_notes.md) with a model cut after 1 MB.
    m = get_profile("llamacpp").classify("0.00.008.675 E gguf_init_from_reader: failed to read key-value pairs")
    assert m.failure is not None and m.failure.category == "corrupt_weights" and m.failure.fatal


def test_llamacpp_b11434_default_verbosity_lines():
    # The whole start of llama-server b11434 at the default verbosity (scripts/llama_server_notes.md).
    p = get_profile("llamacpp")
    assert p.classify("0.00.004.027 I srv    load_model: loading model '/m/SmolLM2.gguf'").phase == "weights_loading"
    assert p.classify("0.00.410.261 I cmn          init: llama threadpool init, n_threads = 2").phase == "warmup"
    assert p.classify("0.00.584.109 I srv  llama_server: model loaded").ready
    assert p.classify("0.00.584.225 I srv  llama_server: listening on http://127.0.0.1:18080").listening
