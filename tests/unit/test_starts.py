"""Start types from evidence (``firstlight.starts``): each label, its threshold and its evidence, fed through a
Judge as a live start or a replay would feed it (the engine's real lines: vLLM's compile-cache and version lines,
SGLang's remote-instance loader, llama.cpp's build line)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from firstlight.anatomy import RESIDENT_WARM, anatomy
from firstlight.config import JudgeConfig
from firstlight.engines import get_profile
from firstlight.judge import Judge
from firstlight.report.anatomy_text import describe
from firstlight.starts import ORDER, PEER_LOAD_FORMATS, RESTORED_MAX_LINES, RESTORED_MAX_S, classify, predicted_type
from firstlight.timeline import LogLine, Started, WeightsTotal
from tests.support.common import REPO

T0 = 1_000_000.0
# vllm/v1/engine/core.py wake_up, as a Dynamo shadow-engine benchmark quotes it
WAKE = "It took 0.273367 seconds to wake up tags {'weights', 'kv_cache'}."
GB = 1_000_000_000
VLLM = "INFO 12-01 10:00:00 [x.py:1] "


def _judge(engine: str = "vllm", resident: int | None = None) -> Judge:
    j = Judge(JudgeConfig(), get_profile(engine), T0)
    j.feed(Started(T0, pid=1, launched=True))
    if resident is not None:
        j.feed(WeightsTotal(T0 + 0.1, 4 * GB, 2, "/models/m", resident, "ext4"))
    return j


def _kind(j: Judge, cold_start_s: float | None = 60.0, ready: bool = True,
          command: list[str] | None = None) -> dict[str, Any]:
    anat = anatomy(j.phases.dicts(), j.signals, T0 + 100)
    return classify(phases=[p["name"] for p in j.phases.dicts()], signals=j.signals, anatomy=anat,
                    log_lines=j.log.count, cold_start_s=cold_start_s, ready=ready, command=command,
                    attach=j.profile.flags.attach)


def test_the_thresholds_are_pinned():
    assert (RESIDENT_WARM, RESTORED_MAX_S, RESTORED_MAX_LINES) == (0.9, 10.0, 20)


@pytest.mark.parametrize(("share", "label"), [(0.9, "warm_page_cache"), (0.89, "cold"), (0.0, "cold")])
def test_the_page_cache_at_start_makes_a_start_warm_from_90_percent(share: float, label: str):
    j = _judge(resident=int(4 * GB * share))
    j.feed(LogLine(T0 + 1, VLLM + "Starting to load model /models/m..."))
    k = _kind(j)
    assert k["type"] == label
    assert k["evidence"][label][0]["signal"] == "page_cache" and f"{share:.0%}" in k["evidence"][label][0]["value"]


def test_a_compile_cache_hit_is_combined_with_the_page_cache_and_carries_the_engines_line():
    j = _judge(resident=4 * GB)
    j.feed(LogLine(T0 + 1, VLLM + "Starting to load model /models/m..."))
    line = "Directly load the compiled graph(s) for dynamic shape from the cache, took 0.4 s"
    j.feed(LogLine(T0 + 2, VLLM + line))
    j.feed(LogLine(T0 + 3, VLLM + "Available KV cache memory: 1.00 GiB"))
    k = _kind(j)
    assert k["type"] == "warm_page_cache+compile_cache_hit"
    assert line in k["evidence"]["compile_cache_hit"][0]["value"]
    assert (describe(k) or "").startswith("start type: warm_page_cache+compile_cache_hit (")


def test_a_compiling_vllm_is_a_compile_cache_miss():
    j = _judge(resident=0)
    j.feed(LogLine(T0 + 1, VLLM + "Compiling a graph for dynamic shape takes 20.1 s"))
    j.feed(LogLine(T0 + 2, VLLM + "Available KV cache memory: 1.00 GiB"))
    assert _kind(j)["type"] == "cold+compile_cache_miss"


def test_sglangs_remote_instance_loader_line_is_peer_loaded_whatever_the_page_cache():
    j = _judge("sglang", resident=0)
    j.feed(LogLine(T0 + 1, "[2026-04-01 10:00:00] Loading weights from remote instance ..."))
    k = _kind(j)
    assert k["type"] == "peer_loaded" and "remote instance" in k["evidence"]["peer_loaded"][0]["value"]


def test_the_command_asking_for_a_peer_load_is_evidence_too():
    k = _kind(_judge("sglang"), command=["python", "-m", "sglang.launch_server", "--load-format", "remote_instance"])
    assert k["labels"] == ["peer_loaded"] and k["evidence"]["peer_loaded"][0]["signal"] == "command"


@pytest.mark.parametrize(("cold", "lines", "restored"), [(10.0, 20, True), (10.1, 0, False), (1.0, 21, False)])
def test_a_fast_silent_start_is_restored_within_10_s_and_20_lines(cold: float, lines: int, restored: bool):
    j = _judge()
    for i in range(lines):
        j.feed(LogLine(T0 + 0.01 * i, f"banner {i}"))
    assert ("restored" in _kind(j, cold_start_s=cold)["labels"]) is restored


def test_a_start_with_a_load_phase_or_not_ready_is_never_restored():
    j = _judge()
    j.feed(LogLine(T0 + 0.5, VLLM + "Starting to load model /models/m..."))
    assert "restored" not in _kind(j, cold_start_s=1.0)["labels"]
    assert "restored" not in _kind(_judge(), cold_start_s=1.0, ready=False)["labels"]


def test_nothing_known_is_no_type():
    k = _kind(_judge())
    assert k == {"type": None, "labels": [], "evidence": {}} and describe(k) is None


@pytest.mark.parametrize(("engine", "line", "version"), [
    ("vllm", VLLM + "vLLM API server version 0.11.0", "0.11.0"),
    ("llamacpp", "build: 4205 (c6bc7395) with Apple clang version 16.0.0 for arm64-apple-darwin23.6.0",
     "4205 (c6bc7395)"),
])
def test_the_engine_version_is_read_from_its_own_line(engine: str, line: str, version: str):
    j = _judge(engine)
    j.feed(LogLine(T0 + 0.1, line))
    assert j.signals.engine_version == (T0 + 0.1, version)


def _docs_peer_formats() -> set[str]:
    """The load formats docs/history.md names in its peer_loaded row (`--load-format A` / `B`)."""
    row = next(line for line in (REPO / "docs" / "history.md").read_text().splitlines()
               if line.startswith("| `peer_loaded` |"))
    said = row.partition("`--load-format ")[2].partition(")")[0]  # "remote_instance` / `mx`"
    return set(re.findall(r"[\w-]+", said))


def test_the_docs_name_every_peer_load_format_the_code_knows():
    assert _docs_peer_formats() == set(PEER_LOAD_FORMATS)


@pytest.mark.parametrize("spelling", ["space", "equals"])
@pytest.mark.parametrize("fmt", sorted(PEER_LOAD_FORMATS))
def test_every_peer_load_format_in_the_command_is_peer_loading(fmt: str, spelling: str):
    # ModelExpress (`mx`) is a peer load as SGLang's R-Fork (`remote_instance`) is, whatever the page cache says
    flag = ["--load-format", fmt] if spelling == "space" else [f"--load-format={fmt}"]
    k = _kind(_judge("sglang", resident=4 * GB), command=["python", "-m", "sglang.launch_server", *flag])
    assert k["labels"][0] == "peer_loaded" and k["type"].startswith("peer_loaded")
    assert k["evidence"]["peer_loaded"] == [{"signal": "command", "value": f"--load-format {fmt}", "since": None}]


@pytest.mark.parametrize("fmt", ["auto", "safetensors", "dummy", "remote", "mx-like"])
def test_a_load_format_that_is_not_a_peer_load_is_not_peer_loading(fmt: str):
    k = _kind(_judge("sglang"), command=["python", "-m", "sglang.launch_server", "--load-format", fmt])
    assert "peer_loaded" not in k["labels"]


def _docs_labels() -> list[str]:
    """The labels of docs/history.md's start-type table, in its order (`warm_page_cache` / `cold` is two)."""
    text = (REPO / "docs" / "history.md").read_text()
    table = text.partition("## Start types")[2].partition("\n\n| label |")[2].partition("\n\n")[0]
    return [label for row in table.splitlines()[2:] for label in re.findall(r"`(\w+)`", row.split("|")[1])]


