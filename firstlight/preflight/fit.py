"""Will it fit? The weights and the KV cache's minimum against the memory of each device, before the load.

An engine that cannot hold one sequence of the context it was asked for stops only after loading the weights
(vLLM: "To serve at least one request with the models's max seq len (N), (X GiB KV cache is needed, which is
larger than the available KV cache memory"), minutes into a large start. Everything that decides it is on the
machine before launch:

- the KV cache per token, from the model's own config (``config.json``: layers, KV heads, head size, dtype; or a
  GGUF's metadata): ``layers x KV heads x (K + V head size) x bytes``, split over tensor parallelism by KV heads
  (a head is never split: fewer heads than ranks are replicated) and over pipeline stages by layers; a latent
  cache (MLA: ``kv_lora_rank + qk_rope_head_dim`` per layer) is not split by TP;
- the context asked for (the profile's ``context`` flags), else the model's trained context;
- the weights per device: their bytes over TP x PP;
- what each device gives: a GPU's total x the engine's memory share (vLLM ``--gpu-memory-utilization``) or its
  free memory (NVML); on a CPU engine, the RAM available, or vLLM's ``VLLM_CPU_KVCACHE_SPACE`` for its KV cache.

The figure is a lower bound (activations, CUDA graphs and the engine's own buffers come on top; a hybrid model
counts only its full-attention layers), so a start is refused only when even that cannot fit, and only by an engine
that needs the whole context to fit (``context_must_fit``); an engine that shrinks a context left unset until it
fits (llama.cpp's ``--fit``) is refused only for a context it was given. A model whose minimum this cannot bound
(a state-space or linear-attention layer it cannot count) is shown, never refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from firstlight.engines import get_profile
from firstlight.files import open_regular
from firstlight.formats import size as human_bytes
from firstlight.preflight.base import FAIL, OK, WARN, Check
from firstlight.preflight.checkpoint import Scan
from firstlight.preflight.gguf import GgufError, read_numbers
from firstlight.preflight.gpus import selected_devices
from firstlight.preflight.target import Target
from firstlight.timeline import GpuSample

NAME = "fit"
CATEGORY = "kv_cache"
MAX_CONFIG_BYTES = 4 << 20  # a real config.json is a few KiB
GIB = 1 << 30
DTYPE_BYTES = {"float32": 4, "float": 4, "fp32": 4, "float16": 2, "half": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
               "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1, "q8_0": 1, "q4_0": 0.5,
               "q4_1": 0.5, "q5_0": 0.625, "q5_1": 0.625, "iq4_nl": 0.5, "f16": 2, "f32": 4}
_GGUF_KEYS = ("block_count", "attention.head_count_kv", "attention.head_count", "embedding_length",
              "context_length", "attention.key_length", "attention.value_length")
LLAMACPP_PAD = 256  # llama.cpp rounds the context up to a multiple of 256 cells (its KV cache's padding)
CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"  # vLLM on CPU: the KV cache's own space, in GiB


@dataclass(frozen=True)
class Shape:
    """What the KV cache of one token costs, from the model's own config."""

    layers: int  # the layers that keep every token (a hybrid model's full-attention layers)
    kv_heads: int | None  # None: a latent cache (MLA), one per layer, not split over TP
    width: int  # K + V elements per token and layer, all KV heads together (the latent's width for MLA)
    dtype_bytes: float
    trained_context: int | None
    source: str
    bounded: bool = True  # False: a layer kind this cannot count, so the minimum is not known to be a bound

    def per_token(self, tp: int, pp: int, dtype_bytes: float | None = None) -> float:
        """Bytes of KV cache per token on one device."""
        layers = math.ceil(self.layers / max(pp, 1))
        width: float = self.width
        if self.kv_heads is not None and self.kv_heads > 0:
            per_head = self.width / self.kv_heads
            width = per_head * max(1, self.kv_heads // max(tp, 1))
        return layers * width * (dtype_bytes if dtype_bytes is not None else self.dtype_bytes)


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def shape_from_config(cfg: dict[str, Any], source: str = "config.json") -> Shape | None:
    """The KV shape of a Hugging Face ``config.json`` (its ``text_config`` for a multimodal model); None when it does
    not say enough."""
    c = cfg
    if _int(cfg.get("num_hidden_layers")) is None and isinstance(cfg.get("text_config"), dict):
        c = cfg["text_config"]
    layers = _int(c.get("num_hidden_layers")) or _int(c.get("n_layer")) or _int(c.get("num_layers"))
    heads = _int(c.get("num_attention_heads")) or _int(c.get("n_head"))
    if layers is None or heads is None:
        return None
    dtype = c.get("torch_dtype") or c.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    nbytes = DTYPE_BYTES.get(str(dtype).removeprefix("torch."), 2)
    quant = cfg.get("quantization_config")
    if isinstance(quant, dict) and (quant.get("kv_cache_scheme") or quant.get("kv_cache_quant_algo")):
        nbytes = 1  # an 8-bit KV cache the checkpoint asks for: the smaller figure keeps the bound a bound
    trained = (_int(c.get("max_position_embeddings")) or _int(c.get("max_sequence_length"))
               or _int(c.get("seq_length")) or _int(c.get("n_positions")))
    kinds = c.get("layer_types")
    bounded = True
    if isinstance(kinds, list) and kinds:
        layers = sum(k == "full_attention" for k in kinds) or layers  # sliding and linear layers keep fewer tokens
    elif (c.get("use_sliding_window") and c.get("sliding_window")) or any(
            w in str(c.get("model_type", "")).lower() for w in ("mamba", "jamba", "rwkv", "next", "hybrid")):
        bounded = False
    if _int(c.get("kv_lora_rank")):
        width = c["kv_lora_rank"] + (_int(c.get("qk_rope_head_dim")) or 0)
        return Shape(layers, None, width, nbytes, trained, source, bounded)
    kv = _int(c.get("num_key_value_heads")) or (1 if c.get("multi_query") else heads)
    hidden = _int(c.get("hidden_size")) or _int(c.get("n_embd"))
    head_dim = _int(c.get("head_dim")) or (hidden // heads if hidden else None)
    if head_dim is None:
        return None
    return Shape(layers, kv, 2 * kv * head_dim, nbytes, trained, source, bounded)


def shape_from_gguf(path: Path) -> Shape | None:
    """The KV shape from a GGUF's metadata (llama.cpp keeps an f16 cache unless told otherwise)."""
    arch, n = read_numbers(path, _GGUF_KEYS)
    layers, heads = n.get("block_count"), n.get("attention.head_count")
    if not layers or not heads:
        return None
    kv = n.get("attention.head_count_kv") or heads
    head_k = n.get("attention.key_length") or (n.get("embedding_length", 0) // heads)
    head_v = n.get("attention.value_length") or head_k
    if not head_k:
        return None
    bounded = not any(w in (arch or "") for w in ("mamba", "rwkv", "jamba", "next", "hybrid", "lfm"))
    return Shape(layers, kv, kv * (head_k + head_v), 2, n.get("context_length"), f"GGUF metadata ({arch})", bounded)


def read_shape(model_path: Path | None) -> Shape | None:
    """The model's KV shape from its config.json or its GGUF; None when neither says."""
    if model_path is None:
        return None
    if model_path.is_file() and model_path.suffix == ".gguf":
        try:
            return shape_from_gguf(model_path)
        except (GgufError, OSError):
            return None
    config = model_path / "config.json" if model_path.is_dir() else None
    if config is None or not config.is_file():
        return None
    try:
        with open_regular(config) as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        cfg = json.loads(raw) if len(raw) <= MAX_CONFIG_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    return shape_from_config(cfg) if isinstance(cfg, dict) else None


@dataclass(frozen=True)
class Device:
    """One device's side of the fit: what the start needs there at least, and what it gives."""

    name: str  # "GPU 0", "RAM", "KV space"
    weights: int
    kv: int
    available: int
    gives: str  # how ``available`` was found

    @property
    def spare(self) -> int:
        return self.available - self.weights - self.kv

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.name, "weights_bytes": self.weights, "kv_min_bytes": self.kv,
                "available_bytes": self.available, "spare_bytes": self.spare, "gives": self.gives}


def _number(text: str | None) -> float | None:
    try:
        v = float(text) if text is not None else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) and v > 0 else None


def _context(target: Target, shape: Shape) -> tuple[int | None, bool]:
    """(the context asked for, else the model's trained one; whether the command set it)."""
    flags = get_profile(target.engine or "generic").flags
    cmd = target.command
    said = cmd.value(*flags.context) if cmd is not None and flags.context else None
    if said is None:
        said = next((target.env[e] for e in flags.context_env if target.env.get(e)), None)
    asked = _number(said)
    if asked is not None and int(asked) > 0:
        n = int(asked)
        return (-(-n // LLAMACPP_PAD) * LLAMACPP_PAD if target.engine == "llamacpp" else n), True
    return shape.trained_context, False


def _kv_dtype(target: Target) -> float | None:
    flags = get_profile(target.engine or "generic").flags
    said = target.command.value(*flags.kv_dtype) if target.command is not None and flags.kv_dtype else None
    return DTYPE_BYTES.get(said.lower()) if said and said.lower() != "auto" else None


def devices(target: Target, weights: int, kv: int, gpus: GpuSample | str, ram: int) -> tuple[list[Device], str]:
    """Each device's side of the fit, and why there are none (the empty string when there are)."""
    flags = get_profile(target.engine or "generic").flags
    tp, pp = max(target.tp, 1), max(target.command.pp or 1, 1) if target.command else 1
    if isinstance(gpus, GpuSample) and gpus.devices:
        used, problem = selected_devices(target, gpus.devices)
        if problem is not None or not used:
            return [], problem or "no GPU selected"
        said = target.command.value(*flags.memory_share) if target.command and flags.memory_share else None
        share = _number(said) or flags.memory_share_default
        out = []
        for d in used:
            if share is not None and share <= 1:
                have, how = int(share * d.memory_total), f"{share:g} x {human_bytes(d.memory_total)}"
            else:
                have, how = d.memory_total - d.memory_used, f"free of {human_bytes(d.memory_total)}"
            out.append(Device(f"GPU {d.index}", weights // (tp * pp), kv, have, how))
        return out, ""
    space = _number(target.env.get(CPU_KV_ENV)) if target.engine == "vllm" else None
    if space is not None:
        return [Device("RAM", weights, 0, ram, "available"),
                Device("KV space", 0, kv, int(space * GIB), f"{CPU_KV_ENV}={space:g}")], ""
    if target.engine == "llamacpp":  # a CPU build keeps both in RAM (the weights mapped from the page cache)
        return [Device("RAM", weights, kv, ram, "available")], ""
    return [], "no GPU reading (NVML): the GPUs' memory is not known here"


def check_fit(target: Target, scan: Scan | None, gpus: GpuSample | str, ram: int | None = None) -> Check:
    """The fit of the weights and one sequence of the context's KV cache, per device (module docstring)."""
    shape = read_shape(target.model_path)
    if shape is None:
        return Check(NAME, OK, CATEGORY, "skipped: the model's KV shape is not known (no config.json or GGUF "
                                         "metadata to read)")
    context, asked = _context(target, shape)
    if context is None:
        return Check(NAME, OK, CATEGORY, f"skipped: no context asked for and none in the {shape.source}")
    tp, pp = max(target.tp, 1), max((target.command.pp if target.command else None) or 1, 1)
    per_token = shape.per_token(tp, pp, _kv_dtype(target))
    kv = int(per_token * context)
    weights = scan.total_bytes if scan is not None else 0
    found, why = devices(target, weights, kv, gpus, psutil.virtual_memory().available if ram is None else ram)
    what = (f"KV cache of one {context}-token sequence{'' if asked else ' (the trained context)'}: "
            f"{human_bytes(kv)} per device ({human_bytes(int(per_token))} per token, {shape.source}"
            f"{'' if shape.bounded else ', not a bound: a layer kind it cannot count'})")
    facts = {"fit": {"context": context, "context_asked": asked, "kv_per_token_bytes": round(per_token, 1),
                     "kv_min_bytes": kv, "weights_bytes": weights, "bounded": shape.bounded,
                     "devices": [d.to_dict() for d in found]}}
    if not found:
        return Check(NAME, OK, CATEGORY, f"{what}; fit not checked: {why}", facts=facts)
    short = [d for d in found if d.spare < 0]
    parts = [f"{d.name}: " + " + ".join(f"{human_bytes(n)} {what}" for n, what in ((d.weights, "weights"),
                                                                                  (d.kv, "KV")) if n)
             + f" of {human_bytes(d.available)} ({d.gives}): "
             + (f"{human_bytes(d.spare)} to spare" if d.spare >= 0 else f"{human_bytes(-d.spare)} short")
             for d in (short or found)]
    profile = get_profile(target.engine or "generic")
    if not short:
        return Check(NAME, OK, CATEGORY, f"{what}; fits: " + "; ".join(parts), facts=facts)
    weights_short = any(d.weights > d.available for d in short)
    category = "oom" if weights_short else CATEGORY
    shrinks = profile.flags.fits_unset_context and not asked
    unsure = uncertain(target, found)
    certain = shape.bounded and profile.flags.context_must_fit and not shrinks and unsure is None
    knob = (CPU_KV_ENV if any(d.name == "KV space" for d in found)
            else ", ".join(profile.flags.memory_share) or "free memory")
    hint = ("use more GPUs (a larger TP), a smaller quantization, or free memory" if weights_short else
            f"lower the context ({', '.join(profile.flags.context) or 'the context length'}), give the KV cache "
            f"more memory ({knob}), or use more GPUs")
    if shrinks:
        hint = "llama.cpp's --fit will shrink the context it was not given until it fits"
    why = f" (not refused: {unsure})" if unsure and shape.bounded and profile.flags.context_must_fit else ""
    return Check(NAME, FAIL if certain else WARN, category, f"{what}; does not fit: " + "; ".join(parts) + why, hint,
                 facts=facts)


# Words of a command that move weights or KV cache off the devices counted here, or split the weights other than
# over TP x PP: the figures are no longer a bound, so a start is warned, never refused.
_OFFLOAD = ("offload",)  # vLLM / SGLang --cpu-offload-gb, vLLM --kv-offloading-*, --offload-group-size
_EXPERTS = ("expert-parallel", "--ep-size", "--ep", "--moe-")  # vLLM --enable-expert-parallel, SGLang --ep-size


def uncertain(target: Target, found: list[Device]) -> str | None:
    """Why the fit's figures are not a bound for this command (weights or KV cache elsewhere, weights split over
    experts or data-parallel ranks, llama.cpp placing layers across GPUs and RAM by itself); None when they are."""
    words = [w.lower() for w in (target.command.server if target.command is not None else target.argv)]
    if any(any(o in w for o in _OFFLOAD) for w in words if w.startswith("-")):
        return "an offload option moves part of it off the devices"
    if any(w.startswith(_EXPERTS) or "expert-parallel" in w for w in words if w.startswith("-")) or (
            target.command is not None and (target.command.dp or 1) > 1):
        return "expert or data parallelism splits the weights other than over TP x PP"
    if target.engine == "llamacpp" and any(d.name.startswith("GPU") for d in found):
        return "llama.cpp places layers across the GPUs and RAM itself (--fit)"
    return None
