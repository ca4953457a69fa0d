"""`firstlight up` of a start that downloads its weights, end to end: the simulated server fetches a hub model into
a real hub cache (``$HF_HUB_CACHE``: a ``blobs/*.incomplete`` file that grows, as huggingface_hub writes it) and then
loads it. The phase ``download`` with its progress, then ``weights_loading``, then READY; a download whose bytes
stop is ``hung`` in it, the file named; a slow one whose bytes keep coming, with the same short stall timeout and
not a line printed meanwhile, is not."""

from __future__ import annotations

from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]
REPO = "sim-org/tiny-model"


def _env(tmp_path: Path) -> dict[str, str]:
    return {"HF_HUB_CACHE": str(tmp_path / "hub")}


def test_a_download_is_its_own_phase_with_its_progress_then_the_load_then_ready(tmp_path: Path):
    r = run_firstlight("up", "--json", "--stop-when-ready", *FAST, "--",
                       *sim_cmd("download", free_port(), "--model-path", REPO, "--download-seconds", "3"),
                       env=_env(tmp_path))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    names = [p["name"] for p in s["phases"]]
    assert s["verdict"] == "ready" and names.index("download") < names.index("weights_loading"), names
    statuses = [e for e in r.events if e["event"] == "status" and e["phase"] == "download"]
    assert any((e["download_bytes"] or 0) > 0 and e["download_rate"] for e in statuses), statuses
    assert any(e["download_fraction"] is not None for e in statuses), statuses
    assert any(e["download_file"] and e["download_file"].endswith(".incomplete") for e in statuses), statuses
    blobs = tmp_path / "hub" / "models--sim-org--tiny-model" / "blobs"
    assert [p.suffix for p in blobs.iterdir()] == [""]  # fetched whole, then loaded
    assert s["start_type"]["type"].startswith("downloaded"), s["start_type"]


def test_bytes_that_stop_arriving_are_hung_in_the_download_naming_the_file(tmp_path: Path):
    r = run_firstlight("up", "--json", "--stall-timeout", "2", *FAST, "--",
                       *sim_cmd("download_stall", free_port(), "--model-path", REPO, "--download-seconds", "2"),
                       env=_env(tmp_path))
    assert r.rc == 2, r.stderr[-3000:]
    s = r.summary
    assert (s["verdict"], s["phase"]) == ("hung", "download"), s["evidence"]
    first = s["evidence"][0]
    assert first["signal"] == "hub_cache", s["evidence"]
    assert str(tmp_path / "hub" / "models--sim-org--tiny-model" / "blobs") in first["value"]
    assert ".incomplete" in first["value"]
    assert "downloading the weights" in s["hint"]


def test_a_slow_download_whose_bytes_keep_coming_is_not_hung(tmp_path: Path):
    # 8 s of download, a few hundred kB every 0.4 s and not one line: longer than the 2 s stall timeout four times
    r = run_firstlight("up", "--json", "--stop-when-ready", "--stall-timeout", "2", *FAST, "--",
                       *sim_cmd("download_quiet", free_port(), "--model-path", REPO, "--download-seconds", "8"),
                       env=_env(tmp_path))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    spans = {p["name"]: p for p in s["phases"]}
    assert s["verdict"] == "ready" and "download" in spans and "weights_loading" in spans, s["phases"]
    assert spans["weights_loading"]["start"] - spans["download"]["start"] >= 7.0, s["phases"]
