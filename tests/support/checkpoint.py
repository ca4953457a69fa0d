"""Helpers shared by tests/e2e/preflight/test_checkpoint.py, tests/unit/preflight/test_checkpoint.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any


def _raw_safetensors(path: Path, header: Any, data: int, pad: bytes = b"") -> int:
    raw = (json.dumps(header).encode() if not isinstance(header, bytes) else header) + pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + data)
    return 8 + len(raw) + data


def _gguf(path: Path) -> int:
    """A small real GGUF written by gguf-py (llama.cpp's own writer); returns its size."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("a", np.ones((64, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.stat().st_size
