"""Is the checkpoint complete? Read from headers and directory entries only, never the weights.

A loader finds a truncated shard only when it reaches it, which on a 500 GB model can be many minutes into
the start. Before launch we can tell from the headers:

- safetensors: an 8-byte little-endian header length N, N bytes of JSON (tensor dtype, shape,
  ``data_offsets`` relative to the end of the header), then the data. The safetensors loader refuses a file
  whose size is not exactly 8 + N + the largest ``data_offsets`` end (MetadataIncompleteBuffer).
- ``model.safetensors.index.json``: every file in ``weight_map`` exists and holds at least as many
  tensors as are mapped to it (counted from the header bytes; named from a full parse when short).
- a Git LFS pointer (a ~130-byte text file) where the weights should be (a clone without ``git lfs pull``).
- a Hugging Face cache snapshot whose symlinks point to blobs that are gone.
- GGUF: the header's tensor data extent against the file size (gguf.py); split GGUFs: every part present.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from firstlight.files import NotRegularFile, kind, open_regular
from firstlight.formats import size as human_bytes
from firstlight.preflight.base import FAIL, OK, WARN, Check
from firstlight.preflight.gguf import GgufError, read_layout
from firstlight.preflight.target import Target

NAME = "checkpoint"
CATEGORY = "corrupt_weights"
LFS_PREFIX = b"version https://git-lfs.github.com/spec/v1"
MAX_SAFETENSORS_HEADER = 100_000_000  # the safetensors crate's own limit (MAX_HEADER_SIZE, HeaderTooLarge)
# A header in the writer's layout is read by a byte scan at any size; one that needs json's full parse is parsed
# only up to this size: a 100 MB header of small objects takes ~1 GB in Python (a real shard's is ~1 MB).
MAX_FULL_PARSE = 16 << 20
MAX_INDEX_BYTES = 64 << 20  # a real index of 100,000 tensors is ~10 MB
MAX_NAME = 255  # NAME_MAX: no file in the directory can have a longer name
INDEX_NAME = "model.safetensors.index.json"
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")
_SPLIT_GGUF = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")
_SHOWN = 5  # problems named in the evidence; the rest are counted


@dataclass
class Scan:
    """What the checkpoint scan found: weight files (resolved), their bytes, and the problems."""

    root: Path
    files: list[Path] = field(default_factory=list)
    total_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    current: Path | None = None  # the file being read now: named when the preflight deadline passes


def lfs_pointer(path: Path, head: bytes) -> str | None:
    """Evidence when ``head`` (the file's first bytes) is a Git LFS pointer, else None."""
    if not head.startswith(LFS_PREFIX):
        return None
    m = re.search(rb"\nsize (\d+)", head)
    real = f" of a {human_bytes(int(m.group(1)))} file" if m else ""
    return f"{path.name} is a Git LFS pointer ({len(head)} bytes){real}, not the weights"


# The fast path: each tensor's dtype, shape and data_offsets read straight from the header bytes in the order
# the safetensors writer puts them (a JSON parse of 64 headers of thousands of tensors each costs most of the
# one-second budget); json.loads when any entry is written otherwise.
_TENSOR = re.compile(rb'"dtype"\s*:\s*"(\w+)"\s*,\s*"shape"\s*:\s*\[([\d\s,]*)\]\s*,\s*'
                     rb'"data_offsets"\s*:\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]')
# Bytes per element (the safetensors crate's Dtype::bitsize / 8); a dtype not here is not size-checked.
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
               "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_Tensor = tuple[int, int, str, str, str]  # begin, end, name, dtype, shape (as written)


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _parse_header(path: Path, raw: bytes) -> tuple[list[_Tensor], str | None]:
    """The tensors by a full JSON parse, each entry's types checked as the loader checks them."""
    try:
        header = json.loads(raw)
    except RecursionError:
        return [], f"{path.name}: the safetensors header is nested too deeply to be a header"
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [], f"{path.name}: the {len(raw)}-byte safetensors header is not JSON ({e})"
    if not isinstance(header, dict):
        return [], f"{path.name}: the safetensors header is not a JSON object"
    tensors: list[_Tensor] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        shape = info.get("shape") if isinstance(info, dict) else None
        dtype = info.get("dtype") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
            return tensors, f"{path.name}: tensor {name!r} has no valid data_offsets ({str(offsets)[:60]})"
        if not (isinstance(shape, list) and all(map(_is_count, shape))) or not isinstance(dtype, str):
            return tensors, f"{path.name}: tensor {name!r} has no valid dtype and shape"
        tensors.append((offsets[0], offsets[1], repr(name), dtype, ",".join(map(str, shape))))
    return tensors, None


def _fast_tensors(raw: bytes) -> list[_Tensor] | None:
    """The tensors from the header bytes, or None when an entry is not in the writer's layout."""
    found = _TENSOR.findall(raw)
    body = raw.rstrip()
    if not found or len(found) != raw.count(b'"data_offsets"') or body[:1] != b"{" or body[-1:] != b"}":
        return None
    return [(int(b), int(e), "", dtype.decode(), shape.decode()) for dtype, shape, b, e in found]


def _nbytes(dtype: str, shape: str) -> int | None:
    size = DTYPE_BYTES.get(dtype)
    if size is None:
        return None
    return math.prod(int(d) for d in shape.split(",") if d.strip()) * size


def _layout_problem(path: Path, tensors: list[_Tensor]) -> str | None:
    """What the safetensors loader refuses in a header whose entries are well typed: offsets that do not tile
    the data from 0 without gap or overlap, and a shape whose bytes are not its offsets' span."""
    expected = 0
    sizes: dict[tuple[str, str], int | None] = {}  # a model has a few dozen distinct shapes
    for begin, end, name, dtype, shape in sorted(tensors):
        if begin != expected or end < begin:
            how = "overlap" if begin < expected else ("a gap" if begin > expected else "end before begin")
            return f"{path.name}: data_offsets [{begin}, {end}] ({how} after byte {expected})"
        key = (dtype, shape)
        if key not in sizes:
            sizes[key] = _nbytes(dtype, shape)
        nbytes = sizes[key]
        if nbytes is not None and nbytes != end - begin:
            who = f"tensor {name}" if name else f"the tensor at [{begin}, {end}]"
            return (f"{path.name}: {who}: shape [{shape}] of {dtype} is {nbytes} bytes, its data_offsets span "
                    f"{end - begin}")
        expected = end
    return None


def tensor_names(path: Path) -> set[str]:
    """Every tensor name in a safetensors header (a full parse: for the evidence of a failure)."""
    with open_regular(path) as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k for k in header if k != "__metadata__"}


