"""The checkpoint's quantization against the libraries installed in the server's own Python.

``config.json``'s ``quantization_config`` names a method and, for compressed-tensors, formats (top level,
per config group, and the sparsity config) and quantization strategies. A library older than the first
release that knows a value fails only once the loader reaches it (the field notes: compressed-tensors 0.8.1
and an ``nvfp4-pack-quantized`` checkpoint). REQUIREMENTS is the table of value -> first release, each
with its source; versions are read with importlib.metadata in the server's interpreter (interpreter.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from firstlight.files import open_regular
from firstlight.preflight.base import FAIL, OK, WARN, Check
from firstlight.preflight.interpreter import InterpreterInfo
from firstlight.preflight.target import Target

NAME = "quantization"
CATEGORY = "quantization"


@dataclass(frozen=True)
class Requirement:
    library: str  # the distribution name, as importlib.metadata knows it
    field: str  # "format" or "strategy"
    value: str
    min_version: str
    source: str


_CT_BASE = "compressed_tensors/config/base.py CompressionFormat"
_CT_ARGS = "compressed_tensors/quantization/quant_args.py QuantizationStrategy"
# Checked against the released wheels on PyPI: the value is in the first version named, not in the one before.
REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("compressed-tensors", "format", "sparse-24-bitmask", "0.9.0",
                f"compressed-tensors 0.9.0 wheel, {_CT_BASE} (absent in 0.8.1)"),
    Requirement("compressed-tensors", "format", "nvfp4-pack-quantized", "0.10.0",
                f"compressed-tensors 0.10.0 wheel, {_CT_BASE} (absent in 0.9.4)"),
    Requirement("compressed-tensors", "format", "mixed-precision", "0.11.0",
                f"compressed-tensors 0.11.0 wheel, {_CT_BASE} (absent in 0.10.2)"),
    Requirement("compressed-tensors", "format", "mxfp4-pack-quantized", "0.13.0",
                f"compressed-tensors 0.13.0 wheel, {_CT_BASE} (absent in 0.12.2)"),
    Requirement("compressed-tensors", "format", "mxfp8-quantized", "0.15.0",
                f"compressed-tensors 0.15.0 wheel, {_CT_BASE} (absent in 0.14.0)"),
    Requirement("compressed-tensors", "strategy", "tensor_group", "0.10.0",
                f"compressed-tensors 0.10.0 wheel, {_CT_ARGS} (absent in 0.9.4)"),
    Requirement("compressed-tensors", "strategy", "attn_head", "0.13.0",
                f"compressed-tensors 0.13.0 wheel, {_CT_ARGS} (absent in 0.12.2)"),
)
# quant_method -> the distribution that must be installed for it
MAX_CONFIG_BYTES = 16 << 20  # a config.json is kilobytes
METHOD_LIBRARY = {"compressed-tensors": "compressed-tensors", "bitsandbytes": "bitsandbytes"}


def read_quantization(model_path: Path | None) -> tuple[dict[str, Any] | None, str]:
    """(quantization_config, where it was read) from the model directory's config.json."""
    if model_path is None or not model_path.is_dir():
        return None, "no model directory"
    config = model_path / "config.json"
    try:
        with open_regular(config) as f:
            data = json.loads(f.read(MAX_CONFIG_BYTES))
    except FileNotFoundError:
        return None, f"no {config}"
    except (OSError, ValueError) as e:
        return None, f"{config} unreadable: {e}"
    q = data.get("quantization_config") if isinstance(data, dict) else None
    return (q if isinstance(q, dict) else None), str(config)


def used_values(q: dict[str, Any]) -> dict[str, set[str]]:
    """The formats and strategies a compressed-tensors config uses."""
    formats, strategies = set(), set()
    if isinstance(q.get("format"), str):
        formats.add(q["format"])
    sparsity = q.get("sparsity_config")
    if isinstance(sparsity, dict) and isinstance(sparsity.get("format"), str):
        formats.add(sparsity["format"])
    groups = q.get("config_groups")
    for group in groups.values() if isinstance(groups, dict) else []:
        if not isinstance(group, dict):
            continue
        if isinstance(group.get("format"), str):
            formats.add(group["format"])
        for part in ("weights", "input_activations", "output_activations"):
            args = group.get(part)
            if isinstance(args, dict) and isinstance(args.get("strategy"), str):
                strategies.add(args["strategy"])
    return {"format": formats, "strategy": strategies}


def _older(installed: str, minimum: str) -> bool:
    try:
        return Version(installed) < Version(minimum)
    except InvalidVersion:
        return False


def check_quantization(target: Target, info: InterpreterInfo | None) -> Check:
    q, where = read_quantization(target.model_path)
    if q is None:
        return Check(NAME, OK, CATEGORY, f"not quantized or not declared ({where})")
    method = str(q.get("quant_method", "?"))
    library = METHOD_LIBRARY.get(method)
    if library is None:
        return Check(NAME, OK, CATEGORY, f"{where}: quant_method {method}: no library version rule for it")
    if info is None:
        return Check(NAME, OK, CATEGORY, f"{where}: quant_method {method}; skipped: the server's Python is "
                     f"unknown ({target.interpreter_source})")
    if info.error is not None:
        return Check(NAME, WARN, CATEGORY, f"{where}: quant_method {method}; cannot read the installed "
                     f"versions: {info.error}", "check that the command's Python runs")
    installed = info.versions.get(library)
    env = f"{info.interpreter} (Python {info.python}, {info.prefix})"
    if installed is None:
        return Check(NAME, FAIL, CATEGORY, f"{where}: quant_method {method} needs {library}; not installed in {env}",
                     f"{info.interpreter} -m pip install {library}")
    used = used_values(q)
    too_old = [r for r in REQUIREMENTS if r.library == library and r.value in used[r.field]
               and _older(installed, r.min_version)]
    if too_old:
        need = max(too_old, key=lambda r: Version(r.min_version))
        said = "; ".join(f"{r.field} {r.value} first appears in {r.library} {r.min_version} ({r.source})"
                         for r in too_old)
        return Check(NAME, FAIL, CATEGORY, f"{where}: {library} {installed} installed in {env}; {said}",
                     f"{library} {installed} is too old for this checkpoint: {info.interpreter} -m pip install "
                     f"'{library}>={need.min_version}'")
    values = ", ".join(sorted(used["format"] | used["strategy"])) or "no formats named"
    return Check(NAME, OK, CATEGORY, f"{where}: quant_method {method} ({values}); {library} {installed} in {env}")
