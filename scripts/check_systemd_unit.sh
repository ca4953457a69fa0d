#!/usr/bin/env bash
# The whole --unit flow against a real systemd unit, on a machine where systemd is PID 1 (run as root; the
# test suite cannot: its machines have no systemd). It uses the real llama-server and model that
# scripts/setup_llama_server.py builds into the cache, and a runtime unit in /run/systemd/system (gone at
# reboot; removed at the end). What it checks (each line prints "ok ..." or the script stops with "FAIL ..."):
#
#  1. systemctl show on the real unit parses: MainPID, ControlGroup, InvocationID, ExecStart agree with
#     `systemctl show -P`; TimeoutStartSec and Restart are read.
#  2. `firstlight up --unit` starts the unit whose first start fails (its model file is not there yet: a
#     real llama-server error), reports attempt 1 failed with llama-server's own error line, waits while
#     systemd restarts it (Restart=on-failure), and says READY for attempt 2 after a real generation:
#     exit 0, two attempts, the summary's pid is the unit's MainPID, processes from the unit's cgroup.
#  3. `firstlight watch --unit` on the unit, now serving: READY again (its current invocation).
#  4. The unit's journal exported (journalctl -o export | systemd-journal-remote) and replayed:
#     `replay --unit --journal-file` gives ready for the last invocation and failed for the first.
#  5. `firstlight up --unit --stop-on-interrupt`, interrupted with SIGINT while the model loads: exit 130,
#     and the unit is stopped; without the flag the unit keeps running.
#  6. The example units in deploy/systemd pass `systemd-analyze verify` (engines stubbed as in the tests).
#
# Usage: sudo bash scripts/check_systemd_unit.sh        (FIRSTLIGHT=path/to/firstlight to use another one)
set -euo pipefail
cd "$(dirname "$0")/.."
UNIT=firstlight-check.service
RUNDIR=/run/firstlight-check
FIRSTLIGHT=${FIRSTLIGHT:-$PWD/.venv/bin/firstlight}
PY=${PY:-$PWD/.venv/bin/python}
PORT=${PORT:-18089}
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (it writes a unit into /run/systemd/system)"
[ -d /run/systemd/system ] || fail "systemd is not PID 1 here"
paths=$("$PY" scripts/setup_llama_server.py --print-paths) || fail "run scripts/setup_llama_server.py first"
SERVER=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["llama_server"])' "$paths")
MODEL=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["model"])' "$paths")
work=$(mktemp -d)
cleanup() {
  systemctl stop "$UNIT" 2>/dev/null || true
  rm -f "/run/systemd/system/$UNIT"
  systemctl daemon-reload
  systemctl reset-failed "$UNIT" 2>/dev/null || true
  rm -rf "$RUNDIR" "$work"
}
trap cleanup EXIT
mkdir -p "$RUNDIR"
rm -f "$RUNDIR/model.gguf"   # the first start fails: no model yet
cat > "/run/systemd/system/$UNIT" <<EOF
[Unit]
Description=firstlight check: llama-server, first start fails
StartLimitIntervalSec=0

[Service]
Type=simple
ExecStart=$SERVER -m $RUNDIR/model.gguf --host 127.0.0.1 --port $PORT -c 2048 -np 1
Restart=on-failure
RestartSec=5
TimeoutStopSec=20
EOF
systemctl daemon-reload

# the model appears once the first start has failed; systemd's restart then finds it
( for _ in $(seq 600); do
    [ "$(systemctl show -P Result "$UNIT")" = exit-code ] && break
    sleep 0.1
  done
  ln -sf "$MODEL" "$RUNDIR/model.gguf" ) &

# 2. up --unit through a failed attempt to READY
"$FIRSTLIGHT" up --unit firstlight-check --max-attempts 3 --json --no-history --timeout 300 \
  > "$work/up.jsonl" 2> "$work/up.err" || fail "up --unit exited $? ($(tail -3 "$work/up.err"))"
"$PY" - "$work/up.jsonl" "$(systemctl show -P MainPID "$UNIT")" <<'EOF' || fail "up --unit summary"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
s = events[-1]
assert s["event"] == "summary" and s["verdict"] == "ready", s["verdict"]
attempts = s["unit"]["attempts"]
assert [a["verdict"] for a in attempts] == ["failed", "ready"], attempts
assert any("model.gguf" in str(e["value"]) for e in attempts[0]["evidence"]), attempts[0]["evidence"]
assert s["pid"] == int(sys.argv[2]), (s["pid"], sys.argv[2])
assert any(n.startswith("cgroup /sys/fs/cgroup/") for n in s["notes"]), s["notes"]
assert any(e["event"] == "attempt" for e in events)
EOF
ok "up --unit: attempt 1 failed with llama-server's error, systemd restarted it, attempt 2 READY, pid = MainPID"

