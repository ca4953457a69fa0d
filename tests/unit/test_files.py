"""Reading files in bounded memory: ``firstlight.files.bounded_lines`` (a file without a newline never becomes one
huge line)."""

from __future__ import annotations

import io

from firstlight.files import bounded_lines


def test_a_line_over_the_cap_is_skipped_whole_and_the_lines_around_it_are_kept():
    data = b"first\n" + b"x" * 100 + b"\n" + b"y" * 10 + b"\n" + b"last"
    assert list(bounded_lines(io.BytesIO(data), 10)) == [b"first\n", b"y" * 10 + b"\n", b"last"]


def test_a_line_of_exactly_the_cap_is_kept_one_byte_more_is_not():
    assert list(bounded_lines(io.BytesIO(b"a" * 10 + b"\n"), 10)) == [b"a" * 10 + b"\n"]
    assert list(bounded_lines(io.BytesIO(b"a" * 10), 10)) == [b"a" * 10]
    assert list(bounded_lines(io.BytesIO(b"a" * 11 + b"\nb\n"), 10)) == [b"b\n"]
    assert list(bounded_lines(io.BytesIO(b"a" * 11), 10)) == []
