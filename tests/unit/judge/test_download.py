"""The download phase: the model's hub cache growing is strong progress (never hung while bytes arrive, hung once
none arrive for the stall timeout, the evidence naming the file), it enters ``download`` (or renames the load that
has not begun yet), and the progress carries the download's bytes, rate and fraction. Pure: observations in."""

from __future__ import annotations

from firstlight.config import JudgeConfig
from firstlight.engines import get_profile
from firstlight.judge import Judge
from firstlight.timeline import HubDownload, LogLine, Started
from tests.support.judge import T0, proc

SGLANG = get_profile("sglang")
VLLM = get_profile("vllm")
RULES = JudgeConfig(timeout=600, stall_timeout=10, spin_timeout=900)
FOLDER = "/cache/hub/models--org--tiny"
PART = f"{FOLDER}/blobs/0a07e539.incomplete"


def _judge(profile=SGLANG) -> Judge:
    j = Judge(RULES, profile, T0)
    j.feed(Started(T0, 100, "http://x", profile.name, True))
    return j


def _hub(t: float, arrived: int, incomplete: bool = True) -> HubDownload:
    return HubDownload(T0 + t, FOLDER, arrived, arrived if incomplete else 0, int(incomplete),
                       PART if incomplete else "")


def _line(t: float, text: str, n: int) -> LogLine:
    return LogLine(T0 + t, text, "stderr", n)


def test_bytes_arriving_keep_a_silent_start_from_hung_and_their_stop_makes_it_hung_naming_the_file():
    j = _judge()
    j.feed(proc(0.5))
    j.feed(_hub(1, 0))  # the first look: what was cached before (nothing)
    for i in range(2, 60, 5):  # 58 s of silence but for the hub cache growing: a slow download
        j.feed(_hub(i, i << 20))
        assert j.assess(T0 + i + 4).verdict == "starting"
    a = j.assess(T0 + 57 + 9)
    assert a.verdict == "starting" and a.phase == "download"
    a = j.assess(T0 + 57 + 10)  # no byte for the stall timeout: hung, in the download, the file named
    assert a.verdict == "hung" and a.phase == "download"
    assert a.evidence[0].signal == "hub_cache" and PART in a.evidence[0].value, a.evidence
    assert a.hint is not None and "downloading the weights" in a.hint


def test_the_first_look_is_the_baseline_not_progress():
    j = _judge()
    j.feed(proc(0.5))
    j.feed(_hub(1, 500 << 20, incomplete=False))  # a model cached before the start: no download
    assert j.phases.current.name == "process_start"
    assert j.marks.last_strong.signal != "hub_cache"
    assert j.assess(T0 + 11).verdict == "hung"  # nothing else moved for the stall timeout


def test_progress_carries_the_downloads_bytes_rate_and_the_bars_fraction():
    j = _judge()
    j.feed(_hub(0, 0))
    j.feed(_hub(2, 4 << 20))
    j.feed(_hub(4, 8 << 20))
    j.feed(_line(4.1, "model.safetensors:  45%|####      | 1.9M/4.2M [00:01<00:01, 1.00MB/s]", 1))
    p = j.assess(T0 + 4.2).progress
    assert p.download_bytes == 8 << 20 and p.download_file == PART
    assert p.download_rate == (8 << 20) / 4
    assert p.download_fraction == 0.45


def test_a_download_inside_a_load_that_has_not_begun_renames_it():
    j = _judge(VLLM)
    j.feed(_line(1, "INFO 05-10 16:00:15 [gpu_model_runner.py:1] Starting to load model org/tiny...", 1))
    assert j.phases.current.name == "weights_loading"
    j.feed(_hub(2, 0))
    j.feed(_hub(3, 1 << 20))
    assert [s.name for s in j.phases.spans] == ["process_start", "download"]
    assert j.phases.current.start == T0 + 1  # the span the load line began is the download's
    j.feed(_line(9, "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]", 2))
    assert [s.name for s in j.phases.spans] == ["process_start", "download", "weights_loading"]


def test_bytes_after_the_load_showed_progress_do_not_move_it_back():
    j = _judge(VLLM)
    j.feed(_line(1, "Starting to load model org/tiny...", 1))
    j.feed(_line(2, "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01, 1.00it/s]", 2))
    j.feed(_hub(3, 0))
    j.feed(_hub(4, 1 << 20))  # a drafter's fetch, say: progress, but the load is under way
    assert [s.name for s in j.phases.spans] == ["process_start", "weights_loading"]
    assert j.marks.last_strong.signal == "hub_cache"


def test_vllms_download_line_renames_the_load_in_replay_too():
    from firstlight.logreplay import replay_lines

    rep = replay_lines([
        "INFO 03-22 12:15:20 [gpu_model_runner.py:1] Starting to load model "
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B...",
        "INFO 03-22 12:15:21 [weight_utils.py:257] Using model weights format ['*.safetensors']",
        "INFO 03-22 12:23:49 [weight_utils.py:273] Time spent downloading weights for "
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B: 508.576789 seconds",
        "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
    ], engine="vllm")
    assert [(p["name"], p["line"]) for p in rep.phases] == [("download", 1), ("weights_loading", 4)], rep.phases
