"""llama.cpp's RPC server (``ggml-rpc-server``, ``rpc-server`` before b5xxx): a worker of a multi-node start.

A leader ``llama-server --rpc HOST:PORT,...`` offloads layers to each RPC server over TCP. The worker serves no
HTTP and generates nothing itself, so it is ready when its process listens on its port; firstlight observes the
listening socket in ``/proc`` and never connects: the server serves one client at a time with a listen backlog of
one (``ggml/src/ggml-rpc/transport.cpp``), so a probe's connection would queue behind the leader's, and enough of
them would refuse the leader's own.

Wording from ``ggml/src/ggml-rpc/ggml-rpc.cpp`` (``ggml_backend_rpc_start_server``) and
``tools/rpc/rpc-server.cpp`` (b11434). It prints its banner on stdout without flushing: through a pipe the
banner arrives with the first client's "Accepted client connection", so no readiness depends on a line.
"""

from __future__ import annotations

from .profile import CommandFlags, Endpoints, EngineProfile, FailureSignature, PhaseMarker

S = FailureSignature

RPC_DEFAULT_PORT = 50052  # tools/rpc/rpc-server.cpp: rpc_server_params.port

LLAMA_RPC = EngineProfile(
    name="llamarpc",
    display_name="llama.cpp RPC server (worker)",
    checked_versions=("b11434",),  # ggml-rpc-server, built beside llama-server
    default_port=RPC_DEFAULT_PORT,
    default_host="127.0.0.1",
    command_patterns=(r"(?:^|[\s/\\])(?:ggml-)?rpc-server(?:\.exe)?(?:\s|$)",),
    # no HTTP at all: the readiness ladder of a worker observes its listening socket instead
    endpoints=Endpoints(health="", models=None, completions="", chat="", metrics=None),
    role="worker",
    phase_markers=(
        PhaseMarker(r"^Starting RPC server v\d+\.\d+\.\d+", "distributed_init"),
        PhaseMarker(r"^Accepted client connection$", "weights_loading", weak=True),
    ),
    failure_signatures=(
        S(r"^Failed to create server socket$", "port_in_use",
          "the RPC server could not bind its -H/-p address: another process holds the port, or the host is not "
          "an address of this machine", True),
        S(r"^No devices found$|^Failed to create backend for device |^error: unknown device: ",
          "bad_argument", "the RPC server found no usable device: check -d/--device and the build's backends",
          True),
        S(r"^error: unknown argument: |^error: invalid (?:number of threads|device)|^Invalid parameters$",
          "bad_argument", "the RPC server refused its command line (see `ggml-rpc-server --help`)", True),
        S(r"^Failed to initialize RPC transport$|^Failed to accept client connection$", "crashed",
          "the RPC server's transport failed", True),
        S(r"^RPC server version mismatch|^HELLO request size mismatch|^Expected HELLO command",
          "bad_argument", "the leader's llama.cpp and this RPC server speak different protocol versions: build "
          "both from the same release", False),
    ),
    flags=CommandFlags(model=(), tp=(), pp=(), dp=(), nnodes=(), quantization=(), rpc=()),
    port_flags=("-p", "--port"),
    host_flags=("-H", "--host"),
    detect_patterns=(
        (r"^Starting RPC server v\d+\.\d+\.\d+$", 4),
        (r"^  endpoint {7}: \S+:\d+$", 2),
        (r"^  transport {6}: TCP", 2),
    ),
    notes="A worker: no HTTP; ready when it listens on -p (observed, never connected to: one client at a time).",
)