def test_the_docs_table_names_every_start_label_in_the_order_a_type_joins_them():
    assert _docs_labels() == list(ORDER)


def _evidence_for(label: str) -> dict[str, Any]:
    """A start with the evidence of ``label`` only (and what its rule needs beside it)."""
    if label == "peer_loaded":
        return _kind(_judge("sglang"), command=["sglang", "--load-format", "mx"])
    if label == "attached":
        return _kind(_judge("sglang"), command=["sglang", "--weight-cache-mode", "client"])
    if label == "woken":
        j = _judge()
        j.feed(LogLine(T0 + 1, VLLM + WAKE))
        return _kind(j)
    if label == "downloaded":
        j = _judge()
        j.feed(LogLine(T0 + 1, "Fetching 4 files:  50%|█████     | 2/4 [00:10<00:10,  5.00s/it]"))
        return _kind(j)
    if label == "restored":
        return _kind(_judge(), cold_start_s=1.0)
    if label in ("warm_page_cache", "cold"):
        return _kind(_judge(resident=4 * GB if label == "warm_page_cache" else 0))
    j = _judge()
    j.feed(LogLine(T0 + 1, VLLM + ("Directly load the compiled graph(s) for dynamic shape from the cache, took 3 s"
                                   if label == "compile_cache_hit" else
                                   "Compiling a graph for dynamic shape takes 20.1 s")))
    return _kind(j)


