"""preflight/fit.py: the weights and the KV cache of one sequence of the context against each device, from the model's
own config (real config.json shapes, a GGUF written by llama.cpp's own gguf-py), each rule at its edge. The GPUs are
recorded NVML snapshots (no GPU on this machine).

The real engines' side: tests/e2e/llama/test_forecast.py (llama.cpp's own KV cache size, a refused context) and
tests/e2e/vllm/test_server.py (vLLM's KV space refused before launch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from firstlight.preflight.base import FAIL, OK, WARN
from firstlight.preflight.checkpoint import Scan
from firstlight.preflight.fit import GIB, LLAMACPP_PAD, Device, Shape, check_fit, read_shape, shape_from_config
from firstlight.preflight.target import read_target
from tests.support.preflight import need
from tests.support.preflight_gpus import dev, reading

# Llama-3.1-8B-Instruct's config.json (the fields the fit reads): 32 layers, 8 KV heads of 128, bf16
LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16", "model_type": "llama"}
# DeepSeek-V3's: multi-head latent attention, kv_lora_rank 512 + qk_rope_head_dim 64 per layer, 61 layers
DEEPSEEK_V3 = {"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
               "kv_lora_rank": 512, "qk_rope_head_dim": 64, "max_position_embeddings": 163840,
               "torch_dtype": "bfloat16", "model_type": "deepseek_v3"}


def model(tmp_path: Path, config: dict[str, Any], weights: int = 0) -> Path:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    return d


def scan_of(path: Path, total: int) -> Scan:
    return Scan(path, [path / "model.safetensors"], total)


def test_the_kv_cache_per_token_of_a_gqa_model_is_layers_by_kv_heads_by_k_and_v_by_bytes():
    shape = shape_from_config(LLAMA_8B)
    assert shape is not None and shape.bounded
    assert shape.per_token(1, 1) == 32 * 8 * 128 * 2 * 2  # 128 KiB a token: vLLM's figure for Llama-3.1-8B
    assert shape.per_token(2, 1) == shape.per_token(1, 1) / 2  # TP splits the KV heads
    assert shape.per_token(16, 1) == shape.per_token(1, 1) / 8  # 8 heads on 16 ranks: one head each, replicated
    assert shape.per_token(1, 2) == shape.per_token(1, 1) / 2  # pipeline stages split the layers
    assert shape.per_token(1, 1, dtype_bytes=1) == shape.per_token(1, 1) / 2  # an fp8 cache
    assert shape.trained_context == 131072


def test_a_latent_cache_is_one_per_layer_and_not_split_by_tp():
    shape = shape_from_config(DEEPSEEK_V3)
    assert shape is not None and shape.kv_heads is None
    assert shape.per_token(8, 1) == shape.per_token(1, 1) == 61 * (512 + 64) * 2


def test_a_hybrid_model_counts_its_full_attention_layers_and_an_uncountable_one_is_no_bound():
    kinds = ["sliding_attention", "full_attention"] * 12  # gpt-oss's alternation
    shape = shape_from_config({**LLAMA_8B, "num_hidden_layers": 24, "layer_types": kinds})
    assert shape is not None and shape.layers == 12 and shape.bounded
    mamba = shape_from_config({**LLAMA_8B, "model_type": "jamba"})
    assert mamba is not None and not mamba.bounded
    windowed = shape_from_config({**LLAMA_8B, "use_sliding_window": True, "sliding_window": 4096})
    assert windowed is not None and not windowed.bounded


def test_a_multimodal_model_is_read_by_its_text_config_and_a_checkpoints_kv_quantization_halves_it():
    shape = shape_from_config({"model_type": "llava", "text_config": LLAMA_8B})
    assert shape is not None and shape.layers == 32
    fp8 = shape_from_config({**LLAMA_8B, "quantization_config": {"kv_cache_scheme": {"num_bits": 8}}})
    assert fp8 is not None and fp8.dtype_bytes == 1
    assert shape_from_config({"num_hidden_layers": 2}) is None  # no heads: nothing to size


def test_the_shape_of_a_gguf_is_read_from_its_metadata(tmp_path: Path):
    try:
        import gguf
        import numpy as np
    except ImportError as e:
        need("gguf (test extra)", str(e))
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(30)
    w.add_context_length(8192)
    w.add_embedding_length(576)
    w.add_head_count(9)
    w.add_head_count_kv(3)
    w.add_uint32("clip.vision.block_count", 99)  # another tower's keys are not the model's
    w.add_tensor("a", np.ones((3, 5), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shape = read_shape(path)
    assert shape == Shape(30, 3, 3 * (64 + 64), 2, 8192, "GGUF metadata (llama)")
    assert shape.per_token(1, 1) == 23040  # SmolLM2-135M: llama.cpp's 67.50 MiB for 3072 cells


def test_no_config_or_a_damaged_one_is_skipped_never_failed(tmp_path: Path):
    d = tmp_path / "m"
    d.mkdir()
    t = read_target(["vllm", "serve", str(d), "--max-model-len", "1000000"], env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert check_fit(t, None, "no GPU").status == OK
    (d / "config.json").write_text("{not json")
    c = check_fit(t, None, "no GPU")
    assert c.status == OK and c.evidence.startswith("skipped")


def vllm_cpu(d: Path, length: int, space: str = "1") -> Any:
    return read_target(["vllm", "serve", str(d), "--max-model-len", str(length)], env={"VLLM_CPU_KVCACHE_SPACE": space})


def test_vllm_on_cpu_refuses_a_context_whose_kv_cache_does_not_fit_its_kv_space_at_the_edge(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    per = 32 * 8 * 128 * 2 * 2
    fits = check_fit(vllm_cpu(d, GIB // per), scan_of(d, 1000), "no GPU", ram=100 * GIB)
    assert fits.status == OK and "fits" in fits.evidence, fits
    short = check_fit(vllm_cpu(d, GIB // per + 1), scan_of(d, 1000), "no GPU", ram=100 * GIB)
    assert (short.status, short.category) == (FAIL, "kv_cache"), short
    assert "KV space" in short.evidence and "VLLM_CPU_KVCACHE_SPACE=1" in short.evidence
    assert "--max-model-len" in (short.hint or "") and "VLLM_CPU_KVCACHE_SPACE" in (short.hint or "")
    assert short.facts["fit"]["kv_min_bytes"] == (GIB // per + 1) * per


def test_weights_that_do_not_fit_the_ram_are_oom(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    c = check_fit(vllm_cpu(d, 1024), scan_of(d, 20 * GIB), "no GPU", ram=10 * GIB)
    assert (c.status, c.category) == (FAIL, "oom")


def test_a_gpu_gives_its_share_of_the_total_and_the_weights_split_over_tp(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    per_rank = 32 * 4 * 128 * 2 * 2  # TP 2: 4 KV heads a rank
    gpus = reading(dev(80 * GIB), dev(80 * GIB))
    t = read_target(["vllm", "serve", str(d), "-tp", "2", "--gpu-memory-utilization", "0.5",
                     "--max-model-len", str(131072)], env={})
    c = check_fit(t, scan_of(d, 16 * GIB), gpus)
    assert c.status == OK, c
    devices = c.facts["fit"]["devices"]
    assert [x["device"] for x in devices] == ["GPU 0", "GPU 1"]
    assert devices[0]["weights_bytes"] == 8 * GIB and devices[0]["kv_min_bytes"] == 131072 * per_rank
    assert devices[0]["available_bytes"] == 40 * GIB  # 0.5 x 80 GiB
    small = read_target(["vllm", "serve", str(d), "--gpu-memory-utilization", "0.2", "--max-model-len", "131072"],
                        env={})
    assert check_fit(small, scan_of(d, 16 * GIB), reading(dev(80 * GIB))).status == FAIL  # 16 + 16 GiB > 16 GiB


def test_an_engine_that_sizes_its_pool_to_what_is_left_is_warned_never_refused(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    t = read_target(["python", "-m", "sglang.launch_server", "--model-path", str(d), "--context-length", "131072",
                     "--mem-fraction-static", "0.2"], env={})
    c = check_fit(t, scan_of(d, 16 * GIB), reading(dev(80 * GIB)))
    assert (c.status, c.category) == (WARN, "kv_cache"), c


def test_a_gpu_engine_without_an_nvml_reading_is_not_checked(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    t = read_target(["vllm", "serve", str(d)], env={})
    c = check_fit(t, scan_of(d, 16 * GIB), "unavailable: no driver")
    assert c.status == OK and "fit not checked" in c.evidence and "(the trained context)" in c.evidence


def llama(tmp_path: Path, *extra: str) -> Any:
    d = model(tmp_path, {**LLAMA_8B, "max_position_embeddings": 8192})
    return read_target(["llama-server", "-m", str(d), *extra], env={})


@pytest.mark.parametrize("extra, status", [
    (("-c", "3000000"), FAIL),  # a context it was given: llama.cpp allocates every cell up front
    ((), OK),  # the trained context fits
])
def test_llama_cpp_is_refused_a_context_it_was_given_that_does_not_fit(tmp_path: Path, extra: tuple[str, ...],
                                                                       status: str):
    t = llama(tmp_path, *extra)
    c = check_fit(t, scan_of(t.model_path, 5 * GIB), "no GPU", ram=100 * GIB)
    assert c.status == status, c


def test_llama_cpp_shrinks_a_context_it_was_not_given_so_that_is_only_a_warning(tmp_path: Path):
    t = llama(tmp_path)
    c = check_fit(t, scan_of(t.model_path, 5 * GIB), "no GPU", ram=5 * GIB + 1)
    assert c.status == WARN and "--fit will shrink" in (c.hint or ""), c


def test_llama_cpp_pads_the_context_to_its_256_cells(tmp_path: Path):
    t = llama(tmp_path, "-c", "3000")
    c = check_fit(t, scan_of(t.model_path, 1), "no GPU", ram=100 * GIB)
    assert c.facts["fit"]["context"] == 3072 == -(-3000 // LLAMACPP_PAD) * LLAMACPP_PAD
    env = read_target(["llama-server", "-m", str(t.model_path)], env={"LLAMA_ARG_CTX_SIZE": "1000"})
    assert check_fit(env, scan_of(t.model_path, 1), "no GPU", ram=100 * GIB).facts["fit"]["context"] == 1024


@pytest.mark.parametrize("extra, why", [
    (("--cpu-offload-gb", "40"), "offload"),
    (("--kv-offloading-size", "8"), "offload"),
    (("--enable-expert-parallel",), "expert or data parallelism"),
    (("-dp", "8"), "expert or data parallelism"),
])
def test_an_option_that_moves_or_splits_the_weights_otherwise_is_warned_never_refused(tmp_path: Path,
                                                                                    extra: tuple[str, ...], why: str):
    d = model(tmp_path, LLAMA_8B)
    t = read_target(["vllm", "serve", str(d), "--gpu-memory-utilization", "0.2", "--max-model-len", "131072", *extra],
                    env={})
    c = check_fit(t, scan_of(d, 16 * GIB), reading(dev(80 * GIB)))
    assert c.status == WARN and "not refused" in c.evidence and why in c.evidence, c


def test_llama_cpp_on_gpus_places_its_layers_itself_so_it_is_warned_never_refused(tmp_path: Path):
    t = llama(tmp_path, "-c", "3000000")
    c = check_fit(t, scan_of(t.model_path, 5 * GIB), reading(dev(80 * GIB)))
    assert c.status == WARN and "places layers" in c.evidence, c


# -- every spelling a config says its shape in, each on its own --------------------------------------------------
BASE = {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
        "max_position_embeddings": 1000, "torch_dtype": "float32"}


@pytest.mark.parametrize(("changed", "layers", "kv", "width", "nbytes", "trained"), [
    ({}, 4, 2, 2 * 2 * 64, 4, 1000),
    ({"num_hidden_layers": None, "n_layer": 6}, 6, 2, 256, 4, 1000),  # GPT-2 / Falcon spellings
    ({"num_hidden_layers": None, "num_layers": 5}, 5, 2, 256, 4, 1000),
    ({"num_attention_heads": None, "n_head": 4}, 4, 2, 2 * 2 * 128, 4, 1000),
    ({"num_key_value_heads": None}, 4, 8, 2 * 8 * 64, 4, 1000),  # plain multi-head attention
    ({"num_key_value_heads": None, "multi_query": True}, 4, 1, 2 * 64, 4, 1000),  # Falcon's multi-query
    ({"head_dim": 80}, 4, 2, 2 * 2 * 80, 4, 1000),  # a head size of its own (Gemma)
    ({"hidden_size": None, "n_embd": 1024}, 4, 2, 2 * 2 * 128, 4, 1000),
    ({"torch_dtype": None, "dtype": "float16"}, 4, 2, 256, 2, 1000),  # transformers 5 writes "dtype"
    ({"torch_dtype": "torch.float32"}, 4, 2, 256, 4, 1000),
    ({"torch_dtype": None}, 4, 2, 256, 2, 1000),  # no dtype said: bf16, the loaders' default
    ({"torch_dtype": "complex-of-the-future"}, 4, 2, 256, 2, 1000),
    ({"max_position_embeddings": None, "max_sequence_length": 900}, 4, 2, 256, 4, 900),
    ({"max_position_embeddings": None, "seq_length": 800}, 4, 2, 256, 4, 800),
    ({"max_position_embeddings": None, "n_positions": 700}, 4, 2, 256, 4, 700),
    ({"max_position_embeddings": None}, 4, 2, 256, 4, None),
    ({"max_position_embeddings": True}, 4, 2, 256, 4, None),  # a bool is no count
    ({"layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]}, 2, 2, 256, 4,
     1000),
    ({"layer_types": ["linear_attention"] * 4}, 4, 2, 256, 4, 1000),  # none full: all counted, a bound still
    ({"quantization_config": {"kv_cache_quant_algo": "FP8"}}, 4, 2, 256, 1, 1000),  # ModelOpt's spelling
    ({"quantization_config": {"quant_method": "awq"}}, 4, 2, 256, 4, 1000),  # weights only: the cache is not
])
def test_each_config_spelling_is_read(changed: dict[str, Any], layers: int, kv: int, width: int, nbytes: float,
                                      trained: int | None):
    shape = shape_from_config({k: v for k, v in {**BASE, **changed}.items() if v is not None})
    assert shape == Shape(layers, kv, width, nbytes, trained, "config.json", True)


@pytest.mark.parametrize("changed", [{"model_type": "mamba2"}, {"model_type": "RWKV7"}, {"model_type": "qwen3_next"},
                                     {"model_type": "granitemoehybrid"},
                                     {"use_sliding_window": True, "sliding_window": 4096}])
def test_a_layer_kind_it_cannot_count_makes_the_figure_no_bound(changed: dict[str, Any]):
    shape = shape_from_config({**BASE, **changed})
    assert shape is not None and not shape.bounded


@pytest.mark.parametrize("changed", [{"use_sliding_window": False, "sliding_window": 4096},
                                     {"use_sliding_window": True, "sliding_window": None}, {"model_type": "llama"}])
def test_a_window_not_used_is_still_a_bound(changed: dict[str, Any]):
    shape = shape_from_config({**BASE, **changed})
    assert shape is not None and shape.bounded


def test_a_latent_cache_without_a_rope_part_is_the_rank_alone():
    shape = shape_from_config({**BASE, "kv_lora_rank": 512})
    assert shape is not None and (shape.kv_heads, shape.width) == (None, 512)


def test_a_config_whose_top_names_the_layers_is_not_read_by_its_text_config():
    shape = shape_from_config({**BASE, "text_config": {**BASE, "num_hidden_layers": 99}})
    assert shape is not None and shape.layers == 4
    assert shape_from_config({"text_config": "x", **{k: v for k, v in BASE.items() if k != "num_hidden_layers"}}) \
        is None


def test_per_token_at_the_edges_of_tp_and_pp():
    shape = Shape(5, 4, 4 * 2 * 10, 2, None, "x")
    assert shape.per_token(0, 0) == 5 * 80 * 2  # a TP or PP of 0 is read as 1
    assert shape.per_token(1, 2) == 3 * 80 * 2  # 5 layers on 2 stages: the larger stage holds 3
    assert shape.per_token(3, 1) == 5 * 20 * 2  # 4 heads on 3 ranks: one head each (4 // 3)
    assert Shape(5, 0, 80, 2, None, "x").per_token(2, 1) == 5 * 80 * 2  # no head count: the width as said


@pytest.mark.parametrize(("flag", "nbytes"), [("fp8", 1), ("fp8_e5m2", 1), ("FP8_E4M3", 1), ("auto", None),
                                              ("bfloat16", None), ("q8_0", 1)])
def test_the_kv_cache_dtype_flag_sets_the_bytes_per_element(tmp_path: Path, flag: str, nbytes: int | None):
    d = model(tmp_path, LLAMA_8B)
    t = read_target(["vllm", "serve", str(d), "--max-model-len", "1000", "--kv-cache-dtype", flag],
                    env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    c = check_fit(t, scan_of(d, 1), "no GPU", ram=100 * GIB)
    per = 32 * 8 * 128 * 2 * (nbytes if nbytes is not None else 2)
    if flag == "bfloat16":
        per = 32 * 8 * 128 * 2 * 2
    assert c.facts["fit"]["kv_per_token_bytes"] == per, c.facts


def test_the_evidence_and_facts_say_every_figure(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    c = check_fit(vllm_cpu(d, 1024), scan_of(d, 2_000_000_000), "no GPU", ram=10_000_000_000)
    assert c.evidence == (
        "KV cache of one 1024-token sequence: 134.2 MB per device (131.1 kB per token, config.json); fits: "
        "RAM: 2.0 GB weights of 10.0 GB (available): 8.0 GB to spare; KV space: 134.2 MB KV of 1.1 GB "
        "(VLLM_CPU_KVCACHE_SPACE=1): 939.5 MB to spare")
    fit = c.facts["fit"]
    assert (fit["context"], fit["context_asked"], fit["kv_min_bytes"], fit["weights_bytes"], fit["bounded"]) == (
        1024, True, 1024 * 131072, 2_000_000_000, True)
    assert fit["devices"][1] == {"device": "KV space", "weights_bytes": 0, "kv_min_bytes": 1024 * 131072,
                                 "available_bytes": GIB, "spare_bytes": GIB - 1024 * 131072,
                                 "gives": "VLLM_CPU_KVCACHE_SPACE=1"}
    trained = check_fit(read_target(["vllm", "serve", str(d)], env={"VLLM_CPU_KVCACHE_SPACE": "100"}),
                        scan_of(d, 1), "no GPU", ram=100 * GIB)
    assert "KV cache of one 131072-token sequence (the trained context)" in trained.evidence
    assert trained.facts["fit"]["context_asked"] is False


def test_a_gpu_without_a_share_gives_its_free_memory_and_the_evidence_names_what_is_short(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    t = read_target(["python", "-m", "sglang.launch_server", "--model-path", str(d), "--context-length", "1000"],
                    env={})
    c = check_fit(t, scan_of(d, 70 * GIB), reading(dev(60 * GIB)))
    assert (c.status, c.category) == (WARN, "oom"), c  # SGLang sizes its pool: warned, not refused
    assert "GPU 0: 75.2 GB weights + 131.1 MB KV of 64.4 GB (free of 85.9 GB): 10.9 GB short" in c.evidence
    assert c.hint == "use more GPUs (a larger TP), a smaller quantization, or free memory"
    assert c.facts["fit"]["devices"][0]["gives"] == "free of 85.9 GB"


def test_a_gpu_selection_that_cannot_be_met_is_not_checked_here(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    t = read_target(["vllm", "serve", str(d), "-tp", "4"], env={})
    c = check_fit(t, scan_of(d, 1), reading(dev(80 * GIB)))
    assert c.status == OK and "fit not checked: TP 4 needs 4 GPUs; 1 visible" in c.evidence


def test_a_damaged_context_flag_is_the_trained_context(tmp_path: Path):
    t = llama(tmp_path, "-c", "lots")
    c = check_fit(t, scan_of(t.model_path, 1), "no GPU", ram=100 * GIB)
    assert c.facts["fit"]["context"] == 8192 and c.facts["fit"]["context_asked"] is False
    zero = llama(tmp_path, "-c", "0")  # llama.cpp's "from the model"
    assert check_fit(zero, scan_of(zero.model_path, 1), "no GPU", ram=100 * GIB).facts["fit"]["context"] == 8192


# -- the rest of each rule's cases, at their edges ----------------------------------------------------------------
def test_skips_say_why_word_for_word(tmp_path: Path):
    t = read_target(["vllm", "serve", str(tmp_path / "none")], env={})
    c = check_fit(t, None, "no GPU")
    assert (c.name, c.status, c.category) == ("fit", OK, "kv_cache")
    assert c.evidence == "skipped: the model's KV shape is not known (no config.json or GGUF metadata to read)"
    d = model(tmp_path, {k: v for k, v in LLAMA_8B.items() if k != "max_position_embeddings"})
    c = check_fit(read_target(["vllm", "serve", str(d)], env={}), None, "no GPU")
    assert c.evidence == "skipped: no context asked for and none in the config.json" and c.facts == {}
    c = check_fit(read_target(["vllm", "serve", str(d), "--max-model-len", "10"], env={}), None, "no GPU")
    assert c.name == "fit" and c.facts["fit"]["devices"] == [] and c.facts["fit"]["weights_bytes"] == 0


def test_a_device_with_nothing_to_spare_still_fits():
    from firstlight.preflight.fit import Device

    d = Device("RAM", 10, 5, 15, "available")
    assert d.spare == 0 and d.to_dict()["spare_bytes"] == 0


def test_an_exact_fit_fits_and_one_byte_more_is_short(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    per = 32 * 8 * 128 * 2 * 2
    t = read_target(["llama-server", "-m", str(d), "-c", "256"], env={})
    exact = check_fit(t, scan_of(d, 1000), "no GPU", ram=1000 + 256 * per)
    assert exact.status == OK and "0 B to spare" in exact.evidence, exact
    short = check_fit(t, scan_of(d, 1001), "no GPU", ram=1000 + 256 * per)
    assert short.status == FAIL and "1 B short" in short.evidence, short


def test_a_fraction_of_a_byte_per_token_is_kept_to_a_tenth(tmp_path: Path):
    d = model(tmp_path, {**LLAMA_8B, "num_hidden_layers": 1, "num_key_value_heads": 1, "head_dim": 3})
    t = read_target(["llama-server", "-m", str(d), "-c", "256", "-ctk", "q4_0"], env={})
    assert check_fit(t, None, "no GPU", ram=GIB).facts["fit"]["kv_per_token_bytes"] == 3.0  # 6 elements x 0.5
    t = read_target(["llama-server", "-m", str(d), "-c", "256", "-ctk", "q5_0"], env={})
    assert check_fit(t, None, "no GPU", ram=GIB).facts["fit"]["kv_per_token_bytes"] == 3.8  # 6 x 0.625 = 3.75


def test_a_share_over_one_or_none_gives_the_free_memory(tmp_path: Path):
    d = model(tmp_path, LLAMA_8B)
    t = read_target(["vllm", "serve", str(d), "--max-model-len", "16", "--gpu-memory-utilization", "1.5"], env={})
    c = check_fit(t, scan_of(d, 1), reading(dev(10 * GIB)))
    assert c.facts["fit"]["devices"][0]["available_bytes"] == 10 * GIB
    t = read_target(["vllm", "serve", str(d), "--max-model-len", "16", "--gpu-memory-utilization", "1"], env={})
    assert check_fit(t, scan_of(d, 1), reading(dev(10 * GIB))).facts["fit"]["devices"][0]["available_bytes"] == \
        int(1.0 * 80 * GIB)
    gen = read_target(["my-server", "--model", str(d)], env={})
    assert check_fit(gen, scan_of(d, 1), reading(dev(10 * GIB))).status == WARN  # an unknown engine: never refused


@pytest.mark.parametrize(("words", "unsure"), [
    (["--no-offloading"], "offload"),
    (["--offload-group-size", "2"], "offload"),
    (["offload"], None),  # a value, not an option
    (["--ep-size", "8"], "expert"),
    (["--moe-dense-tp-size", "1"], "expert"),
    (["--enable-prefix-caching"], None),
])
def test_uncertain_reads_only_options(tmp_path: Path, words: list[str], unsure: str | None):
    from firstlight.preflight.fit import uncertain

    d = model(tmp_path, LLAMA_8B)
    t = read_target(["vllm", "serve", str(d), *words], env={})
    said = uncertain(t, [])
    assert (said is None) if unsure is None else (said is not None and unsure in said), said


def _gguf(tmp_path: Path, arch: str, keys: dict[str, int]) -> Path:
    """A GGUF with only ``keys`` (``ARCH.KEY``, u32) in its metadata, written by llama.cpp's gguf-py."""
    try:
        import gguf
    except ImportError as e:
        need("gguf (test extra)", str(e))
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    for k, v in keys.items():
        w.add_uint32(f"{arch}.{k}", v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    return path


@pytest.mark.parametrize(("keys", "shape"), [
    ({"block_count": 2, "attention.head_count": 4, "embedding_length": 256}, (2, 4, 4 * 128)),  # no KV count: MHA
    ({"block_count": 2, "attention.head_count": 4, "attention.head_count_kv": 1, "attention.key_length": 96,
      "attention.value_length": 64}, (2, 1, 160)),  # MLA-style unequal K and V heads
    ({"block_count": 2, "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 32},
     (2, 2, 128)),  # V as K
])
def test_the_gguf_keys_each_count(tmp_path: Path, keys: dict[str, int], shape: tuple[int, int, int]):
    got = read_shape(_gguf(tmp_path, "qwen2", keys))
    assert got is not None and (got.layers, got.kv_heads, got.width) == shape and got.bounded
    assert got.trained_context is None and got.source == "GGUF metadata (qwen2)"


@pytest.mark.parametrize(("arch", "keys"), [
    ("mamba", {"block_count": 2, "attention.head_count": 4, "embedding_length": 256}),
    ("llama", {"block_count": 2, "embedding_length": 256}),  # no head count: nothing to size
    ("llama", {"attention.head_count": 2, "embedding_length": 256}),
    ("llama", {"block_count": 2, "attention.head_count": 4}),  # no head size said or to derive
])
def test_a_gguf_that_cannot_be_sized_or_bounded(tmp_path: Path, arch: str, keys: dict[str, int]):
    got = read_shape(_gguf(tmp_path, arch, keys))
    assert got is None or not got.bounded


def test_a_broken_gguf_or_an_oversized_config_is_no_shape(tmp_path: Path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOTGGUF" * 10)
    assert read_shape(bad) is None
    d = tmp_path / "big"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**LLAMA_8B, "pad": "x" * (4 << 20)}))
    assert read_shape(d) is None
    (d / "config.json").write_text("[1, 2]")  # JSON, not an object
    assert read_shape(d) is None
    assert read_shape(None) is None and read_shape(tmp_path / "model.safetensors") is None


