"""Framing is read, then peeled (firstlight.framing, wired into firstlight.logtext.LineSplitter): every shared real log
replayed in every framing that carries logs in production gives the engine, outcome, phase and failure of its plain
form; each framing's own fields (time, stream, partial records, journal export records) are read right; unknown
framings fall through; the work per line stays linear.

The framed variants are written here from the plain files, as each channel writes them (the same lines, nothing
else changed); ../shared/logs is only read.
"""

from __future__ import annotations

import calendar
import json
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from firstlight import framing
from firstlight.framing import Deframer, peel
from firstlight.logreplay import replay_lines, replay_log
from firstlight.logtext import LineSplitter, read_lines
from firstlight.timestamps import TimestampParser

LOGS = Path(__file__).resolve().parents[2].parent / "shared" / "logs"
UNSEEN = Path(__file__).resolve().parents[1] / "fixtures" / "unseen"  # excerpts of public bug reports
SHARED = sorted(LOGS.glob("*.log"))
ALL = SHARED + sorted(UNSEEN.glob("*.log"))
T0 = calendar.timegm((2025, 5, 7, 2, 13, 52, 0, 0, 0))
SPLIT_AT = 120  # lines longer than this are written as partial records where the framing has them

# --- writers: one plain line (bytes, no newline; \r redraws inside) and its time -> the framed bytes ---------


def _rfc3339(t: float, digits: int = 9, z: str = "Z") -> str:
    whole = int(t)
    frac = f"{t - whole:.9f}"[2:2 + digits]
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + (f".{frac}" if digits else "") + z


def _rfc3339_nano(t: float) -> str:
    """Go's RFC3339Nano (what containerd and CRI-O write): trailing zeros of the fraction trimmed."""
    whole = int(t)
    frac = f"{t - whole:.9f}"[2:].rstrip("0")
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + (f".{frac}" if frac else "") + "Z"


def _chunks(line: bytes) -> list[bytes]:
    return [line[i:i + SPLIT_AT] for i in range(0, len(line), SPLIT_AT)] or [b""]


def compose(line: bytes, t: float) -> bytes:
    return b"vllm-1  | " + line + b"\n"


def compose_v1(line: bytes, t: float) -> bytes:
    return b"server_1    | " + line + b"\n"


def compose_timestamps(line: bytes, t: float) -> bytes:
    return b"engine-1  | " + _rfc3339(t).encode() + b" " + line + b"\n"


def docker_json(line: bytes, t: float) -> bytes:
    parts = _chunks(line)  # the json-file driver splits long lines; only the last record keeps the newline
    out = b""
    for i, part in enumerate(parts):
        text = part.decode("utf-8", "replace") + ("\n" if i == len(parts) - 1 else "")
        out += json.dumps({"log": text, "stream": "stderr", "time": _rfc3339_nano(t)}).encode() + b"\n"
    return out


def cri(line: bytes, t: float) -> bytes:
    parts = _chunks(line)
    return b"".join(_rfc3339_nano(t).encode() + b" stderr " + (b"F " if i == len(parts) - 1 else b"P ") + part
                    + b"\n" for i, part in enumerate(parts))


def podman_k8s_file(line: bytes, t: float) -> bytes:
    ts = _rfc3339(t, 9, "+00:00").encode()
    parts = _chunks(line)
    return b"".join(ts + b" stdout " + (b"F " if i == len(parts) - 1 else b"P ") + part + b"\n"
                    for i, part in enumerate(parts))


def kubectl_prefix(line: bytes, t: float) -> bytes:
    return b"[pod/vllm-7d9f8c6b5-x2k4q/vllm] " + line + b"\n"


def kubectl_timestamps(line: bytes, t: float) -> bytes:
    return _rfc3339(t).encode() + b" " + line + b"\n"


def kubectl_prefix_timestamps(line: bytes, t: float) -> bytes:
    return b"[pod/sglang-0/server] " + _rfc3339(t).encode() + b" " + line + b"\n"


def _short_time(t: float) -> str:
    return time.strftime("%b %d %H:%M:%S", time.gmtime(t))


def journal_short(line: bytes, t: float) -> bytes:
    return f"{_short_time(t)} gpu-node-3 python3[4127]: ".encode() + line + b"\n"


def journal_short_precise(line: bytes, t: float) -> bytes:
    return f"{_short_time(t)}.{int(t * 1e6) % 1000000:06d} gpu-node-3 vllm[4127]: ".encode() + line + b"\n"


def journal_short_iso(line: bytes, t: float) -> bytes:
    return time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(t)).encode() + b" gpu-node-3 llama-server[77]: " \
        + line + b"\n"


def _printable(raw: bytes) -> bool:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(ord(c) < 0x20 and c != "\t" for c in text)


def journal_json(line: bytes, t: float) -> bytes:
    # journalctl -o json: a value that is not printable UTF-8 (a \r redraw, an escape) is an array of byte numbers
    message: object = line.decode("utf-8") if _printable(line) else list(line)
    return json.dumps({"__CURSOR": "s=abc;i=1", "__REALTIME_TIMESTAMP": str(int(t * 1e6)), "_PID": "4127",
                       "MESSAGE": message, "_SYSTEMD_UNIT": "vllm.service"}).encode() + b"\n"