def safetensors_header(path: Path, size: int) -> tuple[int, str | None]:
    """(tensor count, problem) from a safetensors header, checking the file size against it."""
    with open_regular(path) as f:
        head = f.read(8)
        if len(head) < 8:
            lfs = lfs_pointer(path, head)
            return 0, lfs or f"{path.name}: {size} bytes, too short for a safetensors header"
        (n,) = struct.unpack("<Q", head)
        if n > MAX_SAFETENSORS_HEADER or 8 + n > size:
            rest = head + f.read(200)
            lfs = lfs_pointer(path, rest)
            if lfs:
                return 0, lfs
            if 8 + n > size and n <= MAX_SAFETENSORS_HEADER:
                return 0, f"{path.name}: {size} bytes, its header alone needs {8 + n} (truncated)"
            return 0, f"{path.name}: not a safetensors file (header length {n})"
        raw = f.read(n)
    fast = _fast_tensors(raw)
    if fast is None and n > MAX_FULL_PARSE:
        return 0, (f"{path.name}: a {human_bytes(n)} safetensors header not in the layout the safetensors writer "
                   f"uses (not parsed: over {human_bytes(MAX_FULL_PARSE)})")
    tensors, problem = (fast, None) if fast is not None else _parse_header(path, raw)
    count = len(tensors)
    problem = problem or _layout_problem(path, tensors)
    if problem:
        return count, problem
    end = max((t[1] for t in tensors), default=0)
    want = 8 + n + end
    if size != want:
        how = "truncated" if size < want else "longer than its header says"
        return count, f"{path.name}: {size} bytes on disk, the header says {want} (8 + {n} + {end}): {how}"
    return count, None