def test_a_latent_cache_shape_is_whole():
    assert shape_from_config(DEEPSEEK_V3) == Shape(61, None, 576, 2, 163840, "config.json", True)
    hybrid = shape_from_config({**DEEPSEEK_V3, "model_type": "deepseek_v3_hybrid"})
    assert hybrid is not None and hybrid.bounded is False


@pytest.mark.parametrize(("cfg", "nbytes"), [
    ({"text_config": {**BASE, "torch_dtype": None, "dtype": "float32"}, "torch_dtype": "float16"}, 4),  # its own
    ({"text_config": {**BASE, "torch_dtype": None}, "torch_dtype": "float32"}, 4),  # the top's
    ({"text_config": {**BASE, "torch_dtype": None}, "dtype": "float32"}, 4),
    ({"text_config": {**BASE, "torch_dtype": None}}, 2),
])
def test_the_dtype_is_the_text_configs_then_the_tops(cfg: dict[str, Any], nbytes: int):
    cfg = {**cfg, "text_config": {k: v for k, v in cfg["text_config"].items() if v is not None}}
    shape = shape_from_config(cfg)
    assert shape is not None and shape.dtype_bytes == nbytes


def test_a_head_size_derived_from_the_hidden_size_is_floored():
    shape = shape_from_config({**BASE, "hidden_size": 100})
    assert shape is not None and shape.width == 2 * 2 * 12  # 100 // 8


