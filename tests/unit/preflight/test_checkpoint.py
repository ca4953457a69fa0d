"""The checkpoint check (``firstlight.preflight.checkpoint``) at its edges, on real files: every way a header, an
index or a directory can be wrong, and what the check then says. Written to kill the mutants scripts/mutation.sh
found surviving (test_preflight.py covers the main cases and the CLI).

The in-process tests of this subject; the others: ``tests/e2e/preflight/test_checkpoint.py``.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_preflight.py``.
"""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from firstlight.preflight import PreflightOptions, run_preflight
from firstlight.preflight.base import FAIL, OK, WARN
from firstlight.preflight.checkpoint import (
    INDEX_NAME,
    MAX_SAFETENSORS_HEADER,
    check_checkpoint,
    lfs_pointer,
    safetensors_header,
    scan_checkpoint,
    tensor_names,
)
from firstlight.preflight.target import read_target
from tests.support.checkpoint import _gguf, _raw_safetensors
from tests.support.preflight import make_checkpoint, write_safetensors

LFS = ("version https://git-lfs.github.com/spec/v1\n"
       "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 4955472224\n")


def _check(path: Path) -> Any:
    return check_checkpoint(read_target(["vllm", "serve", str(path)]), scan_checkpoint(path))


def test_lfs_pointer_names_the_real_size_when_it_says_it():
    assert lfs_pointer(Path("a.safetensors"), b"not a pointer") is None
    said = lfs_pointer(Path("a.safetensors"), LFS.encode())
    assert said == f"a.safetensors is a Git LFS pointer ({len(LFS)} bytes) of a 5.0 GB file, not the weights"
    bare = lfs_pointer(Path("a.bin"), b"version https://git-lfs.github.com/spec/v1\n")
    assert bare == "a.bin is a Git LFS pointer (43 bytes), not the weights"


def test_offsets_that_are_not_integers_fail_as_the_loader_refuses_them(tmp_path: Path):
    # safetensors reads data_offsets as (usize, usize): 8.0 is refused by the loader, so it is a fail here
    header = b'{"b": {"dtype": "U8", "shape": [8], "data_offsets": [8.0, 16.0]}, ' \
             b'"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}, "__metadata__": {"format": "pt"}}'
    size = _raw_safetensors(tmp_path / "m.safetensors", header, 16)
    assert safetensors_header(tmp_path / "m.safetensors", size)[1] == \
        "m.safetensors: tensor 'b' has no valid data_offsets ([8.0, 16.0])"
    meta_first = b'{"__metadata__": {"format": "pt"}, "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}'
    size = _raw_safetensors(tmp_path / "m.safetensors", meta_first, 8)
    assert safetensors_header(tmp_path / "m.safetensors", size) == (1, None)  # the metadata is skipped, not the end


def test_headers_that_are_not_what_safetensors_writes_fail_with_the_reason(tmp_path: Path):
    p = tmp_path / "m.safetensors"
    size = _raw_safetensors(p, b"{not json}", 0)
    count, problem = safetensors_header(p, size)
    assert count == 0 and problem is not None and problem.startswith("m.safetensors: the 10-byte safetensors header "
                                                                     "is not JSON")
    size = _raw_safetensors(p, [1, 2], 0)
    assert safetensors_header(p, size) == (0, "m.safetensors: the safetensors header is not a JSON object")
    size = _raw_safetensors(p, {"w": {"dtype": "U8", "shape": [1]}}, 0)
    assert safetensors_header(p, size) == (0, "m.safetensors: tensor 'w' has no valid data_offsets (None)")


