"""A new engine is one profile in one place: registered here, it is identified by its endpoints (a real HTTP server
on loopback answering the path it declares, through the identification probe and ``firstlight bench``'s
detection), by its log lines and its command (a container image included), and chosen by ``--engine NAME``; taken
away, none of that knows it any more."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from click.testing import CliRunner

from firstlight.bench import detect_engine
from firstlight.cli.app import cli
from firstlight.engines import (
    EndpointRule,
    Endpoints,
    EngineProfile,
    ImageEntrypoint,
    JsonValue,
    PhaseMarker,
    detect_from_endpoint,
    detect_from_lines,
    detection_paths,
    read_command,
    register_profile,
    unregister_profile,
)
from firstlight.probes.identify import identify_engine
from firstlight.wire import Wire
from tests.support.faults import serving

# The whole of the new engine: this one object.
TOY = EngineProfile(
    name="toyllm",
    display_name="Toy LLM",
    default_port=7070,
    command_patterns=(r"(?:^|[\s/])toyllm-serve\b",),
    endpoints=Endpoints(health="/healthz", models="/v1/models"),
    endpoint_rules=(EndpointRule("/toy/status", status=(200,), json=(JsonValue("server", "toyllm"),)),),
    images=(ImageEntrypoint(r"(?:^|/)toy/toyllm(?::|@|$)", ("toyllm-serve",)),),
    ignore_eos=True,
    phase_markers=(PhaseMarker(r"^toyllm: loading weights", "weights_loading"),),
    ready_markers=(r"^toyllm: ready to serve$",),
    detect_patterns=((r"^toyllm: ", 4),),
)
LOG = ["toyllm: starting 1.0", "toyllm: loading weights", "toyllm: ready to serve"]


class _ToyServer(BaseHTTPRequestHandler):
    """Answers its declared path as the toy engine does; every other path is 404, as a real server's would be."""

    def do_GET(self) -> None:
        known = self.path == "/toy/status"
        body = json.dumps({"server": "toyllm", "version": "1.0"} if known else {"detail": "Not Found"}).encode()
        self.send_response(200 if known else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def toy() -> Iterator[EngineProfile]:
    register_profile(TOY)
    try:
        yield TOY
    finally:
        unregister_profile(TOY.name)


def test_a_registered_profile_is_identified_by_the_endpoint_it_declares(toy: EngineProfile) -> None:
    assert "/toy/status" in detection_paths()
    with serving(_ToyServer) as url:
        with Wire(url, connect_timeout=1.0) as wire:
            assert identify_engine(wire, budget_s=5.0) == ("toyllm", "GET /toy/status -> 200")
        assert detect_engine(url, timeout=5.0) == "toyllm"  # firstlight bench's detection
    assert detect_from_endpoint("/toy/status", 200, json.dumps({"server": "other"})) is None


def test_a_registered_profile_is_identified_by_its_lines_and_its_command(toy: EngineProfile) -> None:
    assert detect_from_lines(LOG) == "toyllm"
    assert read_command(["toyllm-serve", "--port", "7071"]).engine == "toyllm"
    in_image = read_command(["docker", "run", "--rm", "-p", "7070:7070", "toy/toyllm:1.0", "--port", "7070"])
    assert (in_image.engine, in_image.server, in_image.image) == (
        "toyllm", ("toyllm-serve", "--port", "7070"), "toy/toyllm:1.0")


def test_a_registered_profile_is_chosen_by_engine_name(toy: EngineProfile, tmp_path: Path) -> None:
    log = tmp_path / "toy.log"
    log.write_text("\n".join(["starting", "loading weights", "ready to serve"]) + "\n")
    named = CliRunner().invoke(cli, ["replay", str(log), "--engine", "toyllm", "--json"])
    assert named.exit_code == 3, named.output  # the plain lines are no engine's without --engine: incomplete
    assert json.loads(named.output)["engine"] == "toyllm"
    log.write_text("\n".join(LOG) + "\n")
    detected = CliRunner().invoke(cli, ["replay", str(log), "--json"])
    assert detected.exit_code == 0 and json.loads(detected.output)["engine"] == "toyllm", detected.output
    assert "toyllm" in CliRunner().invoke(cli, ["replay", "--help"]).output


def test_a_profile_taken_away_is_known_no_more(tmp_path: Path) -> None:
    register_profile(TOY)
    unregister_profile(TOY.name)
    assert "/toy/status" not in detection_paths()
    assert detect_from_endpoint("/toy/status", 200, json.dumps({"server": "toyllm"})) is None
    assert detect_from_lines(LOG) is None
    log = tmp_path / "toy.log"
    log.write_text("\n".join(LOG) + "\n")
    refused = CliRunner().invoke(cli, ["replay", str(log), "--engine", "toyllm"])
    assert refused.exit_code != 0 and "--engine toyllm: give one of" in refused.output
    assert "toyllm" not in CliRunner().invoke(cli, ["replay", "--help"]).output