@pytest.mark.parametrize("label", ORDER)
def test_every_start_label_is_given_on_its_own_evidence_and_named_in_the_line(label: str):
    k = _evidence_for(label)
    assert label in k["labels"] and k["evidence"][label], k
    assert k["type"] == "+".join(x for x in ORDER if x in k["labels"])  # joined in the stated order
    line = describe(k)
    assert line is not None and line.startswith(f"start type: {k['type']} (")


# -- each label's evidence, word for word (what the summary and the console show) --------------------------------
EVIDENCE = {
    "peer_loaded": [{"signal": "command", "value": "--load-format mx", "since": None}],
    "attached": [{"signal": "command", "value": "--weight-cache-mode client", "since": None}],
    "woken": [{"signal": "log", "value": WAKE, "since": T0 + 1}],  # the line as cleaned of its logger's prefix
    "downloaded": [{"signal": "log", "value": "1 download progress lines", "since": T0 + 1}],
    "restored": [
        {"signal": "phases", "value": "no load, compile or graph phase seen (process_start)", "since": None},
        {"signal": "log", "value": "0 log lines before READY (at most 20)", "since": None},
        {"signal": "ready", "value": "READY 1.0s after the start (at most 10s)", "since": None}],
    "warm_page_cache": [{"signal": "page_cache", "value": "100% of the weights resident at start (at least 90%)",
                         "since": None}],
    "cold": [{"signal": "page_cache", "value": "0% of the weights resident at start (under 90%)", "since": None}],
    "compile_cache_hit": [{"signal": "log", "value": VLLM + "Directly load the compiled graph(s) for dynamic shape "
                                                            "from the cache, took 3 s", "since": T0 + 1}],
    "compile_cache_miss": [{"signal": "log", "value": VLLM + "Compiling a graph for dynamic shape takes 20.1 s",
                            "since": T0 + 1}],
}


@pytest.mark.parametrize("label", ORDER)
def test_each_start_labels_evidence_says_what_was_seen_and_the_line_shows_its_first(label: str):
    k = _evidence_for(label)
    assert k["evidence"] == {label: EVIDENCE[label]}
    first = EVIDENCE[label][0]
    assert describe(k) == f"start type: {label} ({first['signal']}: {first['value']})"


