"""Helpers shared by tests/e2e/report/test_dashboard.py, tests/unit/report/test_dashboard.py."""

from __future__ import annotations

import io

from rich.console import Console

from firstlight.report.dashboard import DashboardState, render


def draw(state: DashboardState, width: int = 100, height: int = 30) -> str:
    console = Console(record=True, width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor")
    console.print(render(state, width))
    return console.export_text()
