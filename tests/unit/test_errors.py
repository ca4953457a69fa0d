"""One error tree: every exception class firstlight defines derives from ``FirstlightError``, and the tree written
out in ``firstlight.errors`` (as httpx writes its own) names each of them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import click
import pytest

import firstlight
from firstlight.errors import FirstlightError

# The built-in or library base each error keeps beside the root, because callers catch it by that base.
EXTRA_BASES: dict[str, type[BaseException]] = {
    "firstlight.settings.SettingError": ValueError,  # the API's bad input is a ValueError (docs/python-api.md)
    "firstlight.cli.options.UsageFailure": click.UsageError,  # click shows it and exits with its code
    "firstlight.preflight.gguf.GgufError": ValueError,
    "firstlight.files.NotRegularFile": OSError,  # read_capped's callers catch OSError
    "firstlight.wire.content.NotJSON": ValueError,
    "firstlight.wire.content.LineTooLong": ValueError,
}


def _modules() -> list[str]:
    names = [firstlight.__name__]
    for info in pkgutil.walk_packages(firstlight.__path__, firstlight.__name__ + "."):
        if not info.name.endswith("__main__"):  # running them is their import
            names.append(info.name)
    return names


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in a firstlight module, by its dotted name."""
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return found


def test_the_walk_finds_the_known_errors() -> None:
    found = defined_exceptions()
    assert {"firstlight.api.NotReady", "firstlight.wire.errors.WireError", "firstlight.history.db._Corrupt",
            "firstlight.errors.FirstlightError"} <= set(found)
    assert len(found) >= 17


def test_every_exception_firstlight_defines_derives_from_the_root() -> None:
    strays = [name for name, cls in defined_exceptions().items() if not issubclass(cls, FirstlightError)]
    assert strays == [], "derive these from firstlight.errors.FirstlightError"


@pytest.mark.parametrize(("name", "base"), sorted(EXTRA_BASES.items()))
def test_an_error_keeps_the_base_its_callers_catch(name: str, base: type[BaseException]) -> None:
    cls = defined_exceptions()[name]
    assert issubclass(cls, base) and issubclass(cls, FirstlightError)


def test_the_written_tree_names_every_error_and_only_those() -> None:
    doc = importlib.import_module("firstlight.errors").__doc__ or ""
    tree = [line for line in doc.split("::", 1)[1].splitlines() if line.startswith("    ")]  # the literal block
    written = {m.group(1) for line in tree if (m := re.match(r"[\s│├└─(]*(\w+)", line))}
    defined = {cls.__name__ for cls in defined_exceptions().values()}
    assert written == defined


def test_a_firstlight_error_is_caught_by_the_root_and_by_its_old_base() -> None:
    from firstlight.wire.content import parse_json

    with pytest.raises(FirstlightError):
        parse_json(b"{")
    with pytest.raises(ValueError):
        parse_json(b"{")
    assert firstlight.FirstlightError is FirstlightError
