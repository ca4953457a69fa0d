"""Every HTTP request firstlight makes goes through ``firstlight.wire`` (its deadline, its cap, its one error type):
no module outside it opens an HTTP client of its own. Read from the source, as tests/unit/test_layers.py reads the
imports."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.common import REPO

PACKAGE = REPO / "firstlight"
CLIENTS = {"httpx.Client", "httpx.AsyncClient", "httpx.get", "httpx.post", "httpx.stream", "httpx.request",
           "urllib.request.urlopen", "urlopen", "http.client.HTTPConnection", "HTTPConnection", "requests.get",
           "requests.post", "requests.Session"}


def _clients(path: Path, root: Path = REPO) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in CLIENTS:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node.func)}")
        if isinstance(node, ast.ImportFrom) and node.module in ("urllib.request", "http.client", "requests"):
            found.append(f"{path.relative_to(root)}:{node.lineno}: from {node.module}")
    return found


def test_no_http_client_outside_the_wire():
    wire = PACKAGE / "wire"
    outside = [c for p in sorted(PACKAGE.rglob("*.py")) if wire not in p.parents for c in _clients(p)]
    assert outside == [], "ask through firstlight.wire (Wire, AsyncWire)"


def test_the_check_sees_a_client_of_its_own(tmp_path: Path):
    probe = tmp_path / "m.py"
    probe.write_text("import httpx\nfrom urllib.request import urlopen\n\n"
                     "def f():\n    with httpx.Client(trust_env=False) as c:\n        c.get('/')\n")
    assert sorted(c.split(": ", 1)[1] for c in _clients(probe, tmp_path)) == ["from urllib.request", "httpx.Client"]