def journal_export(line: bytes, t: float) -> bytes:
    # journalctl -o export: a value that is not printable is its name, its size (64-bit LE) and its bytes
    message = b"MESSAGE=" + line + b"\n" if _printable(line) else b"MESSAGE\n" + struct.pack("<Q", len(line)) \
        + line + b"\n"
    return (b"__CURSOR=s=abc;i=1\n__REALTIME_TIMESTAMP=" + str(int(t * 1e6)).encode() + b"\n"
            b"__MONOTONIC_TIMESTAMP=123\n_BOOT_ID=6e3a5a0f2c4e4d4b9b1d3c2a1f0e9d8c\n_PID=4127\n" + message
            + b"_SYSTEMD_UNIT=vllm.service\n\n")


def syslog_3164(line: bytes, t: float) -> bytes:
    stamp = time.strftime("%b ", time.gmtime(t)) + f"{time.gmtime(t).tm_mday:2d}" \
        + time.strftime(" %H:%M:%S", time.gmtime(t))
    return f"<14>{stamp} gpu-node-3 sglang[4127]: ".encode() + line + b"\n"


def syslog_5424(line: bytes, t: float) -> bytes:
    return f"<14>1 {_rfc3339(t, 6)} gpu-node-3 sglang 4127 - - ".encode() + line + b"\n"


def syslog_5424_sd(line: bytes, t: float) -> bytes:
    return f'<11>1 {_rfc3339(t, 3)} gpu-node-3 vllm 4127 ID47 [k8s@32473 pod="vllm-0" ns="ml\\]x"] '.encode() \
        + line + b"\n"


def fluent_bit(line: bytes, t: float) -> bytes:
    parts = _chunks(line)  # fluent-bit's CRI parser: the CRI tag kept as logtag
    return b"".join(json.dumps({"time": _rfc3339_nano(t), "stream": "stdout",
                                "logtag": "F" if i == len(parts) - 1 else "P",
                                "log": part.decode("utf-8", "replace"),
                                "kubernetes": {"pod_name": "vllm-0"}}).encode() + b"\n"
                    for i, part in enumerate(parts))


def vector(line: bytes, t: float) -> bytes:
    return json.dumps({"message": line.decode("utf-8", "replace"), "timestamp": _rfc3339(t, 6),
                       "source_type": "kubernetes_logs"}).encode() + b"\n"


def promtail(line: bytes, t: float) -> bytes:
    return json.dumps({"line": line.decode("utf-8", "replace"), "ts": int(t * 1e9)}).encode() + b"\n"


WRITERS: dict[str, Callable[[bytes, float], bytes]] = {
    f.__name__: f for f in (compose, compose_v1, compose_timestamps, docker_json, cri, podman_k8s_file,
                            kubectl_prefix, kubectl_timestamps, kubectl_prefix_timestamps, journal_short,
                            journal_short_precise, journal_short_iso, journal_json, journal_export, syslog_3164,
                            syslog_5424, syslog_5424_sd, fluent_bit, vector, promtail)
}


def framed(plain: bytes, writer: Callable[[bytes, float], bytes]) -> bytes:
    """The plain log as ``writer``'s channel writes it. The runtime's clock is the engine's where its lines carry
    a date (a runtime stamps a line when it is written: the same moment; the undated lines of a traceback follow
    at once), else 50 ms a line from T0."""
    lines = plain.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    parser = TimestampParser()
    t, out, dated = T0, [], False
    for line in lines:
        own = parser.parse(line[:512].decode("utf-8", "replace"))
        if own is not None and own > 10 * 86400:
            t, dated = own + 0.0005, True
        else:  # a traceback is written at once; a log without dates gets its own pace
            t += 0.0001 if dated else 0.05
        out.append(writer(line, t))
    return b"".join(out)


def _key(rep: object) -> tuple[str, str, str, str]:
    return (rep.engine, rep.outcome, rep.phase, rep.failure)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def plain_results() -> dict[str, tuple[str, str, str, str]]:
    return {p.name: _key(replay_log(p)) for p in ALL}


def test_the_shared_logs_are_here() -> None:
    assert len(SHARED) >= 30


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_every_shared_log_in_this_framing_replays_as_its_plain_form(
        name: str, tmp_path: Path, plain_results: dict[str, tuple[str, str, str, str]]) -> None:
    writer = WRITERS[name]
    wrong = []
    for p in ALL:
        out = tmp_path / p.name
        out.write_bytes(framed(p.read_bytes(), writer))
        rep = replay_log(out)
        if _key(rep) != plain_results[p.name]:
            wrong.append(f"{p.name}: {_key(rep)} != plain {plain_results[p.name]}")
        for ev in rep.evidence:  # evidence quotes the engine's line, not the framing
            assert ev["text"] and not ev["text"].startswith(("{", "[pod/", "vllm-1  |", "<1")), ev
    assert not wrong, "\n".join(wrong)


