"""GGUF header reader: where the tensor data must end, without reading any of it.

Layout (ggml/docs/gguf.md; llama.cpp ggml/src/gguf.cpp): magic ``GGUF``, u32 version (2 or 3: counts are
u64), u64 tensor count, u64 metadata count, the metadata key/values, then per tensor: name, u32 n_dims,
u64 dims, u32 ggml type, u64 offset (relative to the data section). The data section starts at the next
multiple of ``general.alignment`` (default 32) after the tensor infos. llama.cpp requires each tensor's
offset to equal the running sum of the previous tensors' sizes padded to the alignment, and refuses a
tensor whose data end lies beyond the file ("data is not within the file bounds, model is corrupted or
incomplete"). So the file must hold at least data_start + max(offset + nbytes).

Only the header pages are touched (a memory map, read lazily); the vocabulary arrays are skipped by length.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from firstlight.errors import FirstlightError
from firstlight.files import open_regular

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# ggml type -> (elements per block, bytes per block): gguf-py's GGML_QUANT_SIZES (tests compare the two).
GGML_BLOCK: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 40),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}
# metadata value type -> fixed size in bytes (8 = string and 9 = array are variable)
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32 = 8, 9, 4
MAX_NESTING = 16


class GgufError(FirstlightError, ValueError):
    """The header itself is unreadable (truncated, not GGUF, inconsistent)."""


@dataclass(frozen=True)
class GgufLayout:
    version: int
    tensors: int
    alignment: int
    data_start: int
    required_size: int  # data_start + the largest offset + nbytes
    unknown_types: tuple[int, ...] = ()  # ggml types this table does not size (their extent is a lower bound)


class _Reader:
    def __init__(self, buf: mmap.mmap | bytes, size: int) -> None:
        self.buf, self.size, self.pos = buf, size, 0

    def take(self, fmt: str) -> int:
        n = struct.calcsize(fmt)
        if self.pos + n > self.size:
            raise GgufError(f"header truncated at byte {self.pos} (file is {self.size} bytes)")
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return int(v)

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GgufError(f"header truncated at byte {self.pos} (needs {n} more bytes; file is {self.size})")
        self.pos += n

    def string(self) -> bytes:
        n = self.take("<Q")
        start = self.pos
        self.skip(n)
        return bytes(self.buf[start:self.pos])

    def skip_value(self, vtype: int, depth: int = 0) -> None:
        if depth > MAX_NESTING:  # llama.cpp reads no nested arrays at all; Python's stack must not be the limit
            raise GgufError(f"metadata arrays nested over {MAX_NESTING} deep at byte {self.pos}")
        if vtype in _SCALAR:
            self.skip(_SCALAR[vtype])
        elif vtype == _STRING:
            self.skip(self.take("<Q"))
        elif vtype == _ARRAY:
            item, count = self.take("<I"), self.take("<Q")
            if item in _SCALAR:
                self.skip(_SCALAR[item] * count)
            else:
                for _ in range(count):
                    self.skip_value(item, depth + 1)
        else:
            raise GgufError(f"unknown metadata value type {vtype} at byte {self.pos}")


def _nbytes(ggml_type: int, dims: list[int]) -> int | None:
    block = GGML_BLOCK.get(ggml_type)
    if block is None:
        return None
    elements = 1
    for d in dims:
        elements *= d
    per, size = block
    return elements // per * size


_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}  # integer value types


def read_numbers(path: Path, suffixes: tuple[str, ...]) -> tuple[str | None, dict[str, int]]:
    """(``general.architecture``, the integer metadata ``ARCH.SUFFIX`` for each of ``suffixes``: ``block_count``,
    ``attention.head_count_kv``...) of a GGUF file, keyed by the suffix (a vision tower's ``clip.*`` keys are not
    the model's); the rest of the header skipped by length. An integer array (a per-layer ``head_count_kv``) gives
    its largest value. GgufError when unreadable."""
    with open_regular(path) as f:
        size = f.seek(0, 2)
        if size < 24:
            raise GgufError(f"{size} bytes: too short for a GGUF header (24 bytes at least)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            r = _Reader(m, size)
            if bytes(m[:4]) != MAGIC:
                raise GgufError(f"not GGUF: magic {bytes(m[:4])!r}")
            r.pos = 4
            if r.take("<I") not in (2, 3):
                raise GgufError("GGUF version not supported (2 and 3 are)")
            r.take("<Q")
            arch: str | None = None
            found: dict[tuple[str, str], int] = {}
            for _ in range(r.take("<Q")):
                key = r.string().decode("utf-8", "replace")
                vtype = r.take("<I")
                prefix, _, rest = key.partition(".")
                suffix = rest if rest in suffixes else None
                if key == "general.architecture" and vtype == _STRING:
                    arch = r.string().decode("utf-8", "replace")
                elif suffix is not None and vtype in _INTS:
                    found[prefix, suffix] = r.take(_INTS[vtype])
                elif suffix is not None and vtype == _ARRAY:
                    start = r.pos
                    item, count = r.take("<I"), r.take("<Q")
                    if item in _INTS and 0 < count <= 4096:
                        found[prefix, suffix] = max(r.take(_INTS[item]) for _ in range(count))
                    else:
                        r.pos = start
                        r.skip_value(vtype)
                else:
                    r.skip_value(vtype)
            return arch, {suffix: v for (prefix, suffix), v in found.items() if prefix == arch}


def read_layout(path: Path) -> GgufLayout:
    """The layout of a GGUF file's header; GgufError when the header cannot be read."""
    with open_regular(path) as f:
        size = f.seek(0, 2)
        if size < 24:
            raise GgufError(f"{size} bytes: too short for a GGUF header (24 bytes at least)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return _parse(_Reader(m, size))


def _parse(r: _Reader) -> GgufLayout:
    if bytes(r.buf[:4]) != MAGIC:
        raise GgufError(f"not GGUF: magic {bytes(r.buf[:4])!r}")
    r.pos = 4
    version = r.take("<I")
    if version not in (2, 3):
        raise GgufError(f"GGUF version {version} is not supported (2 and 3 are)")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    alignment = DEFAULT_ALIGNMENT
    for _ in range(n_kv):
        key = r.string()
        vtype = r.take("<I")
        if key == b"general.alignment" and vtype == _UINT32:
            alignment = r.take("<I")
            if alignment == 0 or alignment & (alignment - 1):
                raise GgufError(f"general.alignment {alignment} is not a power of two")
        else:
            r.skip_value(vtype)
    expected, end, unknown = 0, 0, set()
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        if n_dims > 8:
            raise GgufError(f"tensor {name.decode(errors='replace')!r} has {n_dims} dimensions")
        dims = [r.take("<Q") for _ in range(n_dims)]
        ggml_type, offset = r.take("<I"), r.take("<Q")
        nbytes = _nbytes(ggml_type, dims)
        if nbytes is None:
            unknown.add(ggml_type)
            end = max(end, offset)
            continue
        if not unknown and offset != expected:
            raise GgufError(f"tensor {name.decode(errors='replace')!r} has offset {offset}, expected {expected}")
        expected = offset + -(-nbytes // alignment) * alignment
        end = max(end, offset + nbytes)
    data_start = -(-r.pos // alignment) * alignment
    return GgufLayout(version, n_tensors, alignment, data_start, data_start + end, tuple(sorted(unknown)))
