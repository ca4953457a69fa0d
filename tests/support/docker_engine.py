"""The Docker engine's side of the real ``docker`` CLI, on a unix socket (``DOCKER_HOST=unix://PATH``): no Docker
engine runs on these machines, its client does. It answers what the CLI asks for ``container inspect`` and
``stop`` and ``logs --follow`` as the Engine API documents it (``/_ping``, ``GET /vX/containers/ID/json``,
``POST /vX/containers/ID/stop?t=N``, ``GET /vX/containers/ID/logs?follow=1`` in its multiplexed stream: an
8-byte header per frame, the stream and the length, each line after its RFC 3339 time and a space where
``timestamps=1``; ``GET /vX/events`` with its messages; a 404 with the engine's message for an unknown
container), with the container ``tests/fixtures/containers/docker-28.2.2-inspect-api-example.json`` holds, and
what ``docker run`` asks (``POST /containers/create``, ``/start``, ``/wait``: the container's command is then run
on the host as the engine's own child, its init); or
accepts and never answers (``hang``: a daemon that is stuck). Used by tests/unit/containers/."""

from __future__ import annotations

import contextlib
import json
import signal
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "containers" / "docker-28.2.2-inspect-api-example.json"
API_VERSION = "1.50"  # what Docker 28.2 speaks