def test_a_framing_peeled_changes_the_result_of_at_least_one_log(tmp_path: Path,
                                                                 plain_results: dict[str, object]) -> None:
    """The comparison above can fail: with the framing left on, several real logs read differently."""
    import firstlight.logtext as logtext

    differ = 0
    orig = logtext.framing.Deframer.line
    try:
        logtext.framing.Deframer.line = lambda self, raw: [framing.Framed(raw)]  # type: ignore[method-assign]
        for p in SHARED:
            out = tmp_path / p.name
            out.write_bytes(framed(p.read_bytes(), cri))
            differ += _key(replay_log(out)) != plain_results[p.name]
    finally:
        logtext.framing.Deframer.line = orig  # type: ignore[method-assign]
    assert differ >= 5


def test_timestamps_capture_gives_the_replay_its_clock(tmp_path: Path) -> None:
    """llama.cpp prints no time: under `kubectl logs --timestamps` the phases are dated by the framing."""
    plain = (LOGS / "llamacpp-ready-serving.log").read_bytes()
    out = tmp_path / "k.log"
    out.write_bytes(framed(plain, kubectl_timestamps))
    rep = replay_log(out)
    stamps = [ph["timestamp"] for ph in rep.phases]
    assert stamps and all(s is not None and s >= T0 for s in stamps), rep.phases
    assert stamps == sorted(stamps)
    assert rep.anatomy is not None
    plain_rep = replay_log(LOGS / "llamacpp-ready-serving.log")
    assert all(ph["timestamp"] is None or ph["timestamp"] < T0 for ph in plain_rep.phases)


def test_an_engine_clock_is_kept_under_a_framing_clock(tmp_path: Path) -> None:
    """A vLLM log (its own times) under CRI: the times are the engine's, as in the plain form."""
    p = LOGS / "vllm-enginecore-failed-after-torch-compile.log"
    out = tmp_path / "v.log"
    out.write_bytes(framed(p.read_bytes(), cri))
    assert [ph["timestamp"] for ph in replay_log(out).phases] == [ph["timestamp"] for ph in replay_log(p).phases]


def test_mixed_framings_in_one_file(tmp_path: Path, plain_results: dict[str, object]) -> None:
    """Each line's framing is recognised on its own."""
    p = LOGS / "sglang-nccl-unhandled-system-error.log"
    writers = list(WRITERS.values())
    lines = [ln for ln in p.read_bytes().split(b"\n") if ln]
    out = tmp_path / "mixed.log"
    out.write_bytes(b"".join(writers[i % len(writers)](ln, T0 + i) for i, ln in enumerate(lines)))
    assert _key(replay_log(out)) == plain_results[p.name]


def test_compose_ollama_cuda_oom() -> None:
    """An Ollama log from `docker compose logs`, `ollama  | ` on every line, with the runner's cudaMalloc OOM."""
    log = [
        'time=2025-01-20T10:11:12.000Z level=INFO source=images.go:757 msg="total blobs: 5"',
        'time=2025-01-20T10:11:12.001Z level=INFO source=routes.go:1310 msg="Listening on [::]:11434 (version 0.5.7)"',
        'time=2025-01-20T10:11:13.100Z level=INFO source=server.go:376 msg="starting llama server" '
        'cmd="/usr/bin/ollama runner --model /root/.ollama/models/blobs/sha256-6a0746a1 --ctx-size 8192 '
        '--n-gpu-layers 33 --port 40211"',
        'time=2025-01-20T10:11:13.101Z level=INFO source=sched.go:449 msg="loaded runners" count=1',
        'time=2025-01-20T10:11:13.102Z level=INFO source=server.go:555 msg="waiting for llama runner to start '
        'responding"',
        'time=2025-01-20T10:11:13.200Z level=INFO source=runner.go:936 msg="starting go runner"',
        "llama_model_loader: loaded meta data with 29 key-value pairs and 292 tensors from /root/.ollama/models/blobs/"
        "sha256-6a0746a1 (version GGUF V3 (latest))",
        "llm_load_tensors: offloading 32 repeating layers to GPU",
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of "
        "memory",
        "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
        "llama_load_model_from_file: failed to load model",
        'time=2025-01-20T10:11:15.300Z level=ERROR source=sched.go:455 msg="error loading llama server" '
        'error="llama runner process has terminated: error loading model: unable to allocate CUDA0 buffer"',
    ]
    plain = replay_lines(log)
    composed = replay_lines([f"ollama  | {line}" for line in log])
    assert _key(composed) == _key(plain)
    assert composed.engine == "ollama"
    assert composed.outcome == "failed"
    assert composed.failure == "oom"
    assert any("cudaMalloc failed" in ev["text"] for ev in composed.evidence)


# --- the framings' own fields ---------------------------------------------------------------------------------