def test_a_peer_load_the_engine_said_and_the_command_asked_carries_both_the_line_first():
    j = _judge("sglang", resident=0)
    j.feed(LogLine(T0 + 1, "[2026-04-01 10:00:00] Loading weights from remote instance ..."))
    k = _kind(j, cold_start_s=1.0, command=["sglang", "--load-format", "remote_instance"])
    assert k["labels"] == ["peer_loaded"]  # fast and silent, but its weights came from a peer: not restored
    assert k["evidence"]["peer_loaded"] == [
        {"signal": "log", "value": "Loading weights from remote instance ...", "since": T0 + 1},
        {"signal": "command", "value": "--load-format remote_instance", "since": None}]
    assert describe(k) == "start type: peer_loaded (log: Loading weights from remote instance ...)"


def test_a_peer_load_asked_by_the_command_alone_is_never_also_restored():
    k = _kind(_judge("sglang"), cold_start_s=1.0, command=["sglang", "--load-format", "mx"])
    assert k["labels"] == ["peer_loaded"]


def test_the_compile_cache_keeps_its_first_two_lines_else_says_the_state():
    j = _judge(resident=4 * GB)
    for i in range(3):
        j.feed(LogLine(T0 + 1 + i, VLLM + f"Compiling a graph for dynamic shape takes {i}.5 s"))
    k = _kind(j)
    assert k["type"] == "warm_page_cache+compile_cache_miss"
    assert [e["since"] for e in k["evidence"]["compile_cache_miss"]] == [T0 + 1, T0 + 2]
    assert describe(k) == ("start type: warm_page_cache+compile_cache_miss (page_cache: 100% of the weights resident "
                           f"at start (at least 90%); log: {VLLM}Compiling a graph for dynamic shape takes 0.5 s)")
    bare = classify(phases=[], signals=_judge().signals, anatomy={"cache": {"compile_cache": "hit"}}, log_lines=50,
                    cold_start_s=60.0, ready=True)
    assert bare["evidence"] == {"compile_cache_hit": [{"signal": "log", "value": "compile cache hit", "since": None}]}


@pytest.mark.parametrize(("phases", "said"), [([], "none"), (["process_start", "http_listening"],
                                                              "process_start, http_listening")])
def test_a_restored_start_names_the_phases_it_went_through(phases: list[str], said: str):
    k = classify(phases=phases, signals=_judge().signals, anatomy=None, log_lines=3, cold_start_s=2.0, ready=True)
    assert k["evidence"]["restored"][0] == {"signal": "phases", "since": None,
                                            "value": f"no load, compile or graph phase seen ({said})"}
    assert k["evidence"]["restored"][1]["value"] == "3 log lines before READY (at most 20)"


@pytest.mark.parametrize("start_type", [{"type": "cold", "evidence": {}},  # no labels (an older or damaged row)
                                        {"type": "cold", "labels": ["cold"], "evidence": {}}])  # a label without any
def test_a_start_type_without_its_labels_or_evidence_is_still_one_line(start_type: dict[str, Any]):
    assert describe(start_type) == "start type: cold ()"


@pytest.mark.parametrize(("engine", "command"), [
    ("vllm", ["vllm", "serve", "/m", "--load-format", "ipc_cache"]),
    ("vllm", ["vllm", "serve", "/m", "--load-format=ipc_cache"]),
    ("sglang", ["python", "-m", "sglang.launch_server", "--weight-cache-mode", "client"]),
])
def test_every_engines_attach_flag_is_an_attached_start_whatever_the_page_cache(engine: str, command: list[str]):
    k = _kind(_judge(engine, resident=4 * GB), command=command)
    assert k["labels"] == ["attached"] and k["evidence"]["attached"][0]["signal"] == "command", k
    assert predicted_type(None, command, get_profile(engine).flags.attach) == "attached"


@pytest.mark.parametrize(("engine", "command"), [
    ("vllm", ["vllm", "serve", "/m", "--load-format", "safetensors"]),
    ("sglang", ["python", "-m", "sglang.launch_server", "--weight-cache-mode", "server"]),
    ("vllm", ["python", "-m", "sglang.launch_server", "--weight-cache-mode", "client"]),  # another engine's flag
])
def test_other_values_or_another_engines_flag_are_not_attached(engine: str, command: list[str]):
    assert "attached" not in _kind(_judge(engine), command=command)["labels"]
    assert predicted_type(None, command, get_profile(engine).flags.attach) is None