class Engine:
    def __init__(self, socket_path: Path, hang: bool = False) -> None:
        self.socket_path, self.hang = socket_path, hang
        self.container: dict[str, Any] = json.loads(FIXTURE.read_text())[0]
        self.requests: list[tuple[str, str]] = []  # (method, path with query)
        self.release = threading.Event()  # ends a hung answer (the test's end)
        # what `logs` streams: (1 stdout | 2 stderr, the line[, the time the engine read it: RFC 3339])
        self.lines: list[tuple[int, str] | tuple[int, str, str]] = []
        self.events: list[dict[str, Any]] = []  # what `events` answers (the test's filter and window are its own)
        self.ended = threading.Event()  # the container ended: `logs --follow` ends with it
        self.stops: list[dict[str, list[str]]] = []  # each stop's query: {"t": [seconds]}
        self.created: list[dict[str, Any]] = []  # each create's body (the container's config)
        self.init_pid = 0  # the container's init once started: a real process of the test's, if set
        self.process: subprocess.Popen[bytes] | None = None  # else the one the engine started
        self.names_in_use: set[str] = set()  # names another container holds: a create naming one is refused
        self.refused: list[dict[str, Any]] = []  # the creates refused (their config)

    def start(self) -> None:
        """``start``: the container runs. Its init is ``init_pid`` when the test set one (a process of its own),
        else the created container's command, run here on the host as a process of the engine's."""
        pid = self.init_pid
        if not pid and self.created:
            config = self.created[-1]
            self.process = subprocess.Popen([*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])],
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True)
            pid = self.process.pid
        self.container["State"].update({"Status": "running", "Running": True, "Pid": pid,
                                        "StartedAt": "2026-12-04T10:00:00.000000000Z"})

    def stop(self) -> None:
        """``stop``: SIGTERM to the container's own process, waited for; the exit as the engine records it."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        code = self.process.returncode if self.process is not None else -signal.SIGTERM
        self.finish(128 - code if code < 0 else code)

    def finish(self, exit_code: int, oom_killed: bool = False) -> None:
        """The container ended, as the engine records it."""
        self.container["State"].update({"Status": "exited", "Running": False, "Pid": 0, "ExitCode": exit_code,
                                        "OOMKilled": oom_killed})
        self.ended.set()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def address_string(self) -> str:
                return "unix"

            def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Api-Version", API_VERSION)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _answer(self) -> None:
                engine.requests.append((self.command, self.path))
                if engine.hang:
                    engine.release.wait(60)
                    return
                url = urlsplit(self.path)
                parts = url.path.strip("/").split("/")
                if parts[-1] == "_ping":
                    return self._send(200, b"OK", "text/plain")
                if self.command == "GET" and parts[-1] == "events":  # with `until`: the messages, then the end
                    return self._send(200, b"".join(json.dumps(e).encode() + b"\n" for e in engine.events))
                if self.command == "POST" and parts[-2:] == ["containers", "create"]:
                    return self._create(url.query)
                if len(parts) >= 3 and parts[-3] == "containers":
                    ref, verb = parts[-2], parts[-1]
                    if ref not in (engine.container["Id"], engine.container["Name"].lstrip("/")):
                        return self._send(404, json.dumps({"message": f"No such container: {ref}"}).encode())
                    if self.command == "GET" and verb == "json":
                        return self._send(200, json.dumps(engine.container).encode())
                    if self.command == "GET" and verb == "logs":
                        return self._logs()
                    if self.command == "POST" and verb == "wait":
                        return self._wait()
                    if self.command == "POST" and verb == "start":
                        engine.start()
                        return self._send(204, b"")
                    if self.command == "POST" and verb == "stop":
                        engine.stops.append(parse_qs(url.query))
                        if engine.container["State"]["Running"]:
                            engine.stop()  # its init ends on the SIGTERM: 128 + 15
                        return self._send(204, b"")
                self._send(404, json.dumps({"message": "page not found"}).encode())

            do_GET = do_HEAD = do_POST = _answer

            def _wait(self) -> None:
                """The CLI's wait for the next exit: the engine answers at once, the body once it exited."""
                with contextlib.suppress(OSError):  # `run -d` does not stay for the body
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Api-Version", API_VERSION)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.flush()
                    engine.ended.wait(60)
                    body = {"StatusCode": engine.container["State"]["ExitCode"], "Error": None}
                    self.wfile.write(json.dumps(body).encode())
                self.close_connection = True

            def _create(self, query: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if any(n in engine.names_in_use for n in parse_qs(query).get("name", [])):
                    engine.refused.append(json.loads(body or b"{}"))
                else:
                    engine.created.append(json.loads(body or b"{}"))
                name = parse_qs(query).get("name")
                if name and name[0] in engine.names_in_use:  # as dockerd words it (409)
                    return self._send(409, json.dumps({"message": f'Conflict. The container name "/{name[0]}" is '
                                                       f'already in use by container "{engine.container["Id"]}". You '
                                                       "have to remove (or rename) that container to be able to "
                                                       "reuse that name."}).encode())
                if name:
                    engine.container["Name"] = "/" + name[0]
                engine.container["State"].update({"Status": "created", "Running": False, "Pid": 0, "ExitCode": 0,
                                                  "StartedAt": "0001-01-01T00:00:00Z"})
                self._send(201, json.dumps({"Id": engine.container["Id"], "Warnings": []}).encode())

            def _logs(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.docker.multiplexed-stream")
                self.send_header("Api-Version", API_VERSION)
                self.send_header("Connection", "close")
                self.end_headers()
                stamped = parse_qs(urlsplit(self.path).query).get("timestamps") in (["1"], ["true"])
                for stream, line, *at in engine.lines:
                    data = ((f"{at[0] if at else '2026-12-04T10:00:01.000000000Z'} " if stamped else "")
                            + line + "\n").encode()
                    self.wfile.write(bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data)
                self.wfile.flush()
                engine.ended.wait(60)  # --follow: open until the container ends
                self.close_connection = True

        return Handler



class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextlib.contextmanager
def docker_engine(socket_path: Path, hang: bool = False) -> Iterator[Engine]:
    """The engine on ``socket_path`` while the block runs."""
    engine = Engine(socket_path, hang)
    server = _Server(str(socket_path), engine.handler())
    thread = threading.Thread(target=server.serve_forever, name="docker-engine", daemon=True)
    thread.start()
    try:
        yield engine
    finally:
        if engine.process is not None:  # the container's process the engine ran: never left behind
            engine.process.kill()
            engine.process.wait(30)
        engine.release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
        socket_path.unlink(missing_ok=True)  # a unix socket's file outlives its server