def test_peel_reads_each_framing() -> None:
    f = peel("2025-05-07T02:13:52.123456789Z stderr P half a li")
    assert (f.text, f.stream, f.partial, f.framing) == ("half a li", "stderr", True, framing.CRI)
    assert f.ts == pytest.approx(T0 + 0.123456789)
    f = peel('{"log":"Loading weights\\n","stream":"stdout","time":"2025-05-07T02:13:52.5Z"}')
    assert (f.text, f.stream, f.partial, f.framing, f.ts) == ("Loading weights", "stdout", False,
                                                              framing.DOCKER_JSON, T0 + 0.5)
    assert peel('{"log":"no newline","stream":"stdout","time":"2025-05-07T02:13:52Z"}').partial
    f = peel("2025-05-07T04:13:52.000000000+02:00 stdout F x")
    assert f.ts == T0 and f.framing == framing.CRI
    assert peel("[pod/vllm-0/vllm] INFO ready").text == "INFO ready"
    f = peel("vllm-1  | 2025-05-07T02:13:52.000000000Z INFO 05-07 02:13:52 [core.py:1] x")
    assert (f.framing, f.ts, f.text) == (framing.COMPOSE, T0, "INFO 05-07 02:13:52 [core.py:1] x")
    f = peel('<11>1 2025-05-07T02:13:52Z host vllm 1 - [a@1 b="c\\]"] boom')
    assert (f.framing, f.text, f.stream, f.ts) == (framing.SYSLOG_5424, "boom", "stderr", T0)
    f = peel('{"__REALTIME_TIMESTAMP":"1746584032000000","MESSAGE":[27,91,51,49,109,69,114,114]}')
    assert (f.framing, f.ts, f.text) == (framing.JOURNAL_JSON, T0, "\x1b[31mErr")
    assert peel('{"line":"x","ts":1746584032000000000}').ts == T0
    assert peel("May  7 02:13:52.250 node-1 ollama[9]: msg").framing == framing.JOURNAL_SHORT_PRECISE
    # a host name has no path in it: a timestamped Python warning is not a journal line
    f = peel("2025-05-07T02:13:52+00:00 /opt/sglang/launch_server.py:51: UserWarning: deprecated")
    assert f.text == "/opt/sglang/launch_server.py:51: UserWarning: deprecated"


@pytest.mark.parametrize("line", [
    "2024-09-24T10:42:09.437329Z  INFO text_generation_launcher: Args {",  # TGI's own tracing line
    "2024-09-24T10:42:09.437329Z ERROR text_generation_launcher: Shard 0 failed to start",
    "[2024-05-07 02:13:52 TP0] Load weight begin.",
    "INFO 05-07 02:13:52 [core.py:396] EngineCore failed to start.",
    'INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK',
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.2s/it]",
    '{"timestamp":"2024-09-24T10:42:09Z","level":"INFO","fields":{"message":"Args"}}',  # TGI --json-output
    "[pod/UPPER/x] not a pod name",
    "{not json",
    "ERROR  | not a compose service",
])
def test_unknown_framings_fall_through_unchanged(line: str) -> None:
    f = peel(line)
    assert (f.text, f.framing, f.ts) == (line, None, None)


def test_no_plain_shared_log_line_is_taken_for_a_framing() -> None:
    for p in SHARED:
        for line in p.read_text("utf-8", "replace").splitlines():
            assert peel(line).framing is None, (p.name, line)


def test_partial_records_are_joined_per_stream() -> None:
    d = Deframer()
    assert d.line("2025-05-07T02:13:52Z stdout P Loading sha") == []
    assert d.line("2025-05-07T02:13:53Z stderr F an stderr line") == [
        framing.Framed("an stderr line", T0 + 1, "stderr", False, framing.CRI)]
    assert d.line("2025-05-07T02:13:54Z stdout P rds: ") == []
    out = d.line("2025-05-07T02:13:55Z stdout F 50%")
    assert out == [framing.Framed("Loading shards: 50%", T0, "stdout", False, framing.CRI, 3)]
    assert d.line("2025-05-07T02:13:56Z stdout P never ended") == []
    assert [f.text for f in d.flush()] == ["never ended"]


def test_a_partial_record_never_completed_stays_bounded() -> None:
    d = Deframer()
    out: list[framing.Framed] = []
    piece = "x" * 16384
    for _ in range(200):
        out += d.line(f"2025-05-07T02:13:52Z stdout P {piece}")
    assert out and all(len(f.text) <= framing.MAX_JOIN_CHARS + len(piece) for f in out)


def test_line_numbers_stay_the_files(tmp_path: Path) -> None:
    """A line joined from partial records is numbered where it begins; the next line keeps its file number."""
    p = tmp_path / "cri.log"
    p.write_bytes(b"2025-05-07T02:13:52Z stdout P a\n2025-05-07T02:13:52Z stdout P b\n"
                  b"2025-05-07T02:13:52Z stdout F c\n2025-05-07T02:13:53Z stdout F d\n")
    events = list(read_lines(p))
    assert [(e.text, e.lines) for e in events] == [("abc", 3), ("d", 1)]
    rep = replay_log(p)
    assert rep.lines == 4


def test_journal_export_binary_message_with_redraws() -> None:
    """An export record's binary MESSAGE (a progress bar's \\r, an escape, a newline) is read as sized bytes."""
    msg = b"\x1b[32mLoading: 10%\rLoading: 100%\x1b[0m\nsecond line"
    data = (b"__CURSOR=c\n__REALTIME_TIMESTAMP=1746584032000000\nMESSAGE\n" + struct.pack("<Q", len(msg)) + msg
            + b"\n_PID=1\n\n__CURSOR=d\n__REALTIME_TIMESTAMP=1746584033000000\nMESSAGE=plain\n\n")
    for cut in (1, 7, 30, len(data)):  # fed in pieces: the sized value may arrive split anywhere
        sp = LineSplitter()
        events = []
        for i in range(0, len(data), cut):
            events += sp.feed_lines(data[i:i + cut])
        events += sp.flush_lines()
        assert [(e.text, e.final, e.ts) for e in events] == [
            ("Loading: 10%", False, T0), ("Loading: 100%", True, T0), ("second line", True, T0),
            ("plain", True, T0 + 1)], cut