def test_every_engine_that_names_an_attach_flag_is_in_the_docs():
    row = next(line for line in (REPO / "docs" / "history.md").read_text().splitlines()
               if line.startswith("| `attached` |"))
    for name in ("vllm", "sglang"):
        for flag, value in get_profile(name).flags.attach:
            assert f"`{flag} {value}`" in row, (name, flag, value)


def test_a_wake_after_ready_is_no_woken_start_and_a_restored_start_is_not_woken_twice():
    j = _judge()
    j.feed(LogLine(T0 + 1, VLLM + "Application startup complete."))
    j.feed(LogLine(T0 + 2, VLLM + WAKE))  # asleep and woken while serving: not how this start got its weights
    assert "woken" not in _kind(j)["labels"]


# -- the compile cache's key (vllm/compilation/backends.py), as real logs say it ------------------------------------
@pytest.mark.parametrize(("line", "key"), [
    # ../shared/logs/vllm-enginecore-failed-after-torch-compile.log
    ("INFO 05-07 02:13:56 [backends.py:420] Using cache directory: /root/.cache/vllm/torch_compile_cache/3069c682cd/"
     "rank_0_0 for vLLM's torch.compile", {"key": "3069c682cd"}),
    # tests/fixtures/engines/vllm-v1-ready.log
    ("(EngineCore_0 pid=4301) INFO 07-21 09:00:27 [backends.py:508] Using cache directory: /root/.cache/vllm/"
     "torch_compile_cache/8c9f/rank_0_0/backbone for vLLM's torch.compile", {"key": "8c9f"}),
    # tests/fixtures/engines/vllm-0.32-ready-cold.log: 0.32's AOT compile, the key's hash in its path
    ("(Worker pid=14370) INFO 11-30 14:07:07 [decorators.py:743] [backbone] saved AOT compiled function to /tmp/vl/"
     "vcache-cold/torch_compile_cache/torch_aot_compile/b51c0c8c84d9642cae6c2c08b1ef3a8e157bb7350e93079345d569e7b9881"
     "fa0/rank_0_0/model", {"key": "b51c0c8c84d9642cae6c2c08b1ef3a8e157bb7350e93079345d569e7b9881fa0"}),
    # the DEBUG line beside it (VLLM_LOGGING_LEVEL=DEBUG)
    ("DEBUG 07-21 09:00:27 [backends.py:520] torch.compile cache factors: env=ab12 cfg=cd34 comp=ef56 code=7890 "
     "dir=/root/.cache/vllm/torch_compile_cache/8c9f/rank_0_0/backbone",
     {"env": "ab12", "cfg": "cd34", "comp": "ef56", "code": "7890"}),
])
def test_vllms_compile_cache_key_is_read_into_the_anatomy(line: str, key: dict[str, str]):
    j = _judge()
    j.feed(LogLine(T0 + 1, line))
    j.feed(LogLine(T0 + 2, VLLM + "Compiling a graph for dynamic shape takes 20.1 s"))
    assert j.signals.compile_key == key
    assert anatomy(j.phases.dicts(), j.signals, T0 + 100)["cache"]["compile_key"] == key


def test_a_compile_key_said_after_ready_is_not_this_starts():
    j = _judge()
    j.feed(LogLine(T0 + 1, VLLM + "Application startup complete."))
    j.feed(LogLine(T0 + 2, VLLM + "Using cache directory: /c/torch_compile_cache/8c9f/rank_0_0 for vLLM's "
                                 "torch.compile"))
    assert j.signals.compile_key == {}


def test_a_woken_start_quotes_at_most_its_first_two_wake_lines():
    j = _judge()
    for i in range(3):
        j.feed(LogLine(T0 + 1 + i, VLLM + WAKE))
    assert [e["since"] for e in _kind(j)["evidence"]["woken"]] == [T0 + 1, T0 + 2]
