"""Ollama (``ollama serve``).

The daemon listens at once ("Listening on 127.0.0.1:11434 (version X)"); each model loads on first use in
a llama.cpp-based runner: "starting llama server"/"starting runner" -> "waiting for llama runner to start
responding" -> "llama runner started in N seconds" (ready). Errors: "llama runner process has terminated",
"timed out waiting for llama runner to start - progress 0.28". Wording from ``llm/server.go`` and
``server/routes.go``; newer builds say "llama-server" instead of "llama runner" in some messages.
"""

from __future__ import annotations

from firstlight.deaths import CRASH_HINT

from .common import SERVED_MARKERS
from .llamacpp import LLAMACPP_FAILURES, LLAMACPP_PHASES
from .profile import (
    WRAPPER_RANK,
    CommandFlags,
    EndpointRule,
    Endpoints,
    EngineProfile,
    FailureSignature,
    ImageEntrypoint,
    PhaseMarker,
    ProgressMarker,
    owned_by,
)

S = FailureSignature
P = PhaseMarker

OLLAMA = EngineProfile(
    name="ollama",
    display_name="Ollama",
    default_port=11434,
    default_host="127.0.0.1",
    command_patterns=(r"(?:^|[\s/\\])ollama(?:\.exe)?\s+serve\b", r"\bollama/ollama\b"),
    endpoints=Endpoints(
        health="/",
        models="/v1/models",
        metrics=None,
        info=("/api/version",),
        # the daemon answers at once; models load on the first request (/api/ps lists loaded ones)
        lying_while_loading=("/", "/api/version", "/api/tags", "/v1/models", "/api/ps"),
        listens_before_ready=True,
    ),
    endpoint_rules=(
        *owned_by("library", "ollama"),
        EndpointRule("/", body_contains="Ollama is running", ask=()),
        EndpointRule("/api/version", status=(200,), json_all=("version",)),
    ),
    images=(ImageEntrypoint(r"(?:^|/)ollama/ollama(?::|@|$)", ("ollama",), cmd=("serve",)),),
    phase_markers=(
        P(r"msg=\"?server config\"?", "process_start"),
        # no http_listening phase: the daemon listens before any model loads (a listening marker, below)
        # The runner's start ("starting llama server", "starting runner", the go runner's own "starting go runner"
        # and its system info, "waiting for llama runner to start responding") is a process starting: the load
        # begins with the model's own lines (corpus: c-ollama-docker-runner-start-loading,
        # d-ollama-runner-start-cuda-init-system-info)
        P(r"msg=\"?loading model\b|\bsource=runner\.go:\d+ msg=load request=", "weights_loading"),
        # the Go engine placing the weights (ml/backend/ggml/ggml.go): msg="model weights" buffer=CUDA0 size="16.2 GiB"
        P(r"msg=\"?model weights\"? buffer=", "weights_loading", weak=True),
        # the model file's metadata read, key by key at debug level (ggml.go: msg="key with type not found")
        P(r"\bsource=ggml\.go:\d+ msg=\"key with type not found\"", "weights_loading", weak=True),
        # a pull: the server's "download.go:122: downloading 5b2b5f73b685 in 94 256.0 MB part(s)"
        # (https://github.com/ollama/ollama/issues/1209), the CLI's "pulling manifest"
        # (https://github.com/ollama/ollama/issues/8889)
        P(r"\bdownloading [0-9a-f]{12} in \d+ [\d.]+ ?[KMGT]?B part\(s\)|^pulling manifest\b", "download"),
        *LLAMACPP_PHASES,
    ),
    progress_markers=(
        # the CLI's bar per layer: "pulling 6150cb382311... 100% ▕████████████████▏  19 GB" (the same page), newer
        # "pulling dec52a44569a: 100% ▕███▏ 6.6 GB" (https://github.com/ollama/ollama/issues/14554)
        ProgressMarker(r"^pulling [0-9a-f]{12}(?:\.\.\.|:) +(?P<pct>\d+)% ", "download", "download"),
        ProgressMarker(r"model load progress (?P<frac>[\d.]+)", "weights", "weights_loading"),
        ProgressMarker(r"offloaded (?P<done>\d+)/(?P<total>\d+) layers to GPU", "layers"),
    ),
    failure_signatures=(
        S(
            r"bind: address already in use",
            "port_in_use",
            "another ollama (or program) holds the port: stop it or set OLLAMA_HOST",
            True,
        ),
        S(
            r"model \"[^\"]+\" not found, try pulling it first|pull model manifest: file does not exist",
            "model_not_found",
            "the model is not pulled: `ollama pull <model>`",
            True,
            None,
            "weights_loading",  # said when a model is asked to load
        ),
        # the scheduler gave up a model's load (a stop's "context canceled", a runner that never came up)
        # (corpus: c-ollama-journal-load-canceled-by-stop)
        S(
            r"msg=\"?Load failed\"?",
            "other",
            "the model's load was given up: see the error= field and the lines above (a stop cancels it)",
            True,
            WRAPPER_RANK,
            "weights_loading",
        ),
        S(
            r"timed out waiting for llama runner to start",
            "other",
            "the runner stalled while loading (slow disk or too little memory): check free RAM/VRAM and disk "
            "speed; OLLAMA_LOAD_TIMEOUT raises the limit",
            True,
            15,
        ),
        S(
            r"llama runner process has terminated|llama-server process has terminated|"
            r"error loading llama server|llama runner process no longer running",
            "other",
            "the runner crashed: see the runner's lines above",
            True,
            WRAPPER_RANK,
            "weights_loading",  # a runner is started to load a model: it died loading it, or later (forward only)
        ),
        # the scheduler could not start a runner for a model (server/sched.go: "NewLlamaServer failed" error="unable to
        # load model: ..."; corpus: f-ollama-compose-unknown-arch-pangu-newllamaserver-failed)
        S(
            r"msg=\"?NewLlamaServer failed\"?",
            "other",
            "the model could not be loaded: the error= field says why (a model this build cannot read, a missing file)",
            True,
            WRAPPER_RANK,
            "weights_loading",
        ),
        # the CLI's last word as `ollama serve` exits ("Error: mkdir /home/x/ollama: permission denied"; corpus:
        # f-ollama-journalctl-reverse-mkdir-home-crashloop), and the desktop app seeing its server exit at once
        # (app.log: "server crash 9 - exit code 1 - respawning")
        S(
            r"^Error: |msg=\"?server crash \d+ - exit code \d+ - respawning",
            "other",
            "ollama serve exited at start: the error says why (a directory it cannot create or read, a port, a "
            "setting)",
            True,
            15,
        ),
        # 2023's runner: an external llama.cpp server it could not start, so no model began to load (corpus:
        # e-ollama-compose-2023-fork-exec-llama-server-missing: "error starting llama.cpp server: error starting the
        # external llama.cpp server: fork/exec /tmp/llama-2755348604/server: no such file or directory")
        S(
            r"error starting (?:the external )?llama\.cpp server",
            "other",
            "the runner could not be started: see the error after it (a missing or unrunnable runner binary)",
            True,
            WRAPPER_RANK,
        ),
        # the runner died of a native crash: Go exits 2 on an unrecovered panic, a signal kills it; its panic line
        # or oneAPI's abort banner (corpus: c-ollama-exit-status-2-vram-not-recovered,
        # c-ollama-intel-gpu-abort-docker-desktop)
        S(
            # a signal but SIGTERM/SIGINT (a stop asked of it, left to the runner's other deaths, above)
            # or an abort: Windows' fail-fast status (0xc0000409), ggml's failed assert (corpus: f-ollama-msty-json-
            # wrapped-ggml-assert-runner-died)
            r"llama runner process has terminated: (?:exit status (?:2|0xc0000409)\b|"
            r"signal: (?!terminated\b|interrupt\b)|GGML_ASSERT\()",
            "crashed",
            CRASH_HINT,
            True,
            None,
            "weights_loading",  # as the runner's other deaths (above)
        ),
        # the 2024 runner's own JSON log (llama.cpp's server, run by Ollama) giving the model up: the runner exits
        # (corpus: g-ollama-win-64k-ctx-compute-buffer-cudamalloc-oom)
        S(
            r"\"msg\":\"unable to load model\"",
            "other",
            "the runner could not load the model: see its lines above",
            True,
            WRAPPER_RANK,
            "weights_loading",
        ),
        # the 2023 daemon's word on its runner's death by a signal ("llama.go:451: signal: illegal instruction")
        S(r"(?:^|\.go:\d+: )signal: (?:illegal instruction|segmentation fault|aborted|bus error)", "crashed",
          CRASH_HINT, True),
        S(
            r"^panic: |^Abort was called at \d+ line in file:|"
            r"^SIG(?:ABRT|SEGV|BUS|ILL|FPE|TRAP): [a-z ]+$|^rflags +0x[0-9a-f]+$",  # a Go fatal-signal dump
            "crashed",
            CRASH_HINT,
            True,
        ),
        *(s._replace(fatal=False) for s in LLAMACPP_FAILURES),
    ),
    ready_markers=(r"llama runner started in [\d.]+ seconds", r"llama-server started in [\d.]+ seconds",
                   *SERVED_MARKERS),
    # the daemon's (since 0.1.3x: msg="Listening on ... (version X)"; before: "routes.go:572: Listening on ...")
    # (a pager may cut the line after the address: "msg=\"Listening on 127.0.0.>"; corpus:
    # c-ollama-journal-zh-locale-truncated-listening)
    listening_markers=(r"\bsource=routes\.go:\d+ msg=\"Listening on \S", r"msg=\"Listening on \S+ \(version \S+\)\"",
                       r"\broutes\.go:\d+: (?:INFO )?Listening on \S+"),
    flags=CommandFlags(model=(), tp=(), pp=(), dp=(), nnodes=(), quantization=()),
    port_flags=(),
    host_flags=(),
    port_env=("OLLAMA_HOST",),
    host_env=("OLLAMA_HOST",),
    detect_patterns=(
        (r"\bsource=\w+\.go:\d+\b", 5),
        (r"^\[GIN\] \d{4}/\d\d/\d\d", 5),
        (r"msg=\"Listening on \S+ \(version", 5),
        (r"llama runner (?:started|process)|waiting for llama runner", 5),
        (r"OLLAMA_\w+", 2),
        # the 2023 builds' log format: "2023/10/06 13:38:58 routes.go:572: Listening on 127.0.0.1:11434"
        (r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (?:images|routes|server|download|llama|gpu|sched)\.go:\d+: ", 4),
        (r"\bsource=runner\.go:\d+ msg=\"starting go runner\"", 5),
        # its Go stack traces' frames (corpus: c-ollama-journal-deepseek-cudamalloc-panic)
        (r"\bgithub\.com/ollama/ollama/", 5),
        # the CLI's pull error (a startup probe's `ollama pull`; corpus: c-ollama-kubeai-probe-pull-manifest-missing)
        (r"^Error: pull model manifest: ", 4),
        # systemd starting the unit its installer writes (corpus: f-ollama-journalctl-host-redacted-key-dir-permission-
        # restart)
        (r"^Started (?:ollama\.service - )?Ollama Service\.$", 4),
        # its model store's blobs, named in its errors (corpus: c-ollama-journal-deepseek-cudamalloc-panic)
        (r"/\.ollama/models/blobs/sha256-[0-9a-f]", 4),
        # ... wherever OLLAMA_MODELS puts it: its blobs' names ("D:\\Ollama_Models\\blobs\\sha256-ac9bc7a6...")
        (r"[/\\]blobs[/\\]sha256-[0-9a-f]{64}\b", 4),
        # its first start making its key (corpus: g-ollama-serve-keygen-port-11434-in-use)
        (r"^Couldn't find '[^']*\.ollama[/\\]id_ed25519'\. Generating new private key\.", 4),
    ),
    # the daemon listens at once and loads each model on its first request: these say one was asked for (the
    # runner's start, 2023's "llama.go:415: starting llama runner" included)
    on_demand=(r"\bstarting (?:llama server|llama runner|runner|llama-server)\b", r"msg=\"?loading model\b",
               r"\bwaiting for (?:llama runner|llama-server|server) to (?:start responding|become available)",
               r"\bsource=runner\.go:\d+ msg=load request="),
    embeds=("llamacpp",),
    notes="Daemon up at once; per-model readiness is 'llama runner started' or /api/ps.",
)