def test_docker_json_progress_bar_redraws_are_split() -> None:
    sp = LineSplitter()
    rec = json.dumps({"log": "Loading:  10%\rLoading:  50%\rLoading: 100%\n", "stream": "stderr",
                      "time": "2025-05-07T02:13:52Z"}).encode() + b"\n"
    assert [(e.text, e.final) for e in sp.feed_lines(rec)] == [
        ("Loading:  10%", False), ("Loading:  50%", False), ("Loading: 100%", True)]


def test_cri_progress_bar_redraws_keep_the_lines_framing() -> None:
    """A CRI line's \\r redraws are seen as they come (live progress); the framing is read from the line's head."""
    sp = LineSplitter()
    first = sp.feed_lines(b"2025-05-07T02:13:52Z stderr F Capturing:  10%\rCapturing:  50%\rCaptur")
    assert [(e.text, e.final, e.ts) for e in first] == [("Capturing:  10%", False, T0),
                                                        ("Capturing:  50%", False, T0)]
    rest = sp.feed_lines(b"ing: 100%\n")
    assert [(e.text, e.final, e.ts, e.framing) for e in rest] == [("Capturing: 100%", True, T0, framing.CRI)]


def test_peel_is_linear_on_hostile_lines() -> None:
    """Long lines built to make a backtracking pattern slow are peeled fast (bounded prefix, linear patterns)."""
    hostile = [
        "2025-05-07T02:13:52Z " + "stdout " * 200_000,
        "<13>1 " + "- " * 300_000,
        "<13>1 2025-05-07T02:13:52Z h a p m " + "[" * 300_000,
        "a" * 500_000 + " | x",
        "[pod/" + "a" * 500_000,
        "May  7 02:13:52 " + "h" * 500_000,
        "{" + '"log":' * 200_000,
        "[" * 1_000_000,
        "{" * 100_000 + "}" * 100_000,
    ]
    start = time.process_time()
    for line in hostile:
        peel(line)
    assert time.process_time() - start < 2.0


def test_a_followed_cri_file_gives_the_peeled_lines_live(tmp_path: Path) -> None:
    """`watch --log` on a CRI file (what a node-level sidecar follows): the lines reach the judge peeled, a
    partial record joined, numbered as the file's lines, and the file's growth is followed."""
    import threading

    from firstlight.samplers.logs import FileFollower
    from firstlight.timeline import LogLine
    from tests.support.common import wait_for
    path = tmp_path / "0.log"
    path.write_bytes(b"")
    got: list[LogLine] = []
    lock = threading.Lock()

    def sink(obs: object) -> None:
        if isinstance(obs, LogLine) and obs.final:
            with lock:
                got.append(obs)

    follower = FileFollower(path, interval=0.05, from_start=True)
    follower.start(sink)
    try:
        with path.open("ab") as fh:
            fh.write(b"2025-05-07T02:13:52.1Z stderr F INFO 05-07 02:13:52 [core.py:1] Waiting for init message\n"
                     b"2025-05-07T02:13:52.2Z stderr P Loading safetensors checkpoint sh")
            fh.flush()
            wait_for(lambda: len(got) >= 1, 30, "the first line")
            fh.write(b"\n2025-05-07T02:13:52.3Z stderr F ards:  50% Completed | 1/2\n")
        wait_for(lambda: len(got) >= 2, 30, "the joined line")
    finally:
        follower.stop()
        follower.thread.join(10)
    with lock:
        assert [(ln.text, ln.lineno) for ln in got] == [
            ("INFO 05-07 02:13:52 [core.py:1] Waiting for init message", 1),
            ("Loading safetensors checkpoint shards:  50% Completed | 1/2", 2)]


def test_a_followed_files_run_starts_where_its_framing_dates_it(tmp_path: Path) -> None:
    """`watch --log` attaching late to a CRI file of llama.cpp (which prints no dates): this run's first line is
    found by the runtime's time, so an earlier run's crash in the same file is not this run's."""
    from firstlight.samplers.logs import run_start_offset

    earlier = cri(b"llama_model_load: error loading model: unable to allocate CUDA0 buffer", T0)
    this_run = cri(b"main: loading model", T0 + 600) + cri(b"srv  load_model: loading model", T0 + 601)
    path = tmp_path / "0.log"
    path.write_bytes(earlier + this_run)
    with path.open("rb") as fh:
        assert run_start_offset(fh, path.stat().st_size, since=T0 + 599, now=T0 + 700) == len(earlier)


# --- each record framing's fields, exactly ---------------------------------------------------------------

def _docker(log: str, pad: int = 0) -> str:
    return '{"log":"' + log + '","stream":"stdout","time":"2025-05-07T02:13:52Z"' + " " * pad + "}"