def _broken_links(directory: Path) -> list[str]:
    out = []
    for entry in os.scandir(directory):
        if entry.is_symlink() and not os.path.exists(entry.path):
            out.append(f"{entry.name} -> {os.readlink(entry.path)} (the link's target is missing)")
    return out


def _check_gguf(path: Path, size: int, scan: Scan) -> None:
    try:
        layout = read_layout(path)
    except GgufError as e:
        with open_regular(path) as f:
            lfs = lfs_pointer(path, f.read(512))
        scan.problems.append(lfs or f"{path.name}: {size} bytes: {e}")
        return
    except OSError as e:
        scan.problems.append(f"{path.name}: cannot read ({e.strerror})")
        return
    if size < layout.required_size:
        scan.problems.append(f"{path.name}: {size} bytes on disk, its {layout.tensors} tensors end at byte "
                             f"{layout.required_size} (truncated: {human_bytes(layout.required_size - size)} missing)")
    if layout.unknown_types:
        scan.notes.append(f"{path.name}: ggml types {list(layout.unknown_types)} not sized here; extent is a "
                          "lower bound")
    m = _SPLIT_GGUF.match(path.name)
    if m and m["i"] == "00001":
        missing = [f"{m['stem']}-{i:05d}-of-{m['n']}.gguf" for i in range(2, int(m["n"]) + 1)
                   if not (path.parent / f"{m['stem']}-{i:05d}-of-{m['n']}.gguf").exists()]
        if missing:
            scan.problems.append(f"split GGUF {path.name}: parts missing: {', '.join(missing[:_SHOWN])}")


def _weight_files(directory: Path, index: dict[str, str] | None) -> list[Path]:
    if index is not None:
        return [directory / name for name in sorted(set(index.values()))]
    files = sorted(p for p in directory.iterdir() if p.name.endswith(WEIGHT_SUFFIXES))
    safetensors = [p for p in files if p.suffix == ".safetensors"]
    ggufs = [p for p in files if p.suffix == ".gguf"]
    return safetensors or ggufs or files  # a repository often ships .bin twins the loader skips


def _bad_entry(directory: Path, name: object) -> str | None:
    """Why an index value cannot name a shard in ``directory`` (the loader joins it to the directory), or None."""
    if not isinstance(name, str):
        return f"a value is {type(name).__name__}, not a file name"
    shown = repr(name[:60] + ("..." if len(name) > 60 else ""))
    if not name:
        return "a value is empty"
    if "\0" in name:
        return f"the value {shown} holds NUL"
    if len(name) > MAX_NAME:
        return f"a value of {len(name)} characters (longer than any file name)"
    inside = os.path.normpath(os.path.join(directory, name))
    if os.path.isabs(name) or not inside.startswith(os.path.normpath(directory) + os.sep):
        return f"the value {shown} points outside the model directory"
    return None