def test_a_file_too_short_for_a_header_or_whose_header_is_cut(tmp_path: Path):
    p = tmp_path / "m.safetensors"
    p.write_bytes(b"\x01\x02\x03")
    assert safetensors_header(p, 3) == (0, "m.safetensors: 3 bytes, too short for a safetensors header")
    p.write_bytes(b"version")  # 7 bytes of an LFS pointer's start: still too short to say more
    assert safetensors_header(p, 7)[1] == "m.safetensors: 7 bytes, too short for a safetensors header"
    p.write_bytes(struct.pack("<Q", 100) + b"{" * 50)
    assert safetensors_header(p, 58) == (0, "m.safetensors: 58 bytes, its header alone needs 108 (truncated)")
    p.write_bytes(struct.pack("<Q", MAX_SAFETENSORS_HEADER + 1) + b"{}")
    assert safetensors_header(p, 10)[1] == f"m.safetensors: not a safetensors file (header length " \
                                          f"{MAX_SAFETENSORS_HEADER + 1})"


def test_a_header_that_fills_the_file_exactly_is_not_cut(tmp_path: Path):
    p = tmp_path / "m.safetensors"
    size = _raw_safetensors(p, {}, 0)  # no tensors: 8 + N bytes, nothing after
    assert safetensors_header(p, size) == (0, None)


def test_an_lfs_pointer_read_as_a_safetensors_header_is_named_as_such(tmp_path: Path):
    p = tmp_path / "m.safetensors"
    p.write_text(LFS)
    count, problem = safetensors_header(p, len(LFS))
    assert count == 0 and problem is not None and "Git LFS pointer" in problem and "5.0 GB" in problem


def test_tensor_names_leave_out_the_metadata(tmp_path: Path):
    p = tmp_path / "m.safetensors"
    write_safetensors(p, {"a.weight": 8, "b.weight": 8})
    assert tensor_names(p) == {"a.weight", "b.weight"}


