"""Headless Chromium for the report and event-stream tests: the DOM a browser builds from a page, a screenshot of
it, and what a page's ``EventSource`` receives.

Debian's ``chromium`` (installed by scripts/test.sh). Outside CI a missing browser skips the test with the
reason; under CI it fails it. Every call has a timeout; the browser gets a private profile directory and no
network features, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Callable
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--disable-extensions", "--disable-dev-shm-usage"]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    why = "chromium is not installed (scripts/test.sh installs Debian's chromium package)"
    if in_ci():
        pytest.fail(f"in CI the browser must be there: {why}")
    pytest.skip(why)


def _run(args: list[str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="firstlight-chromium-") as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def dump_dom(page: Path) -> str:
    p = _run(["--dump-dom", page.resolve().as_uri()])
    assert p.returncode == 0 and "<html" in p.stdout, p.stderr[-2000:]
    return p.stdout


def screenshot(page: Path, png: Path, width: int = 1100, height: int = 1400) -> bytes:
    p = _run([f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri()])
    assert p.returncode == 0 and png.exists(), p.stderr[-2000:]
    return png.read_bytes()


class Element:
    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text = ""

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()


class DomParser(HTMLParser):
    """Every element of a serialised DOM, in document order, with the text inside it."""

    VOID: ClassVar[set[str]] = {"meta", "br", "img", "input", "link", "hr", "area", "base", "col", "embed",
                                "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, dict(attrs))
        self.elements.append(el)
        if tag not in self.VOID:
            self._open.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                break

    def handle_data(self, data: str) -> None:
        for el in self._open:
            el.text += data


def parse_dom(text: str) -> DomParser:
    p = DomParser()
    p.feed(text)
    return p


def png_colours(data: bytes) -> int:
    """How many distinct pixel values a PNG holds (8-bit RGB/RGBA, non-interlaced: what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos: pos + 8])
        chunk = data[pos + 8: pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    seen: set[bytes] = set()
    for y in range(height):
        line = raw[y * (stride + 1): (y + 1) * (stride + 1)]
        ftype, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            a = cur[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if ftype == 1:
                cur[i] = (cur[i] + a) & 0xFF
            elif ftype == 2:
                cur[i] = (cur[i] + b) & 0xFF
            elif ftype == 3:
                cur[i] = (cur[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        if y % 8 == 0:  # every 8th row is plenty to tell a page from a blank
            seen.update(bytes(cur[i: i + channels]) for i in range(0, stride, channels * 4))
        prev = cur
    return len(seen)


# -- a page that follows an event stream ---------------------------------------------------------------------
FOLLOW_PAGE = """<!doctype html><html><head><title>events</title></head><body><ul id="log"></ul><script>
const seen = [];
const es = new EventSource(%(url)s);
es.onopen = () => { if (!window.opened) { window.opened = true; fetch("/open", {method: "POST", body: ""}); } };
es.onmessage = (m) => {
  const e = JSON.parse(m.data);
  seen.push({id: Number(m.lastEventId), event: e.event, message: e.message || e.verdict || "", t: e.t,
             at: Date.now() / 1000});
  const li = document.createElement("li");
  li.textContent = e.event + " " + (e.message || e.verdict || "");
  document.getElementById("log").appendChild(li);
  if (e.event === "summary") { es.close(); fetch("/done", {method: "POST", body: JSON.stringify(seen)}); }
};
</script><iframe src="/hold"></iframe></body></html>"""


def follow_events(events_url: str, timeout: float = 90, on_open: Callable[[], None] = lambda: None
                  ) -> tuple[list[dict[str, Any]], str]:
    """What a real browser's ``EventSource`` receives from ``events_url`` until a ``summary`` event: each event's
    id, type, message, its ``t`` and the browser's clock when it arrived; and the DOM the page built.
    ``on_open`` runs once the browser's stream is open (the page says so), e.g. to start what it is to follow.

    The page comes from a server on its own loopback port (another origin, as a dashboard would be). Headless
    Chromium dumps the DOM at the page's load event, which waits for an iframe that this server holds until the
    page has posted what it received (or ``timeout``), so no sleep decides when the browser is done."""
    done, got = threading.Event(), {}
    page = (FOLLOW_PAGE % {"url": json.dumps(events_url)}).encode()

    class Page(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, body: bytes, kind: str = "text/html") -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/hold":
                done.wait(timeout)
                self._answer(b"<p>released</p>")
            else:
                self._answer(page)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/open":
                self._answer(b"", "text/plain")
                on_open()
                return
            got["seen"] = json.loads(body)
            done.set()
            self._answer(b"", "text/plain")

    host = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    host.daemon_threads = True
    threading.Thread(target=host.serve_forever, daemon=True).start()
    try:
        p = _run(["--dump-dom", f"http://127.0.0.1:{host.server_address[1]}/"], timeout=timeout + 30)
    finally:
        host.shutdown()
        host.server_close()
    assert p.returncode == 0 and done.is_set(), (p.returncode, p.stderr[-2000:])
    return got["seen"], p.stdout
