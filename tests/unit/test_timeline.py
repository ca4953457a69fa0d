"""A record's line is plain JSON that reads back to the same observation, for every kind of observation."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import pytest

from firstlight import timeline
from firstlight.timeline import Level, LogLine, Observation, from_dict


def _kinds() -> list[type[Observation]]:
    out, todo = [], [Observation]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__ == timeline.__name__ and cls is not Observation:
            out.append(cls)
    return sorted(out, key=lambda c: c.__name__)


def _value(hint: Any) -> Any:
    """A value of every field's type that is not its default, so that a lost field shows."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        return (_built(item) if dataclasses.is_dataclass(item) else _value(item),)
    return {bool: True, int: 7, float: 1.5, str: "x", Level: Level.HEALTH}[hint]


def _built(cls: type) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _value(hints[f.name]) for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("cls", _kinds(), ids=lambda c: c.__name__)
def test_every_kind_of_observation_is_one_json_line_that_reads_back_the_same(cls: type[Observation]) -> None:
    obs = _built(cls)
    line = obs.to_line()
    assert line.endswith("\n") and "\n" not in line[:-1]
    assert from_dict(json.loads(line)) == obs


def test_a_value_json_lacks_is_written_as_its_text_rather_than_end_the_watch() -> None:
    from pathlib import Path

    line = LogLine(1.0, Path("/models/a"), "stderr", 3).to_line()  # type: ignore[arg-type]
    assert json.loads(line)["text"] == "/models/a"