def test_a_json_record_up_to_its_bound_is_parsed_and_a_longer_one_left_as_it_is() -> None:
    base = _docker("x\\n")
    at_bound = _docker("x\\n", framing.MAX_JSON_CHARS - len(base))
    assert len(at_bound) == framing.MAX_JSON_CHARS
    assert peel(at_bound) == framing.Framed("x", T0, "stdout", False, framing.DOCKER_JSON)
    over = _docker("x\\n", framing.MAX_JSON_CHARS - len(base) + 1)
    assert peel(over) == framing.Framed(over)


def test_a_json_record_with_trailing_blanks_is_still_a_record() -> None:
    assert peel(_docker("x\\n") + "  \t").framing == framing.DOCKER_JSON


def test_a_journal_json_record_needs_both_its_message_and_its_time() -> None:
    f = peel('{"__REALTIME_TIMESTAMP":"1746584032000000","log":"x"}')  # a shipper's record that kept the field
    assert f == framing.Framed("x", None, None, False, framing.SHIPPER_JSON)
    assert peel('{"__REALTIME_TIMESTAMP":"1746584032000000","MESSAGE":"hi","_PID":"7"}') == framing.Framed(
        "hi", T0, None, False, framing.JOURNAL_JSON)
    assert peel('{"__REALTIME_TIMESTAMP":"1746584032000000","MESSAGE":null}') == framing.Framed(
        "", T0, None, False, framing.JOURNAL_JSON)  # a MESSAGE journald could not store as text


@pytest.mark.parametrize(("raw", "ts"), [
    ("1746584032000000", T0),
    ("1" * 19, int("1" * 19) / 1e6),  # the longest time read
    ("1" * 20, None),  # longer: no time, rather than one 3,000 centuries away
    ("17465840320000x0", None),
    ("", None),
])
def test_a_journal_records_time_is_its_microseconds(raw: str, ts: float | None) -> None:
    assert peel('{"__REALTIME_TIMESTAMP":"' + raw + '","MESSAGE":"m"}').ts == ts
    d = Deframer()
    got = d.line("__REALTIME_TIMESTAMP=" + raw) + d.line("MESSAGE=m") + d.line("")
    assert [f.ts for f in got] == [ts]


@pytest.mark.parametrize(("value", "text"), [
    ([104, 0, 105], "h\x00i"),  # bytes, NUL included
    ([255, 65], "\ufffdA"),  # not UTF-8: replaced, never an error
    ([72, 255, 255], "H\ufffd\ufffd"),
    (["first", None, "second"], "first\nsecond"),  # a repeated field: its values, one a line
    ([1, 256], ""),  # not bytes: no text value in it
    ([True], ""),  # true is not the byte 1
    ([], ""),
])
def test_a_journal_json_message_may_be_bytes_or_a_repeated_field(value: list[object], text: str) -> None:
    line = json.dumps({"__REALTIME_TIMESTAMP": "1746584032000000", "MESSAGE": value})
    assert peel(line) == framing.Framed(text, T0, None, False, framing.JOURNAL_JSON)


@pytest.mark.parametrize("key", ["log", "message", "line", "msg"])
def test_a_shippers_text_is_its_first_text_field(key: str) -> None:
    assert peel(json.dumps({key: "INFO ready", "other": 1})) == framing.Framed(
        "INFO ready", None, None, False, framing.SHIPPER_JSON)


def test_a_programs_own_json_log_naming_its_source_line_is_no_shippers_record() -> None:
    # c-llamacpp-json-2024-model-loaded-listening.log (https://github.com/ollama/ollama/issues/4803): llama.cpp's
    # server logs JSON with its function and line; its keys are its words, read by the profile
    line = '{"function":"main","level":"INFO","line":3064,"msg":"model loaded","tid":"1398","timestamp":1717470350}'
    assert peel(line) == framing.Framed(line)
    assert peel('{"level":"INFO","line":"x","msg":"ready"}').framing == framing.SHIPPER_JSON


def test_a_shippers_stream_is_kept_only_when_it_is_one() -> None:
    assert peel('{"message":"x","stream":"stderr"}').stream == "stderr"
    assert peel('{"message":"x","stream":"console"}').stream is None


@pytest.mark.parametrize("key", ["time", "timestamp", "@timestamp", "ts", "date", "_time"])
def test_a_shippers_time_is_read_from_each_field_it_may_be_in(key: str) -> None:
    assert peel(json.dumps({"message": "x", key: "2025-05-07T02:13:52Z"})).ts == T0


def test_a_shippers_time_is_the_first_field_that_reads_as_one() -> None:
    assert peel('{"message":"x","time":"yesterday","ts":1746584032}').ts == T0
    assert peel('{"message":"x"}').ts is None


@pytest.mark.parametrize(("value", "ts"), [
    ("1746584032.5", T0 + 0.5),  # seconds as text
    ("1746584032", T0),
    (1746584032500, T0 + 0.5),  # milliseconds
    ("1.2.3", None),  # not a number, nor a time
    (1e11, 1e11),  # the largest taken as seconds
    (100_000_000_000.5, 100_000_000.0005),  # above it: milliseconds
    (0, None),
    (-5, None),
    (0.5, 0.5),
    (True, None),
    (None, None),
])
def test_a_shippers_time_field_is_text_or_seconds_or_finer(value: object, ts: float | None) -> None:
    got = peel(json.dumps({"message": "x", "ts": value})).ts
    assert got == (pytest.approx(ts) if ts is not None else None)


