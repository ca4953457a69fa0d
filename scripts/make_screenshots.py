#!/usr/bin/env python3
"""Make the README's pictures from real runs: docs/report.png and docs/dashboard.png.

    .venv/bin/python scripts/make_screenshots.py [--out docs]

1. docs/report.png: two starts of the same real llama-server (built by scripts/setup_llama_server.py) under
   `firstlight up --stop-when-ready --report`, in a private history, so the second report carries the first
   as its baseline; the second report is screenshotted by headless Chromium.
2. docs/dashboard.png: the live dashboard as it stood during the second start (its --record replayed through
   the judge into the dashboard, as the session feeds it), exported by rich as SVG and screenshotted.

Each PNG must stay under 300 KB. Needs chromium (Debian's package) and the llama-server cache.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402

from firstlight.config import JudgeConfig  # noqa: E402
from firstlight.judge import Judge  # noqa: E402
from firstlight.report.dashboard import DashboardState, render  # noqa: E402
from firstlight.report.record import read_record  # noqa: E402
from firstlight.report.series import profile_for  # noqa: E402
from firstlight.sim.fixtures import free_port  # noqa: E402
from firstlight.timeline import Level, Probe, Started  # noqa: E402

LIMIT = 300_000
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def llama_paths() -> dict[str, str]:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"make_screenshots: llama-server is not built: {p.stderr.strip()}")
    return json.loads(p.stdout)


def start(llama: dict[str, str], work: Path, n: int, ctx: int, port: int) -> tuple[Path, Path]:
    """One real start under `firstlight up`; its record and report (the same command: one deployment)."""
    record, report = work / f"run{n}.jsonl", work / f"report{n}.html"
    server = [llama["llama_server"], "-m", llama["model"], "--host", "127.0.0.1", "--port", str(port),
              "-np", "1", "-c", str(ctx)]
    p = subprocess.run([sys.executable, "-m", "firstlight", "up", "--stop-when-ready", "--quiet-server", "--plain",
                        "--poll-min", "0.05", "--sample-interval", "0.2", "--record", str(record), "--report",
                        str(report), "--", *server], capture_output=True, text=True, timeout=180,
                       env={**os.environ, "FIRSTLIGHT_HISTORY": str(work / "history.sqlite3")})
    if p.returncode != 0:
        sys.exit(f"make_screenshots: the start failed:\n{p.stderr[-2000:]}")
    return record, report


def screenshot(page: Path, png: Path, width: int, height: int, profile: Path) -> None:
    subprocess.run([*CHROMIUM, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                    f"--screenshot={png}", page.resolve().as_uri()], check=True, capture_output=True, timeout=120)


def dashboard_svg(record: Path) -> str:
    """The dashboard halfway through the start (in time), drawn by rich and exported as SVG."""
    obs = read_record(record).observations
    judge = Judge(JudgeConfig(), profile_for(obs, None), obs[0].t)
    state = DashboardState()
    state.started({"started_at": obs[0].t, "engine": judge.profile.name,
                   "url": next((o.url or "" for o in obs if isinstance(o, Started)), ""), "pid": None})
    ready = next(o.t for o in obs if isinstance(o, Probe) and o.ok and o.level is Level.GENERATION)
    for o in obs:
        if o.t > (obs[0].t + ready) / 2:
            break
        for ev in judge.feed(o):
            state.event(ev)
        state.observe(o)
        state.assessment = judge.assess(o.t)
    console = Console(record=True, width=100, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    console.print(render(state, 100))
    svg = console.export_svg(title="firstlight up -- llama-server … (dashboard)")
    return re.sub(r"@font-face\s*\{[^}]*\}", "", svg)  # rich's template fetches a web font: use local ones


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs")
    ap.add_argument("--ctx", type=int, default=16384, help="llama-server -c: a bigger KV cache, a longer kv_cache "
                    "phase")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    llama = llama_paths()
    with tempfile.TemporaryDirectory(prefix="firstlight-shots-") as d:
        work = Path(d)
        port = free_port()
        start(llama, work, 1, args.ctx, port)
        record, report = start(llama, work, 2, args.ctx, port)
        screenshot(report, args.out / "report.png", 1000, 1250, work / "chromium")
        page = work / "dashboard.html"
        page.write_text("<!DOCTYPE html><html><body style='margin:0;background:#fff'>"
                        f"{dashboard_svg(record)}</body></html>", encoding="utf-8")
        screenshot(page, args.out / "dashboard.png", 1000, 190, work / "chromium")
    for name in ("report.png", "dashboard.png"):
        size = (args.out / name).stat().st_size
        print(f"{args.out / name}: {size} bytes")
        if size >= LIMIT:
            print(f"make_screenshots: {name} is over {LIMIT} bytes", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