# 1. systemctl show parsing on the real unit
"$PY" - "$UNIT" <<'EOF' || fail "systemctl show parsing"
import subprocess, sys
from firstlight.units.systemctl import Systemctl
unit = sys.argv[1]
s = Systemctl().show(unit)
P = lambda p: subprocess.run(["systemctl", "show", "-P", p, unit], capture_output=True, text=True).stdout.strip()
assert s.main_pid == int(P("MainPID")) and s.control_group == P("ControlGroup"), s
assert s.invocation_id == P("InvocationID") and s.active_state == "active", s
assert s.exec_start[0].endswith("llama-server") and "--port" in s.exec_start, s.exec_start
assert s.restart == "on-failure" and s.restart_s == 5.0 and s.n_restarts >= 1, s
assert s.timeout_start_s is None or s.timeout_start_s > 0
EOF
ok "systemctl show: MainPID, ControlGroup, InvocationID, ExecStart, Restart, NRestarts parsed"

# 3. watch --unit on the serving unit
"$FIRSTLIGHT" watch --unit firstlight-check --json --no-history --timeout 60 > "$work/watch.jsonl" \
  2> "$work/watch.err" || fail "watch --unit exited $? ($(tail -3 "$work/watch.err"))"
ok "watch --unit: READY on the current invocation"

# 4. the unit's journal, exported and replayed
journalctl -u "$UNIT" -o export | /lib/systemd/systemd-journal-remote --output="$work/unit.journal" - 2>/dev/null
"$FIRSTLIGHT" replay --unit firstlight-check --journal-file "$work/unit.journal" --json > "$work/last.json" \
  || fail "replay of the last invocation exited $?"
first=$(grep '"event": "summary"' "$work/up.jsonl" | tail -1 | "$PY" -c \
  'import json,sys; print(json.loads(sys.stdin.read())["unit"]["attempts"][0]["invocation"])')
rc=0; "$FIRSTLIGHT" replay --unit firstlight-check --journal-file "$work/unit.journal" --invocation "$first" \
  --json > "$work/first.json" || rc=$?
[ "$rc" = 1 ] || fail "replay of the first invocation exited $rc, not 1 (failed)"
ok "replay --unit --journal-file: last invocation ready, first one failed"

# 5. Ctrl-C: the watch stops; with --stop-on-interrupt the unit too
"$FIRSTLIGHT" up --unit firstlight-check --json --no-history > "$work/int.jsonl" 2>/dev/null &
pid=$!
for _ in $(seq 100); do grep -q '"event": "started"' "$work/int.jsonl" 2>/dev/null && break; sleep 0.1; done
kill -INT "$pid"; rc=0; wait "$pid" || rc=$?
[ "$rc" = 130 ] || fail "interrupted up --unit exited $rc"
[ "$(systemctl show -P ActiveState "$UNIT")" = active ] || [ "$(systemctl show -P ActiveState "$UNIT")" = activating ] \
  || fail "without --stop-on-interrupt the unit should keep running"
"$FIRSTLIGHT" up --unit firstlight-check --stop-on-interrupt --json --no-history > "$work/int2.jsonl" 2>/dev/null &
pid=$!
for _ in $(seq 100); do grep -q '"event": "started"' "$work/int2.jsonl" 2>/dev/null && break; sleep 0.1; done
kill -INT "$pid"; rc=0; wait "$pid" || rc=$?
[ "$rc" = 130 ] || fail "interrupted up --unit --stop-on-interrupt exited $rc"
state=$(systemctl show -P ActiveState "$UNIT")
[ "$state" = inactive ] || [ "$state" = failed ] || fail "--stop-on-interrupt left the unit $state"
ok "Ctrl-C stops the watch, not the unit; --stop-on-interrupt stops the unit"

# 6. the example units
"$PY" -m pytest -q tests/e2e/deploy/test_systemd_units.py >/dev/null || fail "deploy/systemd units do not verify"
ok "deploy/systemd units pass systemd-analyze verify"
echo "all checks passed against systemd $(systemctl --version | head -1 | cut -d' ' -f2)"
