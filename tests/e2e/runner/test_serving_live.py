"""The serving checks through the live path (`firstlight up`), with real processes and signals, against the
simulator (the real-engine proofs are in tests/e2e/llama/test_serving.py): a launcher that daemonizes the server and
exits 0 after READY is supervised through the daemon."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, sim_cmd, wait_for
from tests.support.readiness import answers, get

# A launcher that leaves its server running and exits 0 when told to (the file named last appears).
LAUNCHER_UNTIL = """
import os, subprocess, sys, time
cmd, pidfile, release = sys.argv[1:-2], sys.argv[-2], sys.argv[-1]
p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(pidfile, "w").write(str(p.pid))
end = time.monotonic() + 120
while not os.path.exists(release) and time.monotonic() < end:
    time.sleep(0.05)
sys.exit(0)
"""


def _kill_daemon(pidfile: Path) -> None:
    """The daemon a launcher left (whenever the test stopped): it is nobody's child, so nothing else stops it."""
    try:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def test_a_daemonizing_launcher_that_exits_0_is_supervised_through_its_daemon(tmp_path: Path):
    port, rport = free_port(), free_port()
    pidfile, release, errfile = tmp_path / "daemon.pid", tmp_path / "release", tmp_path / "stderr"
    # the launcher exits when told, after READY (a launcher that exits before READY is another story)
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--no-preflight", "--no-history", "--poll-min", "0.05",
                                         "--serving-interval", "1", "--serve-readiness", f"127.0.0.1:{rport}", "--",
                                         sys.executable, "-c", LAUNCHER_UNTIL, *sim_cmd("normal", port),
                                         str(pidfile), str(release)),
                          stdout=subprocess.PIPE, stderr=errfile.open("w"), text=True, stdin=subprocess.DEVNULL)
    daemon = None
    try:
        wait_for(lambda: answers(rport, "/readyz", 200), 60, "READY")
        daemon = int(pidfile.read_text())
        launcher = get(rport, "/readyz")[1]["pid"]
        release.touch()
        wait_for(lambda: not os.path.exists(f"/proc/{launcher}") or _zombie(launcher), 30, "the launcher to exit")
        # The launcher is gone, exit code 0: firstlight says it supervises the daemon (read before the daemon is
        # killed: a kill before firstlight's next look at the launcher is a server that ended with it), and the
        # daemon still serves.
        wait_for(lambda: "exited 0 and left the server running as pid" in errfile.read_text(), 30,
                 "firstlight to take over the daemon")
        wait_for(lambda: answers(rport, "/readyz", 200) and (get(rport, "/readyz")[1].get("serving") or {}).get(
            "state") == "serving" and fl.poll() is None, 30, "serving checks passing after the launcher's exit")
        os.kill(daemon, signal.SIGKILL)  # the real server dies: now serving has ended
        out = fl.communicate(timeout=60)[0]
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.communicate()
        _kill_daemon(pidfile)
    summaries = [e for e in map(json.loads, filter(lambda x: x.startswith("{"), out.splitlines()))
                 if e["event"] == "summary"]
    assert summaries[0]["verdict"] == "ready"
    assert "exited 0 and left the server running as pid" in errfile.read_text()
    assert summaries[-1]["verdict"] == "failed" and fl.returncode == 1
    assert "serving" in summaries[-1]["evidence"][0]["value"]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_serving_changes_reach_json_console_and_history_and_0_turns_the_checks_off(tmp_path: Path):
    port, rport = free_port(), free_port()
    history = tmp_path / "h.sqlite3"
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--no-preflight", "--history", str(history), "--poll-min",
                                         "0.05", "--serving-interval", "0.5", "--generation-timeout", "1",
                                         "--stall-timeout", "30", "--serve-readiness", f"127.0.0.1:{rport}", "--",
                                         *sim_cmd("normal", port)),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    pid = None
    try:
        pid = wait_for(lambda: answers(rport, "/readyz", 200), 60, "READY")["pid"]
        os.killpg(pid, signal.SIGSTOP)
        wait_for(lambda: answers(rport, "/readyz", 503), 30, "/readyz 503 once a check failed")
        os.killpg(pid, signal.SIGCONT)
        wait_for(lambda: answers(rport, "/readyz", 200), 30, "/readyz 200 again")
        fl.send_signal(signal.SIGTERM)
        out, err = fl.communicate(timeout=60)
    finally:
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGCONT)
            except OSError:
                pass
        if fl.poll() is None:
            fl.kill()
            fl.communicate()
    events = [e for e in map(json.loads, filter(lambda x: x.startswith("{"), out.splitlines()))
              if e["event"] == "serving"]
    assert [e["state"] for e in events][:2] == ["serving", "degraded"] and events[-1]["state"] == "serving"
    assert events[1]["ready"] is False and events[1]["evidence"][0]["signal"] == "probe:serving"
    assert "degraded" in err and "one serving check failed" in err  # the human line
    from firstlight.history.store import History

    with History(history) as h:
        run = h.runs(limit=1)[0]
        states = [s for _, s, _ in h.serving_changes(run.id)]
    assert states[:1] == ["degraded"] and states[-1] == "serving", states

    # --serving-interval 0: no checks and no serving events while supervising (only the process is watched).
    port, rport = free_port(), free_port()
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--no-preflight", "--no-history", "--poll-min", "0.05",
                                         "--serving-interval", "0", "--serve-readiness", f"127.0.0.1:{rport}", "--",
                                         *sim_cmd("normal", port)),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: answers(rport, "/readyz", 200), 60, "READY")
        fl.send_signal(signal.SIGTERM)
        out, _ = fl.communicate(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.communicate()
    assert '"event": "summary"' in out and '"event": "serving"' not in out


def test_the_sidecar_follows_a_daemon_its_launcher_left_serving_the_port(tmp_path: Path):
    """watch --pid LAUNCHER --serve-readiness: the launcher exits once its daemon serves; the port is still
    served by the daemon, so the sidecar watches the daemon (still ready), and its death ends serving."""
    port, rport = free_port(), free_port()
    pidfile, release = tmp_path / "daemon.pid", tmp_path / "release"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER_UNTIL, *sim_cmd("normal", port), str(pidfile),
                                 str(release)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(pidfile.exists, 60, "the launcher, running its server")  # attach to a running launcher
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid", str(launcher.pid),
                                         "--no-history", "--poll-min", "0.05", "--serving-interval", "1",
                                         "--serve-readiness", f"127.0.0.1:{rport}"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(fl.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    daemon = None
    try:
        wait_for(lambda: answers(rport, "/readyz", 200, pid=launcher.pid), 60, "READY, watching the launcher")
        daemon = int(pidfile.read_text())
        release.touch()
        assert launcher.wait(timeout=60) == 0
        followed = f"pid {launcher.pid} ended; pid {daemon} still serves"
        wait_for(lambda: any(followed in line for line in lines), 30, "the sidecar following the daemon")
        assert answers(rport, "/readyz", 200) and fl.poll() is None  # still ready: the daemon serves
        os.kill(daemon, signal.SIGKILL)  # the real server dies: now serving has ended
        body = wait_for(lambda: answers(rport, "/readyz", 503, verdict="failed"), 30, "/readyz 503 after its death")
        ended = body["evidence"][0]["value"]  # "exited", or "died of SIGKILL" where its wait status was read
        assert f"server pid {daemon} exited" in ended or f"server pid {daemon} died of SIGKILL" in ended, ended
        fl.send_signal(signal.SIGTERM)
        fl.wait(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
        _kill_daemon(pidfile)
        launcher.kill()
        launcher.wait()
