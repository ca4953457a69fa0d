"""Convert a GGUF checkpoint to an HF safetensors directory in bf16 (run with the vLLM venv's python).

Called by scripts/setup_vllm.py. transformers 5 keeps GGUF weights quantized when it loads them and then
refuses ``save_pretrained``, so this builds the model from the GGUF's config, loads the dequantized state
dict into it, casts to bf16 and saves it, with the tokenizer. Deterministic: the same pinned packages and
the same GGUF give the same bytes (setup_vllm.py pins their sha256).

Usage: python convert_gguf_to_hf.py MODEL.gguf OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    torch.manual_seed(0)  # from_config initialises weights; every one is overwritten below
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    checkpoint = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)
    tensors = {name: torch.as_tensor(value) for name, value in checkpoint["tensors"].items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise SystemExit(f"state dict mismatch: missing {sorted(set(missing) - tied)}, unexpected {unexpected}")
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out, safe_serialization=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.save_pretrained(out)


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: convert_gguf_to_hf.py MODEL.gguf OUT_DIR")
    convert(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))


if __name__ == "__main__":
    main()
