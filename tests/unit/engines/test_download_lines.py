"""The engines' real download lines are the ``download`` phase (each quoted from where it was read), and the bars
among them are download progress; a config file's bar, which comes with any start from a hub id, is not."""

from __future__ import annotations

import pytest

from firstlight.engines import get_profile
from firstlight.logreplay import replay_log
from firstlight.vocab import PHASE_INDEX, PHASES, STALL_HINTS
from tests.unit.engines.test_corpus import CORPUS


def test_download_is_a_phase_between_distributed_init_and_the_load():
    assert PHASE_INDEX["distributed_init"] < PHASE_INDEX["download"] < PHASE_INDEX["weights_loading"]
    assert "download" in PHASES and "download" in STALL_HINTS


@pytest.mark.parametrize("engine, line", [
    # vLLM's model_loader/weight_utils.py (https://github.com/vllm-project/vllm/issues/20891)
    ("vllm", "(EngineCore_DP0 pid=192) INFO 03-18 11:27:26 [weight_utils.py:487] Time spent downloading weights for "
             "Qwen/Qwen3-30B-A3B-FP8: 826.331217 seconds"),
    # TGI's download step (corpus: b-tgi-llama2-k9s-download.log)
    ("tgi", "2023-07-19T21:00:09.954549Z  INFO text_generation_launcher: Download file: "
            "model-00001-of-00002.safetensors"),
    ("tgi", "2023-07-19T21:00:31.592309Z  INFO text_generation_launcher: Downloaded /data/models--meta-llama--Llama-"
            "2-7b-hf/snapshots/b3ab0f18ce41e58ac494e507dad91ef4fd6706c7/model-00001-of-00002.safetensors in 0:00:21."),
    # Ollama's server while it pulls (https://github.com/ollama/ollama/issues/1209), its CLI (issue 8889)
    ("ollama", "Nov 20 15:01:57 escapepod ollama[704571]: 2023/11/20 15:01:57 download.go:122: downloading "
               "5b2b5f73b685 in 94 256.0 MB part(s)"),
    ("ollama", "pulling manifest"),
])
def test_the_engines_download_lines_are_the_download_phase(engine: str, line: str):
    assert get_profile(engine).classify(line).phase == "download"


@pytest.mark.parametrize("engine, line, fraction", [
    # huggingface_hub's bars (snapshot_download): the files, then a weights file's bytes
    ("sglang", "Fetching 4 files:  50%|█████     | 2/4 [00:41<00:41, 20.81s/it]", 0.5),
    ("vllm", "model-00001-of-00004.safetensors:  45%|████▌     | 2.23G/4.98G [00:20<00:25, 109MB/s]", 0.45),
    ("sglang", "model.safetensors: 100%|██████████| 269M/269M [00:02<00:00, 112MB/s]", 1.0),
    # Ollama's CLI, both forms (https://github.com/ollama/ollama/issues/8889 and /14554)
    ("ollama", "pulling 6150cb382311...  42% ▕██████          ▏ 8.1 GB/ 19 GB  110 MB/s   1m44s", 0.42),
    ("ollama", "pulling dec52a44569a: 100% ▕██████████████████████████████████████▏ 6.6 GB", 1.0),
])
def test_download_bars_are_download_progress(engine: str, line: str, fraction: float):
    m = get_profile(engine).classify(line)
    assert m.phase == "download" and m.progress is not None
    assert m.progress.kind == "download" and m.progress.fraction == pytest.approx(fraction)


def test_a_config_files_bar_is_no_download_phase():
    # https://github.com/EuroEval/EuroEval/issues/1178: the small files of any start from a hub id
    m = get_profile("vllm").classify("config.json: 100%|██████████| 838/838 [00:00<00:00, 8.49MB/s]")
    assert m.phase is None and m.progress is None


def test_tgis_download_log_ends_in_the_download():
    rep = replay_log(CORPUS / "b-tgi-llama2-k9s-download.log")
    assert (rep.engine, rep.outcome, rep.phase) == ("tgi", "incomplete", "download")
    assert rep.hint is not None and "downloading the weights" in rep.hint
