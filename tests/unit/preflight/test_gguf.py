"""The GGUF header reader (``firstlight.preflight.gguf``) at its edges, on headers built byte by byte as
llama.cpp's gguf.cpp writes them: each refusal's words, the alignment, the offsets' rule, a type the table does
not size, metadata arrays and their nesting, and a truncated header. Real files from llama.cpp's own writer:
``tests/unit/preflight/test_preflight.py::test_gguf_layout_agrees_with_llama_cpps_own_reader_and_writer``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from firstlight.preflight.gguf import GgufError, GgufLayout, _parse, _Reader, read_layout


def s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def kv(key: bytes, vtype: int, value: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + value


def tensor(name: bytes, dims: list[int], ggml_type: int, offset: int) -> bytes:
    return (s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<I", ggml_type) + struct.pack("<Q", offset))


def header(kvs: list[bytes], tensors: list[bytes], version: int = 3, magic: bytes = b"GGUF") -> bytes:
    return magic + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(tensors)


def parse(data: bytes) -> GgufLayout:
    return _parse(_Reader(data, len(data)))


F32 = 0  # 4 bytes an element


def test_the_data_starts_at_the_alignment_after_the_infos_and_must_reach_the_last_tensors_end():
    data = header([], [tensor(b"a", [3], F32, 0), tensor(b"b", [2, 2], F32, 32)])
    layout = parse(data)
    start = -(-len(data) // 32) * 32
    assert layout == GgufLayout(3, 2, 32, start, start + 32 + 16)


def test_general_alignment_sets_the_padding_and_must_be_a_power_of_two():
    align = kv(b"general.alignment", 4, struct.pack("<I", 64))
    data = header([align], [tensor(b"a", [3], F32, 0), tensor(b"b", [1], F32, 64)])
    layout = parse(data)
    assert layout.alignment == 64 and layout.data_start == -(-len(data) // 64) * 64
    for bad in (0, 3, 48):
        with pytest.raises(GgufError, match=rf"^general.alignment {bad} is not a power of two$"):
            parse(header([kv(b"general.alignment", 4, struct.pack("<I", bad))], []))
    # the key with another type is not the alignment: skipped as any value
    other = kv(b"general.alignment", 5, struct.pack("<i", 64))
    assert parse(header([other], [])).alignment == 32


def test_each_tensor_must_start_where_the_previous_one_ended_padded():
    with pytest.raises(GgufError, match=r"^tensor 'b' has offset 16, expected 32$"):
        parse(header([], [tensor(b"a", [3], F32, 0), tensor(b"b", [1], F32, 16)]))
    with pytest.raises(GgufError, match=r"^tensor 'a' has offset 32, expected 0$"):
        parse(header([], [tensor(b"a", [3], F32, 32)]))


def test_a_type_the_table_does_not_size_is_a_lower_bound_and_stops_the_offset_rule():
    data = header([], [tensor(b"a", [3], 999, 0), tensor(b"b", [1], F32, 100), tensor(b"c", [1], 998, 500)])
    layout = parse(data)
    assert layout.unknown_types == (998, 999)
    assert layout.required_size == layout.data_start + 500  # the unknown's offset; b ends at 104


def test_up_to_8_dimensions():
    assert parse(header([], [tensor(b"a", [1] * 8, F32, 0)])).tensors == 1
    with pytest.raises(GgufError, match=r"^tensor 'x\ufffd' has 9 dimensions$"):  # a bad byte replaced
        parse(header([], [tensor(b"x\x80", [1] * 9, F32, 0)]))


def test_versions_2_and_3_only_and_the_magic():
    assert parse(header([], [], version=2)).version == 2
    for v in (1, 4):
        with pytest.raises(GgufError, match=rf"^GGUF version {v} is not supported \(2 and 3 are\)$"):
            parse(header([], [], version=v))
    with pytest.raises(GgufError, match=r"^not GGUF: magic b'GGML'$"):
        parse(header([], [], magic=b"GGML"))


def test_metadata_values_are_skipped_by_their_size():
    scalars = [kv(b"u8", 0, b"\x01"), kv(b"i16", 3, b"\x01\x00"), kv(b"f32", 6, b"\x00" * 4),
               kv(b"bool", 7, b"\x01"), kv(b"u64", 10, b"\x00" * 8), kv(b"f64", 12, b"\x00" * 8),
               kv(b"name", 8, s(b"llama")),
               kv(b"tokens", 9, struct.pack("<IQ", 8, 2) + s(b"<s>") + s(b"</s>")),
               kv(b"scores", 9, struct.pack("<IQ", 6, 3) + b"\x00" * 12),
               kv(b"nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 0, 2) + b"\x01\x02")]
    data = header(scalars, [tensor(b"a", [1], F32, 0)])
    assert parse(data).data_start == -(-len(data) // 32) * 32


def test_nested_arrays_stop_at_16_levels():
    def nested(depth: int) -> bytes:
        inner = struct.pack("<IQ", 0, 1) + b"\x00"
        for _ in range(depth):
            inner = struct.pack("<IQ", 9, 1) + inner
        return inner

    assert parse(header([kv(b"ok", 9, nested(16))], [])).tensors == 0  # arrays in arrays to depth 16
    with pytest.raises(GgufError, match=r"^metadata arrays nested over 16 deep at byte \d+$"):
        parse(header([kv(b"deep", 9, nested(17))], []))


def test_an_unknown_value_type_and_a_truncated_header_say_where():
    data = header([kv(b"k", 13, b"")], [])
    with pytest.raises(GgufError, match=rf"^unknown metadata value type 13 at byte {len(data)}$"):
        parse(data)
    full = header([kv(b"name", 8, s(b"llama"))], [])
    with pytest.raises(GgufError, match=rf"^header truncated at byte {len(full) - 5} \(needs 5 more bytes; file is "
                                        rf"{len(full) - 1}\)$"):
        parse(full[:-1])
    with pytest.raises(GgufError, match=r"^header truncated at byte 24 \(file is 26 bytes\)$"):
        parse(header([], [tensor(b"a", [1], F32, 0)])[:26])
    with pytest.raises(GgufError, match=r"needs -1 more bytes"):
        _Reader(b"\x00" * 10, 10).skip(-1)


def test_a_file_shorter_than_a_header(tmp_path: Path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + b"\x00" * 19)
    with pytest.raises(GgufError, match=r"^23 bytes: too short for a GGUF header \(24 bytes at least\)$"):
        read_layout(f)
    f.write_bytes(header([], [tensor(b"a", [8], F32, 0)]))
    assert read_layout(f).required_size == read_layout(f).data_start + 32