def test_only_full_attention_layers_are_counted():
    shape = shape_from_config({**BASE, "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                                                       "sliding_attention"]})
    assert shape is not None and shape.layers == 1


def test_the_devices_say_how_they_give_their_memory_and_pipeline_stages_split_the_weights(tmp_path: Path):
    from firstlight.preflight.fit import devices

    d = model(tmp_path, LLAMA_8B)
    t = read_target(["vllm", "serve", str(d), "-tp", "2", "-pp", "2", "--gpu-memory-utilization", "0.5"], env={})
    found, why = devices(t, 8000, 10, reading(dev(80 * GIB), dev(80 * GIB), dev(80 * GIB), dev(80 * GIB)), 0)
    assert why == "" and [x.name for x in found] == ["GPU 0", "GPU 1"]
    assert found[0].weights == 2000 and found[0].gives == "0.5 x 85.9 GB"
    assert devices(t, 1, 1, "no GPU", 5) == ([], "no GPU reading (NVML): the GPUs' memory is not known here")
    llama_ = read_target(["llama-server", "-m", str(d)], env={})
    assert devices(llama_, 3, 4, "no GPU", 5) == ([Device("RAM", 3, 4, 5, "available")], "")
    sg = read_target(["python", "-m", "sglang.launch_server", "--model-path", str(d)], env={})
    got, _ = devices(sg, 3, 4, reading(dev(10 * GIB)), 5)
    assert got[0].gives == "free of 85.9 GB" and got[0].available == 10 * GIB
    assert devices(read_target(["vllm", "serve", str(d), "-tp", "2"], env={}), 1, 1, reading(dev(GIB)), 5) == (
        [], "TP 2 needs 2 GPUs; 1 visible (CUDA_VISIBLE_DEVICES=unset, TP 2)")
    assert devices(read_target(["vllm", "serve", str(d)], env={"VLLM_CPU_KVCACHE_SPACE": "2"}), 1, 1, "x", 5) == (
        [Device("RAM", 1, 0, 5, "available"), Device("KV space", 0, 1, 2 * GIB, "VLLM_CPU_KVCACHE_SPACE=2")], "")
    assert devices(sg, 1, 1, "x", 5)[0] == []  # SGLang on CPU: no KV space it says


@pytest.mark.parametrize(("argv", "env", "hint"), [
    (["vllm", "serve", "{d}", "--max-model-len", "131072", "--gpu-memory-utilization", "0.2"], {},
     "lower the context (--max-model-len), give the KV cache more memory (--gpu-memory-utilization), or use more "
     "GPUs"),
    (["python", "-m", "sglang.launch_server", "--model-path", "{d}", "--context-length", "131072",
      "--mem-fraction-static", "0.2"], {},
     "lower the context (--context-length), give the KV cache more memory (--mem-fraction-static), or use more GPUs"),
    (["text-generation-launcher", "--model-id", "{d}", "--max-total-tokens", "9000000"], {},
     "lower the context (--max-total-tokens), give the KV cache more memory (free memory), or use more GPUs"),
    (["my-server", "--model", "{d}"], {},
     "lower the context (the context length), give the KV cache more memory (free memory), or use more GPUs"),
])
def test_the_hint_names_each_engines_own_knobs(tmp_path: Path, argv: list[str], env: dict[str, str], hint: str):
    d = model(tmp_path, LLAMA_8B)
    t = read_target([w.replace("{d}", str(d)) for w in argv], env=env)
    c = check_fit(t, scan_of(d, 16 * GIB), reading(dev(20 * GIB)))
    assert c.name == "fit" and c.status in (FAIL, WARN) and c.hint == hint, c
    assert "does not fit: GPU 0: 17.2 GB weights + " in c.evidence


def test_a_bound_it_cannot_trust_says_so_and_is_not_refused(tmp_path: Path):
    d = model(tmp_path, {**LLAMA_8B, "model_type": "jamba"})
    c = check_fit(vllm_cpu(d, 131072), scan_of(d, 1), "no GPU", ram=100 * GIB)
    assert c.status == WARN and ", not a bound: a layer kind it cannot count)" in c.evidence, c
    assert "not refused" not in c.evidence  # the bound itself, not an option, is why


def test_llama_cpp_asked_nothing_shrinks_and_says_so(tmp_path: Path):
    t = llama(tmp_path)
    c = check_fit(t, scan_of(t.model_path, 1), "no GPU", ram=2)
    assert c.hint == "llama.cpp's --fit will shrink the context it was not given until it fits"
    assert c.name == "fit" and "does not fit: RAM: 1 B weights + " in c.evidence