# journalctl -o export: "KEY=value" lines, a blank line after each entry; the lines each entry stands for
EXPORT = ["__CURSOR=s=1", "__REALTIME_TIMESTAMP=1746584032000000", "_PID=7", "MESSAGE=one", ""]


def test_an_export_record_is_its_message_time_and_every_line_it_took() -> None:
    d = Deframer()
    out = [f for line in EXPORT + EXPORT for f in d.line(line)]
    one = framing.Framed("one", T0, None, False, framing.JOURNAL_EXPORT, 5)
    assert out == [one, one]  # the second counted from zero again


def test_export_records_without_a_message_are_counted_into_the_next_line() -> None:
    d = Deframer()
    bare = ["__CURSOR=s=1", "__REALTIME_TIMESTAMP=1746584032000000", "_PID=7", ""]
    out = [f for line in bare + bare + EXPORT for f in d.line(line)]
    assert out == [framing.Framed("one", T0, None, False, framing.JOURNAL_EXPORT, 4 + 4 + 5)]


def test_an_export_record_without_a_time_has_none() -> None:
    d = Deframer()
    out = d.line("__CURSOR=s=1") + d.line("MESSAGE=m") + d.line("")
    assert out == [framing.Framed("m", None, None, False, framing.JOURNAL_EXPORT, 3)]


def test_a_binary_export_field_counts_its_name_size_and_value_lines() -> None:
    d = Deframer()
    assert d.line("__CURSOR=s=1") == []
    d.export_value("MESSAGE", "a\nb")  # "MESSAGE", 8 bytes of size then "a", "b": three raw lines
    assert d.line("") == [framing.Framed("a\nb", None, None, False, framing.JOURNAL_EXPORT, 1 + 3 + 1)]


def test_an_export_message_up_to_the_join_bound_is_kept_and_a_longer_one_dropped() -> None:
    d = Deframer()
    big = "x" * framing.MAX_JOIN_CHARS
    out = d.line("__CURSOR=s=1") + d.line("MESSAGE=" + big) + d.line("")
    assert [len(f.text) for f in out] == [framing.MAX_JOIN_CHARS]
    out = d.line("__CURSOR=s=1") + d.line("MESSAGE=" + big + "x") + d.line("") + d.line("plain")
    assert out == [framing.Framed("plain", lines=3 + 1)]  # the record's lines carried into the next line


# --- every line framing's whole answer ---------------------------------------------------------------------
@pytest.mark.parametrize(("line", "framed"), [
    ("2025-05-07T02:13:52+0000 node-1 vllm[7]: INFO x",
     framing.Framed("INFO x", T0, None, False, framing.JOURNAL_SHORT_ISO)),
    ("2025-05-07T02:13:52.000000000Z INFO 05-07 02:13:52 [core.py:1] x",
     framing.Framed("INFO 05-07 02:13:52 [core.py:1] x", T0, None, False, framing.TIMESTAMPS)),
    ("2025-05-07T02:13:52Z ERROR: boom",  # a level, not a program: no journal line, a --timestamps one
     framing.Framed("ERROR: boom", T0, None, False, framing.TIMESTAMPS)),
    ("[pod/vllm-0/vllm] INFO ready", framing.Framed("INFO ready", None, None, False, framing.KUBECTL_PREFIX)),
    ("[2025-05-07T02:13:52Z] INFO 05-07 02:13:52 [core.py:1] x",  # a CI's log view brackets the time
     framing.Framed("INFO 05-07 02:13:52 [core.py:1] x", T0, None, False, framing.TIMESTAMPS)),
    ("[2025-05-07 02:13:52] server_args=ServerArgs()",  # SGLang's own time (no T): the engine's line, kept
     framing.Framed("[2025-05-07 02:13:52] server_args=ServerArgs()")),
    ("_svc  | INFO ready", framing.Framed("INFO ready", None, None, False, framing.COMPOSE)),
    ("<11>1 2025-05-07T02:13:52Z host vllm 1 - - boom",  # user.err: stderr
     framing.Framed("boom", T0, "stderr", False, framing.SYSLOG_5424)),
    ("<26>1 - host vllm 1 - - boom",  # daemon.crit, no time
     framing.Framed("boom", None, "stderr", False, framing.SYSLOG_5424)),
    ("<12>1 2025-05-07T02:13:52Z host vllm 1 - - note",  # user.warning: not an error
     framing.Framed("note", T0, None, False, framing.SYSLOG_5424)),
    ("<13>May  7 02:13:52 host vllm[1]: note",
     framing.Framed("note", T0, None, False, framing.SYSLOG_3164)),
    ("<11>May  7 02:13:52.25 host vllm[1]: boom",
     framing.Framed("boom", T0 + 0.25, "stderr", False, framing.SYSLOG_3164)),
    ("May  7 02:13:52 node-1 ollama[9]: msg", framing.Framed("msg", T0, None, False, framing.JOURNAL_SHORT)),
    ("May  7 02:13:52.250 node-1 ollama[9]: msg",
     framing.Framed("msg", T0 + 0.25, None, False, framing.JOURNAL_SHORT_PRECISE)),
    ("Foo  7 02:13:52 node-1 ollama[9]: msg", framing.Framed("msg", None, None, False, framing.JOURNAL_SHORT)),
    ('{"log":"ready\\r\\n","stream":"stdout","time":"2025-05-07T02:13:52Z","attrs":{"tag":"vllm"}}',
     framing.Framed("ready", T0, "stdout", False, framing.DOCKER_JSON)),  # every field Docker writes, CRLF ended
    ('{"log":"x\\n","stream":"stdout","time":"2025-05-07T02:13:52Z","host":"n1"}',  # a field Docker never writes
     framing.Framed("x", T0, "stdout", False, framing.SHIPPER_JSON)),
])
def test_each_framings_whole_answer(line: str, framed: framing.Framed, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "time", _Clock(T0 + 3600))  # an hour after the lines: this year's May 7
    assert peel(line) == framed


