"""``/events`` and ``/startupz`` of a live ``firstlight up --serve-readiness`` on the simulated server: a real HTTP
client and a real browser (headless Chromium's ``EventSource``) follow a start's events as they happen, and they
are the JSON Lines objects of the same run."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from firstlight.sim.fixtures import free_port
from tests.support.chromium import follow_events, parse_dom
from tests.support.common import Output, firstlight_cmd, sim_cmd, wait_for
from tests.support.readiness import FAST, answers, get

LOAD_S = 4.0  # the simulated load: long enough that the stream is open before the start ends


def _up(weights: Path, rport: int) -> subprocess.Popen[str]:
    return subprocess.Popen(firstlight_cmd("up", "--json", "--stop-when-ready", "--serve-readiness",
                                           f"127.0.0.1:{rport}", *FAST, "--",
                                           *sim_cmd("normal", free_port(), "--model-path", str(weights),
                                                    "--load-seconds", str(LOAD_S))),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def _key(e: dict[str, Any]) -> tuple[Any, ...]:
    return e["event"], e.get("message"), e.get("verdict"), e.get("phase")


def _stdout_events(out: str, seen: list[str]) -> list[dict[str, Any]]:
    """The JSON Lines objects of the watch (the preflight's comes before it, printed by the command: it is in the
    summary, not in the stream)."""
    lines = [json.loads(x) for x in [*seen, *out.splitlines()] if x.startswith("{")]
    return [e for e in lines if e["event"] != "preflight"]


def test_a_client_follows_a_live_start_on_events_and_gets_the_json_lines_objects(weights: Path):
    rport = free_port()
    fl = _up(weights, rport)
    output = Output(fl)
    got: list[tuple[int, dict[str, Any], float]] = []
    try:
        starting = wait_for(lambda: (b := get(rport, "/startupz")[1]).get("state") == "starting" and b, 30,
                            "/startupz while starting")
        assert {"state", "phase", "detail", "elapsed_seconds", "progress", "eta_s"} <= set(starting)
        with httpx.stream("GET", f"http://127.0.0.1:{rport}/events", timeout=httpx.Timeout(60, connect=5)) as r:
            assert r.headers["content-type"] == "text/event-stream"
            event_id = 0
            for line in r.iter_lines():
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("data: "):
                    got.append((event_id, json.loads(line[6:]), time.monotonic()))
        # The stream ended when firstlight did (--stop-when-ready), after its last event: the drain at the close.
        out, err = output.rest(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert fl.returncode == 0, err[-3000:]
    ids = [i for i, _, _ in got]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # every event, in order, none lost
    assert abs(ids[0] - time.time() * 1000) < 600_000  # counted from the wall clock's milliseconds at its start
    streamed = [_key(e) for _, e, _ in got if e["event"] != "status"]
    printed = [_key(e) for e in _stdout_events(out, output.seen) if e["event"] != "status"]
    assert streamed == printed, (streamed, printed)  # the same objects as the JSON Lines output
    phases = [e["message"] for _, e, _ in got if e["event"] == "phase"]
    assert "weights_loading" in phases and phases[-1] == "ready", phases
    # As they happen: the stream was open while the start ran, so its events came spread over the load, not at once.
    assert got[-1][1]["event"] == "summary"
    summary_at = next(at for _, e, at in got if e["event"] == "summary")
    assert any(summary_at - at > LOAD_S / 4 for _, e, at in got if e["event"] in ("phase", "level")), got


def test_a_browser_eventsource_receives_a_starts_events_as_they_happen(weights: Path, reap: list[int]):
    """A sidecar waits for its engine; the engine is started only once the browser's stream is open, so every
    event of the start reaches the browser live, none from the log's past."""
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", token, *FAST,
                                         "--no-history", "--serve-readiness", f"127.0.0.1:{rport}"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    output = Output(fl)
    launched: list[float] = []

    def launch() -> None:
        sim = subprocess.Popen(sim_cmd("normal", port, "--model-path", str(weights), "--served-model-name", token,
                                       "--load-seconds", str(LOAD_S)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        reap.append(sim.pid)
        launched.append(time.time())

    try:
        wait_for(lambda: answers(rport, "/livez", 200, start=0), 60, "the sidecar, waiting for its engine")
        seen, dom = follow_events(f"http://127.0.0.1:{rport}/events", on_open=launch)
        fl.send_signal(signal.SIGTERM)
        output.rest(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert launched, "the engine was started once the browser's stream was open"
    first = seen[0]["id"]
    assert [e["id"] for e in seen] == list(range(first, first + len(seen))) and seen[-1]["event"] == "summary"
    kinds = [e["event"] for e in seen]
    assert "started" in kinds and kinds.index("started") < kinds.index("phase") < kinds.index("verdict"), kinds
    assert [e["message"] for e in seen if e["event"] == "phase"][-1] == "ready"
    # Live: the browser had the start's first events well before its summary (the load takes LOAD_S).
    started = next(e for e in seen if e["event"] == "started")
    assert seen[-1]["at"] - started["at"] > LOAD_S / 2, seen
    items = [el.text for el in parse_dom(dom).elements if el.tag == "li"]
    assert any(x.startswith("started") for x in items) and items[-1] == "summary ready", items
