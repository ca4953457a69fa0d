"""The readiness endpoints under hostile clients and options (issue 20): a client that trickles its request is
dropped at the request deadline, connection threads are capped, a bind beyond loopback is warned about, and
``up --detach --serve-readiness`` (endpoints that would die at READY) is refused. Real sockets.

The process-starting tests of this subject; the others: ``tests/unit/report/test_readiness.py``.
"""

from __future__ import annotations

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd


def test_up_detach_with_serve_readiness_is_refused():
    r = run_firstlight("up", "--detach", "--serve-readiness", "127.0.0.1:0", "--", *sim_cmd("normal", free_port()))
    assert r.rc == 64 and "--detach" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_readiness_bind_beyond_loopback_is_warned_about_and_the_help_example_is_loopback():
    port = free_port()
    r = run_firstlight("up", "--no-preflight", "--stop-when-ready", "--poll-min", "0.05", "--serve-readiness",
                       f"0.0.0.0:{free_port()}", "--", *sim_cmd("normal", port, "--load-seconds", "0.2"))
    assert r.rc == 0, r.stderr[-2000:]
    assert "warning: --serve-readiness 0.0.0.0:" in r.stderr and "visible to anyone" in r.stderr
    r = run_firstlight("up", "--no-preflight", "--stop-when-ready", "--poll-min", "0.05", "--serve-readiness",
                       f"127.0.0.1:{free_port()}", "--", *sim_cmd("normal", free_port(), "--load-seconds", "0.2"))
    assert r.rc == 0 and "visible to anyone" not in r.stderr
    assert "--serve-readiness 0.0.0.0" not in run_firstlight("watch", "--help").stdout