class _Clock:
    """``time`` as framing reads it (a syslog line's year is this year's unless that lies ahead)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def gmtime(self, t: float) -> time.struct_time:
        return time.gmtime(t)


@pytest.mark.parametrize(("now", "ts"), [
    (T0 + 3600, T0),  # an hour later: this year's
    (T0 - 86400, T0),  # a day ahead of the clock at most: still this year's (clocks differ)
    (T0 - 86401, calendar.timegm((2024, 5, 7, 2, 13, 52))),  # further ahead: last year's
    (calendar.timegm((2026, 1, 1, 0, 0, 0)), T0),  # in January, May's lines are last year's
])
def test_a_yearless_time_is_this_years_unless_more_than_a_day_ahead(now: float, ts: float,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "time", _Clock(now))
    assert peel("May  7 02:13:52 node-1 ollama[9]: msg").ts == ts


@pytest.mark.parametrize(("text", "ts"), [
    ("2025-05-07T04:13:52+02:00", T0),
    ("2025-05-07T00:13:52-02:00", T0),
    ("2025-05-07T07:43:52+05:30", T0),
    ("2025-05-06T20:43:52-0530", T0),
    ("2025-05-07 02:13:52.5", T0 + 0.5),  # naive: UTC
])
def test_an_rfc3339_offset_is_hours_and_minutes_either_way(text: str, ts: float) -> None:
    assert framing.parse_rfc3339(text) == ts


def test_a_binary_export_field_read_as_text_is_its_sized_value() -> None:
    """journalctl -o export's binary field read from text: its name alone, then 8 bytes of size and the value."""
    d = Deframer()
    size = struct.pack("<Q", 5).decode("latin-1")
    out = [f for line in ["__CURSOR=s=1", "MESSAGE", size + "hello", "_PID=7", ""] for f in d.line(line)]
    assert out == [framing.Framed("hello", None, None, False, framing.JOURNAL_EXPORT, 5)]


def test_an_export_record_ended_by_a_line_that_is_no_field_counts_only_its_own_lines() -> None:
    d = Deframer()
    out = [f for line in ["__CURSOR=s=1", "MESSAGE=m", "a plain line"] for f in d.line(line)]
    assert out == [framing.Framed("m", None, None, False, framing.JOURNAL_EXPORT, 2), framing.Framed("a plain line")]


def test_the_end_of_the_input_gives_the_export_record_read_so_far() -> None:
    d = Deframer()
    assert d.line("__CURSOR=s=1") + d.line("MESSAGE=last") == []
    assert d.flush() == [framing.Framed("last", None, None, False, framing.JOURNAL_EXPORT, 2)]
    assert d.flush() == []


def test_partial_records_reaching_the_join_bound_are_handed_on_at_once() -> None:
    d = Deframer()
    half = "x" * (framing.MAX_JOIN_CHARS // 2)
    assert d.line(f"2025-05-07T02:13:52Z stdout P {half}") == []
    out = d.line(f"2025-05-07T02:13:52Z stdout P {half}")  # exactly the bound: out, still partial
    assert [(len(f.text), f.lines) for f in out] == [(framing.MAX_JOIN_CHARS, 2)]


def test_the_time_is_the_outermost_framings_that_has_one() -> None:
    f = peel("2025-05-07T02:13:52Z stdout F 2025-05-07T02:13:53.000000000Z INFO x")
    assert (f.framing, f.ts, f.text) == (framing.CRI, T0, "INFO x")


def test_a_carried_count_goes_to_the_next_line_only_keeping_its_own_fields() -> None:
    d = Deframer()
    bare = ["__CURSOR=s=1", "_PID=7", ""]
    out = [f for line in bare for f in d.line(line)]
    out += d.line("2025-05-07T02:13:52Z stderr F boom") + d.line("2025-05-07T02:13:53Z stdout F next")
    out += [f for line in bare for f in d.line(line)] + d.line("last")
    assert out == [framing.Framed("boom", T0, "stderr", False, framing.CRI, 3 + 1),
                   framing.Framed("next", T0 + 1, "stdout", False, framing.CRI, 1),
                   framing.Framed("last", lines=3 + 1)]