def _read_index(directory: Path, scan: Scan) -> dict[str, str] | None:
    path = directory / INDEX_NAME
    if not os.path.lexists(path):
        return None
    scan.current = path
    raw = b""
    try:
        with open_regular(path) as f:
            raw = f.read(MAX_INDEX_BYTES + 1)
        if len(raw) > MAX_INDEX_BYTES:
            raise ValueError(f"larger than {human_bytes(MAX_INDEX_BYTES)}")
        weight_map = json.loads(raw)["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError("weight_map is not an object")
    except NotRegularFile as e:
        scan.problems.append(str(e))  # it names the file already
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        scan.problems.append(lfs_pointer(path, raw[:512]) or f"{INDEX_NAME}: unreadable ({type(e).__name__}: {e})")
        return None
    why: dict[str, str | None] = {}  # each distinct value once: 100,000 tensors map to a few shards
    for v in weight_map.values():
        key = v if isinstance(v, str) else repr(v)
        if key not in why:
            why[key] = _bad_entry(directory, v)
    bad = sorted({w for w in why.values() if w})
    if bad:
        scan.problems.append(f"{INDEX_NAME}: " + "; ".join(bad[:_SHOWN]))
    return {t: v for t, v in weight_map.items() if isinstance(v, str) and why[v] is None}


def scan_checkpoint(root: Path) -> Scan:
    """Every completeness problem under ``root`` (a weights file or a model directory)."""
    return scan_into(Scan(root))


def scan_into(scan: Scan) -> Scan:
    """:func:`scan_checkpoint` filling a Scan the caller holds (it reads ``current`` when the scan is stuck)."""
    root = scan.root
    scan.current = root
    try:
        mode = os.stat(root).st_mode
    except OSError as e:
        scan.problems.append(f"{root.name}: cannot stat ({e.strerror})")
        return scan
    if stat.S_ISREG(mode):
        files, index = [root], None
    elif stat.S_ISDIR(mode):
        scan.problems.extend(_broken_links(root))
        index = _read_index(root, scan)
        files = _weight_files(root, index)
    else:
        scan.problems.append(f"{root.name} is {kind(mode)}, not a weights file or a model directory")
        return scan
    mapped = Counter(index.values()) if index is not None else Counter()
    for path in files:
        scan.current = path
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if not path.is_symlink():  # broken links are already named
                scan.problems.append(f"{path.name}: listed in {INDEX_NAME} but missing")
            continue
        except OSError as e:  # a symlink loop (ELOOP), a name too long, a permission
            scan.problems.append(f"{path.name}: cannot stat ({e.strerror})")
            continue
        if not stat.S_ISREG(st.st_mode):
            scan.problems.append(f"{path.name} is {kind(st.st_mode)}, not a regular file")
            continue
        size = st.st_size
        scan.files.append(path)
        scan.total_bytes += size
        if path.suffix == ".safetensors":
            count, problem = safetensors_header(path, size)
            if problem:
                scan.problems.append(problem)
            elif mapped[path.name] > count:  # more tensors mapped to it than it holds: name one
                assert index is not None
                absent = sorted({t for t, f in index.items() if f == path.name} - tensor_names(path))
                scan.problems.append(f"{path.name}: {len(absent)} tensors mapped to it in {INDEX_NAME} are not "
                                     f"in its header (e.g. {absent[0] if absent else '?'})")
        elif path.suffix == ".gguf":
            _check_gguf(path, size, scan)
        elif size < 1024:
            with open_regular(path) as f:
                lfs = lfs_pointer(path, f.read(1024))
            if lfs:
                scan.problems.append(lfs)
    scan.current = None
    return scan


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", ".", "~")) or model.endswith(WEIGHT_SUFFIXES) or model.count("/") != 1


def check_checkpoint(target: Target, scan: Scan | None) -> Check:
    if target.model is None:
        return Check(NAME, OK, CATEGORY, "skipped: no model path in the command")
    if scan is None:
        if _looks_like_path(target.model):
            return Check(NAME, FAIL, "model_not_found", f"{target.model} does not exist",
                         "check the model path in the command")
        return Check(NAME, OK, CATEGORY, f"{target.model} is not in the local Hugging Face cache: the server "
                     "will download it (not checked)")
    if scan.problems:
        shown = scan.problems[:_SHOWN]
        more = f"; and {len(scan.problems) - _SHOWN} more" if len(scan.problems) > _SHOWN else ""
        lfs = any("Git LFS pointer" in p for p in scan.problems)
        hint = ("fetch the weights: `git lfs pull` in the model directory (or download with huggingface-cli)"
                if lfs else "re-download the files named (the copy on disk is incomplete or damaged)")
        where = scan.root.parent if scan.root.is_file() else scan.root  # the problems name the files in it
        return Check(NAME, FAIL, CATEGORY, f"in {where}: " + "; ".join(shown) + more, hint)
    if not scan.files:
        return Check(NAME, WARN, "model_not_found", f"{scan.root}: no weight files ({', '.join(WEIGHT_SUFFIXES)})",
                     "check the model path in the command")
    notes = f"; {'; '.join(scan.notes)}" if scan.notes else ""
    files = f"{len(scan.files)} weight file{'s' if len(scan.files) > 1 else ''}"
    return Check(NAME, OK, CATEGORY, f"{scan.root}: {files}, {human_bytes(scan.total_bytes)}, sizes match their headers"
                 f"{notes}")
