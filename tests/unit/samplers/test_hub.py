"""The hub cache sampler reads a real folder laid out as huggingface_hub lays it out: which folder a command's
model is, what it says as the blobs grow, and that it says nothing while they stand still."""

from __future__ import annotations

from pathlib import Path

from firstlight.config import Config
from firstlight.runner.sources import Sources
from firstlight.samplers.hub import HubCacheSampler, hub_cache, hub_id, model_folder
from firstlight.timeline import HubDownload


def test_the_cache_is_the_one_huggingface_hub_uses(tmp_path: Path):
    assert hub_cache({"HF_HUB_CACHE": "/a/hub", "HF_HOME": "/b"}) == Path("/a/hub")
    assert hub_cache({"HF_HOME": "/b"}) == Path("/b/hub")
    assert hub_cache({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/hub")
    assert hub_cache({}) == Path("~/.cache/huggingface/hub").expanduser()
    assert model_folder(Path("/a/hub"), "Qwen/Qwen3-0.6B") == Path("/a/hub/models--Qwen--Qwen3-0.6B")


def test_a_hub_id_is_not_a_path(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert hub_id("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    for path in ("models/tiny", "/models/tiny", "./tiny", "~/tiny", "tiny", "a/b/c", None, ""):
        assert hub_id(path) is None, path


def test_it_says_the_first_look_then_each_growth_and_nothing_while_still(tmp_path: Path):
    folder = tmp_path / "models--org--tiny"
    s = HubCacheSampler(folder, 0.1, clock=lambda: 5.0)
    first = s.sample()  # nothing fetched yet: the baseline
    assert first == [HubDownload(5.0, str(folder), 0, 0, 0, "")]
    assert s.sample() == [] and not s.moved
    part = folder / "blobs" / "abc.incomplete"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"\0" * 1000)
    (folder / "blobs" / "done").write_bytes(b"\0" * 10)
    assert s.sample() == [HubDownload(5.0, str(folder), 1010, 1000, 1, str(part))] and s.moved
    assert s.sample() == []
    part.replace(folder / "blobs" / "abc")  # whole: renamed, the bytes the same, none still arriving
    assert s.sample() == [HubDownload(5.0, str(folder), 1010, 0, 0, "")]


def test_a_watch_of_a_hub_id_samples_its_folder_and_of_a_local_model_does_not(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cfg = Config(command=["vllm", "serve", "org/tiny"])
    sampler = Sources(cfg, lambda o: None, lambda a, b: None, identify=False).hub_sampler()
    assert isinstance(sampler, HubCacheSampler)
    assert sampler.folder == tmp_path / "hub" / "models--org--tiny"
    cfg = Config(command=["vllm", "serve", "org/tiny", "--download-dir", str(tmp_path / "dl")])
    sampler = Sources(cfg, lambda o: None, lambda a, b: None, identify=False).hub_sampler()
    assert isinstance(sampler, HubCacheSampler) and sampler.folder == tmp_path / "dl" / "models--org--tiny"
    (tmp_path / "weights").mkdir()
    cfg = Config(command=["vllm", "serve", str(tmp_path / "weights")])
    assert Sources(cfg, lambda o: None, lambda a, b: None, identify=False).hub_sampler() is None