def test_more_than_five_problems_are_counted_and_an_lfs_pointer_asks_for_git_lfs_pull(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m", shards=7)
    shards = sorted(d.glob("*.safetensors"))
    for s in shards:
        s.write_text(LFS)
    c = _check(d)
    assert c.status == FAIL and c.category == "corrupt_weights"
    assert c.evidence.startswith(f"in {d}: ") and c.evidence.endswith("; and 2 more")
    assert c.evidence.count("Git LFS pointer") == 5
    assert c.hint == "fetch the weights: `git lfs pull` in the model directory (or download with huggingface-cli)"


def test_exactly_five_problems_are_all_named_without_a_count(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m", shards=5)
    for s in sorted(d.glob("*.safetensors")):
        with open(s, "r+b") as f:
            f.truncate(s.stat().st_size - 1)
    c = _check(d)
    assert c.status == FAIL and "more" not in c.evidence and c.evidence.count("truncated") == 5
    assert c.hint == "re-download the files named (the copy on disk is incomplete or damaged)"


def test_a_single_file_is_named_with_its_directory(tmp_path: Path):
    p = tmp_path / "model.safetensors"
    write_safetensors(p, {"w": 64})
    c = _check(p)
    assert c.status == OK and c.evidence.startswith(f"{p}: 1 weight file, ") and "sizes match" in c.evidence
    with open(p, "r+b") as f:
        f.truncate(p.stat().st_size - 1)
    c = _check(p)
    assert c.status == FAIL and c.evidence.startswith(f"in {tmp_path}: model.safetensors:")


def test_a_directory_without_weights_is_a_warning(tmp_path: Path):
    (tmp_path / "config.json").write_text("{}")
    c = _check(tmp_path)
    assert c.status == WARN and c.category == "model_not_found" and "no weight files" in c.evidence


def test_safetensors_win_over_bin_twins_and_ggufs(tmp_path: Path):
    write_safetensors(tmp_path / "model.safetensors", {"w": 64})
    (tmp_path / "pytorch_model.bin").write_text(LFS)  # never read by the loader: not a problem
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    scan = scan_checkpoint(tmp_path)
    assert [f.name for f in scan.files] == ["model.safetensors"] and not scan.problems


def test_a_small_bin_that_is_an_lfs_pointer_fails(tmp_path: Path):
    (tmp_path / "pytorch_model.bin").write_text(LFS)
    (tmp_path / "big.bin").write_bytes(b"\x80" * 2048)  # over 1 KiB: not checked for a pointer
    scan = scan_checkpoint(tmp_path)
    assert len(scan.problems) == 1 and "pytorch_model.bin is a Git LFS pointer" in scan.problems[0]
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x02" + b"x" * 1000)  # a small real pickle: fine
    assert not scan_checkpoint(tmp_path).problems


def test_an_index_that_is_not_an_index_fails_naming_it(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    index = d / INDEX_NAME
    for content, why in [("[]", "unreadable"), ('{"weight_map": []}', "weight_map is not an object"),
                         ('{"metadata": {}}', "unreadable")]:
        index.write_text(content)
        scan = scan_checkpoint(d)
        assert any(p.startswith(f"{INDEX_NAME}: unreadable") and why in p for p in scan.problems), (content,
                                                                                                  scan.problems)
    index.write_text('{"weight_map": {"w": 5}}')
    assert f"{INDEX_NAME}: a value is int, not a file name" in scan_checkpoint(d).problems
    index.write_text(LFS)
    assert any("Git LFS pointer" in p for p in scan_checkpoint(d).problems)


def test_a_broken_link_is_named_once(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m", shards=1)
    shard = next(d.glob("*.safetensors"))
    target = tmp_path / "blob"
    shard.rename(target)
    os.symlink(target, shard)
    target.unlink()
    scan = scan_checkpoint(d)
    assert scan.problems == [f"{shard.name} -> {target} (the link's target is missing)"]


def test_a_model_id_is_not_a_path_unless_it_looks_like_one(tmp_path: Path):
    for model in ("acme/tiny", "acme/tiny-v2"):
        c = check_checkpoint(read_target(["vllm", "serve", model]), None)
        assert c.status == OK and "will download it" in c.evidence
    for model in (str(tmp_path / "absent"), "/m", "./m", "~/m", "m.gguf", "a/b/c", "solo"):
        c = check_checkpoint(read_target(["vllm", "serve", model]), None)
        assert c.status == FAIL and c.category == "model_not_found" and c.evidence == f"{model} does not exist"
    c = check_checkpoint(read_target(["python", "-c", "pass"]), None)
    assert c.status == OK and c.evidence.startswith("skipped")


def test_a_split_gguf_names_every_missing_part(tmp_path: Path):
    first = tmp_path / "m-00001-of-00004.gguf"
    _gguf(first)
    _gguf(tmp_path / "m-00003-of-00004.gguf")
    problems = scan_checkpoint(first).problems
    assert problems == ["split GGUF m-00001-of-00004.gguf: parts missing: m-00002-of-00004.gguf, m-00004-of-00004.gguf"]
    _gguf(tmp_path / "m-00002-of-00004.gguf")
    _gguf(tmp_path / "m-00004-of-00004.gguf")
    assert scan_checkpoint(first).problems == []
    assert scan_checkpoint(tmp_path / "m-00003-of-00004.gguf").problems == []  # only the first part lists the rest


def test_a_truncated_gguf_says_how_much_is_missing(tmp_path: Path):
    p = tmp_path / "m.gguf"
    size = _gguf(p)
    with open(p, "r+b") as f:
        f.truncate(size - 4096)
    (problem,) = scan_checkpoint(p).problems
    assert problem.startswith(f"m.gguf: {size - 4096} bytes on disk, its 1 tensors end at byte ")
    assert problem.endswith("(truncated: 4.1 kB missing)"), problem


def test_a_gguf_that_is_an_lfs_pointer_or_not_a_gguf_says_which(tmp_path: Path):
    p = tmp_path / "m.gguf"
    p.write_text(LFS)
    (problem,) = scan_checkpoint(p).problems
    assert "m.gguf is a Git LFS pointer" in problem and "5.0 GB" in problem
    p.write_bytes(b"NOTGGUF" + b"\0" * 600)
    (problem,) = scan_checkpoint(p).problems
    assert problem.startswith("m.gguf: 607 bytes: ") and "Git LFS" not in problem


def test_the_header_length_limit_is_the_safetensors_crates(tmp_path: Path):
    assert MAX_SAFETENSORS_HEADER == 100_000_000  # safetensors' MAX_HEADER_SIZE: HeaderTooLarge above it


def _retype_first_tensor(path: Path, ggml_type: int) -> None:
    """Rewrite the ggml type of tensor "a" in a GGUF written by ``_gguf``: its info is the name (u64 length 1,
    "a"), n_dims (u32), the dims (u64 each), then the type (u32)."""
    raw = bytearray(path.read_bytes())
    at = raw.index(struct.pack("<Q", 1) + b"a") + 9
    (n_dims,) = struct.unpack_from("<I", raw, at)
    struct.pack_into("<I", raw, at + 4 + 8 * n_dims, ggml_type)
    path.write_bytes(bytes(raw))


def test_a_gguf_with_a_ggml_type_newer_than_the_table_passes_with_a_note(tmp_path: Path):
    """llama.cpp adds ggml types (quantizations) over time; a tensor of a type the layout reader cannot size is
    not a fault of the file: the check passes and says its extent is a lower bound."""
    p = tmp_path / "m.gguf"
    _gguf(p)
    _retype_first_tensor(p, 200)
    scan = scan_checkpoint(p)
    assert scan.problems == []
    assert scan.notes == ["m.gguf: ggml types [200] not sized here; extent is a lower bound"]
    c = _check(p)
    assert c.status == OK and c.evidence.endswith("sizes match their headers; "
                                                  "m.gguf: ggml types [200] not sized here; extent is a lower bound")


# -- the full parse (a header not in the writer's layout: keys in another order), entry by entry ----------------
def _entry(offsets: Any = (0, 8), shape: Any = (8,), dtype: Any = "U8") -> dict[str, Any]:
    """An entry whose keys are not in the writer's order (data_offsets first), so the full parse reads it."""
    return {"data_offsets": list(offsets) if isinstance(offsets, tuple) else offsets,
            "shape": list(shape) if isinstance(shape, tuple) else shape, "dtype": dtype}


def _full(tmp_path: Path, header: dict[str, Any], data: int) -> list[str]:
    p = tmp_path / "m.safetensors"
    _raw_safetensors(p, header, data)
    return scan_checkpoint(p).problems


def test_a_well_formed_header_in_another_key_order_passes_the_full_parse(tmp_path: Path):
    """Offsets from 0, a 2-D shape, metadata first and last: the full parse accepts what the loader accepts."""
    header = {"__metadata__": {"format": "pt"}, "a": _entry((0, 16), (2, 4), "F16"),
              "b": _entry((16, 24), (8,), "U8"), "c": _entry((24, 24), (0,), "F32")}
    assert _full(tmp_path, header, 24) == []
    header = {"a": _entry((0, 16), (2, 4), "F16"), "__metadata__": {"format": "pt"}}
    assert _full(tmp_path, header, 16) == []


def test_the_full_parse_reads_every_entry_after_the_metadata(tmp_path: Path):
    header = {"__metadata__": {"format": "pt"}, "a": _entry((0, 8)), "b": _entry((8, 16), (4,))}
    assert _full(tmp_path, header, 16) == \
        ["m.safetensors: tensor 'b': shape [4] of U8 is 4 bytes, its data_offsets span 8"]


def test_the_full_parse_names_each_kind_of_bad_entry(tmp_path: Path):
    def problem(entry: Any, data: int = 8) -> str:
        (only,) = _full(tmp_path, {"__metadata__": {"format": "pt"}, "a": entry}, data)
        return only

    assert problem([0, 8]) == "m.safetensors: tensor 'a' has no valid data_offsets (None)"  # not an object
    assert problem(_entry([0, 8, 16]), 16) == "m.safetensors: tensor 'a' has no valid data_offsets ([0, 8, 16])"
    assert problem(_entry([False, 8])) == "m.safetensors: tensor 'a' has no valid data_offsets ([False, 8])"
    assert problem(_entry([-1, 8])) == "m.safetensors: tensor 'a' has no valid data_offsets ([-1, 8])"
    many = [0] * 30
    assert problem(_entry(many)) == f"m.safetensors: tensor 'a' has no valid data_offsets ({str(many)[:60]})"
    no_shape = "m.safetensors: tensor 'a' has no valid dtype and shape"
    for bad in (_entry(shape=None), _entry(shape={}), _entry(shape=[True]), _entry(shape=[-8]), _entry(dtype=1),
                {"data_offsets": [0, 8], "dtype": "U8"}, {"data_offsets": [0, 8], "shape": [8]}):
        assert problem(bad) == no_shape, bad


def test_the_full_parse_names_the_tensor_whose_offsets_leave_a_gap(tmp_path: Path):
    header = {"a": _entry((0, 8)), "b": _entry((16, 24))}
    assert _full(tmp_path, header, 24) == ["m.safetensors: data_offsets [16, 24] (a gap after byte 8)"]
    header = {"a": _entry((0, 8)), "b": _entry((8, 16), (2,), "F16")}
    assert _full(tmp_path, header, 16) == ["m.safetensors: tensor 'b': shape [2] of F16 is 4 bytes, its "
                                           "data_offsets span 8"]


def test_what_is_neither_a_file_nor_a_directory_is_named_by_its_kind(tmp_path: Path):
    fifo = tmp_path / "model"
    os.mkfifo(fifo)
    assert scan_checkpoint(fifo).problems == ["model is a FIFO, not a weights file or a model directory"]
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "a.safetensors")
    write_safetensors(tmp_path / "d" / "b.safetensors", {"w": 8})
    (tmp_path / "d" / "c.safetensors").mkdir()
    scan = scan_checkpoint(tmp_path / "d")
    assert scan.problems == ["a.safetensors is a FIFO, not a regular file",
                             "c.safetensors is a directory, not a regular file"]
    assert scan.files == [tmp_path / "d" / "b.safetensors"] and scan.current is None


def test_every_file_after_one_that_cannot_be_stated_is_still_checked(tmp_path: Path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.safetensors").symlink_to("a.safetensors")  # a loop: ELOOP
    write_safetensors(d / "b.safetensors", {"w": 8})
    write_safetensors(d / "c.safetensors", {"w": 4})
    scan = scan_checkpoint(d)
    assert "a.safetensors: cannot stat (Too many levels of symbolic links)" in scan.problems
    assert scan.files == [d / "b.safetensors", d / "c.safetensors"]
    assert scan.total_bytes == (d / "b.safetensors").stat().st_size + (d / "c.safetensors").stat().st_size


def test_a_root_that_cannot_be_stated_says_why(tmp_path: Path):
    assert scan_checkpoint(tmp_path / "absent").problems == ["absent: cannot stat (No such file or directory)"]


def test_only_a_file_under_1_kib_is_read_as_a_possible_lfs_pointer(tmp_path: Path):
    p = tmp_path / "pytorch_model.bin"
    p.write_text(LFS.ljust(1023))
    assert scan_checkpoint(p).problems == ["pytorch_model.bin is a Git LFS pointer (1023 bytes) of a 5.0 GB file, "
                                           "not the weights"]
    p.write_text(LFS.ljust(1024))
    assert scan_checkpoint(p).problems == []  # 1 KiB or more: real weights, never a pointer


# -- what the check says, outcome by outcome (the checkpoint's rerun: exact evidence, fix and name) -------------
def _said(c: Any) -> tuple[str, str, str, str, str | None]:
    return c.name, c.status, c.category, c.evidence, c.hint


def test_each_outcome_of_the_check_says_exactly_what_it_found(tmp_path: Path):
    model = str(tmp_path / "absent")
    assert _said(check_checkpoint(read_target(["vllm", "serve", model]), None)) == (
        "checkpoint", FAIL, "model_not_found", f"{model} does not exist", "check the model path in the command")
    assert _said(check_checkpoint(read_target(["vllm", "serve", "org/model"]), None)) == (
        "checkpoint", OK, "corrupt_weights", "org/model is not in the local Hugging Face cache: the server will "
        "download it (not checked)", None)
    assert _said(check_checkpoint(read_target(["python", "-c", "pass"]), None)) == (
        "checkpoint", OK, "corrupt_weights", "skipped: no model path in the command", None)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _said(_check(empty)) == ("checkpoint", WARN, "model_not_found", f"{empty}: no weight files (.safetensors, "
                                    ".gguf, .bin, .pt, .pth)", "check the model path in the command")
    two = tmp_path / "two"
    two.mkdir()
    size = write_safetensors(two / "a.safetensors", {"w": 8}) + write_safetensors(two / "b.safetensors", {"w": 8})
    assert _said(_check(two)) == ("checkpoint", OK, "corrupt_weights",
                                  f"{two}: 2 weight files, {size} B, sizes match their headers", None)
    one = two / "a.safetensors"
    assert _check(one).evidence == f"{one}: 1 weight file, {size // 2} B, sizes match their headers"


def test_a_failing_check_joins_its_problems_and_counts_those_not_shown(tmp_path: Path):
    d = tmp_path / "d"
    d.mkdir()
    for i in range(2):
        (d / f"m{i}.safetensors").write_bytes(b"tiny")
    c = _check(d)
    assert _said(c) == ("checkpoint", FAIL, "corrupt_weights", f"in {d}: m0.safetensors: 4 bytes, too short for a "
                        "safetensors header; m1.safetensors: 4 bytes, too short for a safetensors header",
                        "re-download the files named (the copy on disk is incomplete or damaged)")
    for i in range(2, 7):
        (d / f"m{i}.safetensors").write_bytes(b"tiny")
    assert _check(d).evidence.endswith("m4.safetensors: 4 bytes, too short for a safetensors header; and 2 more")


def test_notes_follow_the_evidence_joined_one_after_the_other(tmp_path: Path):
    for name in ("a.gguf", "b.gguf"):
        _gguf(tmp_path / name)
        _retype_first_tensor(tmp_path / name, 200)
    evidence = _check(tmp_path).evidence
    assert evidence.endswith("sizes match their headers; a.gguf: ggml types [200] not sized here; extent is a lower "
                             "bound; b.gguf: ggml types [200] not sized here; extent is a lower bound"), evidence


def test_the_header_length_and_file_size_boundaries(tmp_path: Path):
    p = tmp_path / "m.safetensors"
    # a header that fills the file exactly, with no tensor data: complete
    raw = b'{"__metadata__": {"format": "pt"}}'
    p.write_bytes(struct.pack("<Q", len(raw)) + raw)
    assert safetensors_header(p, p.stat().st_size) == (0, None)
    # one byte short of its header: truncated, said with the exact figures
    p.write_bytes(struct.pack("<Q", len(raw) + 1) + raw)
    assert safetensors_header(p, p.stat().st_size) == (0, f"m.safetensors: {8 + len(raw)} bytes, its header alone "
                                                          f"needs {8 + len(raw) + 1} (truncated)")
    # a header length of exactly the crate's limit is allowed (then truncated here); one more is not safetensors
    for n, said in ((MAX_SAFETENSORS_HEADER, f"its header alone needs {8 + MAX_SAFETENSORS_HEADER} (truncated)"),
                    (MAX_SAFETENSORS_HEADER + 1,
                     f"not a safetensors file (header length {MAX_SAFETENSORS_HEADER + 1})")):
        p.write_bytes(struct.pack("<Q", n) + b"{}")
        count, problem = safetensors_header(p, p.stat().st_size)
        assert count == 0 and problem is not None and problem.endswith(said), problem
    # data past what the header says: longer, said with the sum
    size = _raw_safetensors(p, {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}, 8)
    with open(p, "ab") as f:
        f.write(b"\0" * 3)
    n = size - 8 - 8
    assert safetensors_header(p, size + 3) == (1, f"m.safetensors: {size + 3} bytes on disk, the header says {size} "
                                                  f"(8 + {n} + 8): longer than its header says")
    with open(p, "r+b") as f:
        f.truncate(size - 2)
    assert safetensors_header(p, size - 2)[1] == (f"m.safetensors: {size - 2} bytes on disk, the header says {size} "
                                                  f"(8 + {n} + 8): truncated")


def test_a_writer_layout_header_names_a_bad_tensor_by_its_offsets(tmp_path: Path):
    """The fast path (the writer's layout) keeps no names: a shape that does not match its span is named by its
    offsets, which a full parse would name by its key."""
    p = tmp_path / "m.safetensors"
    size = write_safetensors(p, {"w": 8})
    raw = p.read_bytes().replace(b'"shape": [8]', b'"shape": [4]')
    p.write_bytes(raw)
    assert safetensors_header(p, size) == (1, "m.safetensors: the tensor at [0, 8]: shape [4] of U8 is 4 bytes, its "
                                              "data_offsets span 8")


# -- the index's values, one rule each (the checkpoint's rerun) ---------------------------------------------------
def _index_problems(d: Path, weight_map: Any) -> list[str]:
    d.mkdir(exist_ok=True)
    (d / INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    return scan_checkpoint(d).problems


def test_each_bad_index_value_is_named_once_and_shown_up_to_60_characters(tmp_path: Path):
    d = tmp_path / "m"
    sixty, sixty_one = "../" + "x" * 57, "../" + "y" * 58
    assert _index_problems(d, {"a": sixty, "b": sixty_one, "c": "", "d": 5, "e": 6.0}) == [
        f"{INDEX_NAME}: a value is empty; a value is float, not a file name; a value is int, not a file name; "
        f"the value {sixty!r} points outside the model directory; the value {(sixty_one[:60] + '...')!r} points "
        "outside the model directory"]  # sorted
    assert _index_problems(d, {"a": "a\0b.safetensors"}) == [f"{INDEX_NAME}: the value 'a\\x00b.safetensors' holds NUL"]
    inside = str(d / "w.safetensors")  # absolute, even inside the directory: the loader joins it to the directory
    assert _index_problems(d, {"a": inside}) == [f"{INDEX_NAME}: the value {inside[:60] + '...'!r} points outside "
                                                 "the model directory"]
    longest = "x" * 251 + ".bin"  # 255: a file name can be this long, and it is then just missing
    assert _index_problems(d, {"a": longest}) == [f"{longest}: listed in {INDEX_NAME} but missing"]
    assert _index_problems(d, {"a": longest + "x"}) == [f"{INDEX_NAME}: a value of 256 characters (longer than any "
                                                        "file name)"]


def test_an_index_that_is_not_a_map_or_not_a_file_says_so(tmp_path: Path):
    d = tmp_path / "m"
    assert _index_problems(d, []) == [f"{INDEX_NAME}: unreadable (TypeError: weight_map is not an object)"]
    (d / INDEX_NAME).write_text("{")
    (problem,) = scan_checkpoint(d).problems
    assert problem.startswith(f"{INDEX_NAME}: unreadable (JSONDecodeError: "), problem
    (d / INDEX_NAME).unlink()
    (d / INDEX_NAME).mkdir()
    assert scan_checkpoint(d).problems == [f"{INDEX_NAME} is a directory, not a regular file"]  # named once


def test_every_missing_shard_is_named(tmp_path: Path):
    assert _index_problems(tmp_path / "m", {"a": "one.safetensors", "b": "two.safetensors"}) == [
        f"one.safetensors: listed in {INDEX_NAME} but missing", f"two.safetensors: listed in {INDEX_NAME} but missing"]


def test_ggufs_are_the_weights_when_there_are_no_safetensors(tmp_path: Path):
    _gguf(tmp_path / "m.gguf")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 2048)
    assert scan_checkpoint(tmp_path).files == [tmp_path / "m.gguf"]


def test_offsets_that_overlap_or_end_before_they_begin_are_named_so(tmp_path: Path):
    overlap = {"a": _entry((0, 8)), "b": _entry((4, 12))}
    assert _full(tmp_path, overlap, 12) == ["m.safetensors: data_offsets [4, 12] (overlap after byte 8)"]
    backwards = {"a": _entry((0, 8)), "b": _entry((8, 4))}
    assert _full(tmp_path, backwards, 8) == ["m.safetensors: data_offsets [8, 4] (end before begin after byte 8)"]


def test_a_link_to_a_real_shard_is_no_broken_link_and_a_list_value_is_named(tmp_path: Path):
    """Hugging Face's cache holds every file of a snapshot as a link into its blobs."""
    blobs, snap = tmp_path / "blobs", tmp_path / "snap"
    blobs.mkdir()
    snap.mkdir()
    write_safetensors(blobs / "abc", {"w": 8})
    (snap / "model.safetensors").symlink_to(blobs / "abc")
    assert scan_checkpoint(snap).problems == []
    assert _index_problems(tmp_path / "m", {"a": ["x.safetensors"], "b": {"c": 1}}) == [
        f"{INDEX_NAME}: a value is dict, not a file name; a value is list, not a file name"]


CHECK_S = 60  # a subprocess that has not answered by then is stuck (the defect); the rule itself is seconds


def test_run_preflight_returns_at_its_deadline_and_leaves_the_stuck_worker(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    import firstlight.preflight.checkpoint as checkpoint

    d = make_checkpoint(tmp_path / "m")
    fifo = tmp_path / "hung-mount"
    os.mkfifo(fifo)
    monkeypatch.setattr(checkpoint, "open_regular", lambda path: open(fifo, "rb"))  # noqa: SIM115  (blocks: no writer)
    t0 = time.monotonic()
    report = run_preflight(read_target(["vllm", "serve", str(d)]), PreflightOptions(False, deadline_s=1.0))
    took = time.monotonic() - t0
    by = {c.name: c for c in report.checks}
    assert by["checkpoint"].status == WARN and "timed out" in by["checkpoint"].evidence
    assert str(d / "model.safetensors.index.json") in by["checkpoint"].evidence
    assert took < CHECK_S  # returned, the worker left behind (a daemon thread)
    with open(fifo, "wb"):  # releases the worker: it reads EOF and ends
        pass


# -- preflight/checkpoint.py: size = 8 + N + the LARGEST data_offsets end, exactly ----------------------------
def _safetensors_largest_first(path: Path, extra: int = 0) -> int:
    """Two U8 tensors, the one at the end of the data written first in the header (writers order tensors by
    name, not by offset); ``extra`` bytes past (or, negative, short of) the exact size. Returns the exact size."""
    header = {"z.weight": {"dtype": "U8", "shape": [4096], "data_offsets": [1024, 5120]},
              "a.weight": {"dtype": "U8", "shape": [1024], "data_offsets": [0, 1024]}}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    exact = 8 + len(raw) + 5120
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(exact + extra)
    return exact


def test_a_complete_file_whose_largest_offset_is_not_last_passes(tmp_path: Path):
    _safetensors_largest_first(tmp_path / "model.safetensors")
    c = check_checkpoint(read_target(["vllm", "serve", str(tmp_path)]), scan_checkpoint(tmp_path))
    assert c.status == OK, c


def test_a_file_cut_at_the_last_written_offset_is_truncated(tmp_path: Path):
    _safetensors_largest_first(tmp_path / "model.safetensors", extra=-4096)  # ends where "a.weight" ends
    c = check_checkpoint(read_target(["vllm", "serve", str(tmp_path)]), scan_checkpoint(tmp_path))
    assert c.status == FAIL and "truncated" in c.evidence, c


def test_a_file_longer_than_its_header_says_fails(tmp_path: Path):
    exact = _safetensors_largest_first(tmp_path / "model.safetensors", extra=1)
    c = check_checkpoint(read_target(["vllm", "serve", str(tmp_path)]), scan_checkpoint(tmp_path))
    assert c.status == FAIL and c.category == "corrupt_weights", c
    assert f"{exact + 1} bytes on disk, the header says {exact}" in c.evidence and "longer than" in c.evidence
