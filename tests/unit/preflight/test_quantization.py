"""preflight/quantization.py: the checkpoint's quantization_config against the library versions installed in the
server's Python, each rule at its edge. The checkpoints are real config.json files on disk; the installed versions
are an ``InterpreterInfo`` as the server's interpreter reports it (tests/e2e/preflight/test_preflight.py runs
real venvs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from firstlight.preflight.base import FAIL, OK, WARN
from firstlight.preflight.interpreter import InterpreterInfo
from firstlight.preflight.quantization import (
    MAX_CONFIG_BYTES,
    REQUIREMENTS,
    check_quantization,
    read_quantization,
    used_values,
)
from firstlight.preflight.target import read_target

PY = "/srv/venv/bin/python"


def info(version: str | None = "0.15.0", **kw: Any) -> InterpreterInfo:
    versions: dict[str, str | None] = {} if version is None else {"compressed-tensors": version}
    return InterpreterInfo(PY, "3.12.1", "/srv/venv", versions, **kw)


def model(tmp_path: Path, q: Any, extra: dict[str, Any] | None = None) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["X"], "quantization_config": q,
                                                      **(extra or {})}))
    return tmp_path


def check(path: Path, i: InterpreterInfo | None) -> Any:
    c = check_quantization(read_target(["vllm", "serve", str(path)]), i)
    assert c.name == "quantization" and c.category == "quantization", c
    return c


def ct(fmt: str | None = None, **kw: Any) -> dict[str, Any]:
    q: dict[str, Any] = {"quant_method": "compressed-tensors", **kw}
    if fmt is not None:
        q["format"] = fmt
    return q


# -- reading config.json --------------------------------------------------------------------------------------
def test_no_model_directory_is_not_quantized(tmp_path: Path):
    assert read_quantization(None) == (None, "no model directory")
    f = tmp_path / "model.gguf"
    f.write_bytes(b"GGUF")
    assert read_quantization(f) == (None, "no model directory")
    c = check(tmp_path / "absent", info())
    assert c.status == OK and c.evidence == "not quantized or not declared (no model directory)", c


def test_a_directory_without_config_json_says_so(tmp_path: Path):
    assert read_quantization(tmp_path) == (None, f"no {tmp_path / 'config.json'}")


def test_an_unreadable_config_json_says_why(tmp_path: Path):
    (tmp_path / "config.json").write_text("{not json")
    q, where = read_quantization(tmp_path)
    assert q is None and where.startswith(f"{tmp_path / 'config.json'} unreadable: ")
    (tmp_path / "config.json").unlink()
    (tmp_path / "config.json").mkdir()  # not a regular file
    q, where = read_quantization(tmp_path)
    assert q is None and where.startswith(f"{tmp_path / 'config.json'} unreadable: ")


def test_config_json_is_read_up_to_its_cap_only(tmp_path: Path):
    # A config.json of exactly the cap is read whole; one byte more is cut, so its JSON is unreadable.
    head = json.dumps({"quantization_config": ct("nvfp4-pack-quantized")})[:-1] + ', "pad": "'
    tail = '"}'
    (tmp_path / "config.json").write_text(head + "x" * (MAX_CONFIG_BYTES - len(head) - len(tail)) + tail)
    assert os.path.getsize(tmp_path / "config.json") == MAX_CONFIG_BYTES
    q, where = read_quantization(tmp_path)
    assert q is not None and q["format"] == "nvfp4-pack-quantized" and where == str(tmp_path / "config.json")
    (tmp_path / "config.json").write_text(head + "x" * (MAX_CONFIG_BYTES - len(head) - len(tail) + 1) + tail)
    q, where = read_quantization(tmp_path)
    assert q is None and "unreadable" in where


@pytest.mark.parametrize("data", [[1, 2], {"quantization_config": "fp8"}, {"quantization_config": None}, {}])
def test_a_config_without_a_quantization_mapping_is_not_quantized(tmp_path: Path, data: Any):
    (tmp_path / "config.json").write_text(json.dumps(data))
    assert read_quantization(tmp_path) == (None, str(tmp_path / "config.json"))
    c = check(tmp_path, info())
    assert c.status == OK and c.evidence == f"not quantized or not declared ({tmp_path / 'config.json'})", c


# -- which values a config uses -------------------------------------------------------------------------------
def test_used_values_reads_the_top_level_sparsity_and_group_formats_and_every_strategy():
    q = ct("nvfp4-pack-quantized", sparsity_config={"format": "sparse-24-bitmask"}, config_groups={
        "first": "not a group: skipped, the next ones still read",
        "g0": {"format": "mixed-precision", "weights": {"strategy": "tensor_group"}},
        "g1": {"input_activations": {"strategy": "attn_head"}, "output_activations": {"strategy": "token"}},
        "g2": "not a group",
        "g3": {"format": 4, "weights": {"strategy": 7}, "input_activations": "x"},
    })
    assert used_values(q) == {"format": {"nvfp4-pack-quantized", "sparse-24-bitmask", "mixed-precision"},
                              "strategy": {"tensor_group", "attn_head", "token"}}


def test_used_values_ignores_fields_of_the_wrong_type():
    q = {"format": 1, "sparsity_config": {"format": None}, "config_groups": ["g"]}
    assert used_values(q) == {"format": set(), "strategy": set()}
    assert used_values({"sparsity_config": "sparse-24-bitmask"}) == {"format": set(), "strategy": set()}


# -- the check's outcomes -------------------------------------------------------------------------------------
def test_a_method_without_a_version_rule_is_ok_naming_it(tmp_path: Path):
    c = check(model(tmp_path, {"quant_method": "fp8"}), info())
    assert c.status == OK and c.category == "quantization", c
    assert c.evidence == f"{tmp_path / 'config.json'}: quant_method fp8: no library version rule for it"
    c = check(model(tmp_path, {"bits": 4}), info())
    assert c.evidence.endswith("quant_method ?: no library version rule for it"), c


def test_an_unknown_server_python_skips_the_check(tmp_path: Path):
    c = check(model(tmp_path, ct("nvfp4-pack-quantized")), None)
    assert c.status == OK, c
    assert "quant_method compressed-tensors; skipped: the server's Python is unknown" in c.evidence


def test_a_server_python_that_cannot_report_is_a_warning(tmp_path: Path):
    c = check(model(tmp_path, ct("nvfp4-pack-quantized")), info(error="exited 1: boom"))
    assert c.status == WARN and c.category == "quantization", c
    assert c.evidence.endswith("quant_method compressed-tensors; cannot read the installed versions: exited 1: boom")
    assert c.hint == "check that the command's Python runs"


@pytest.mark.parametrize("method", ["compressed-tensors", "bitsandbytes"])
def test_a_method_whose_library_is_missing_fails_with_the_pip_command(tmp_path: Path, method: str):
    c = check(model(tmp_path, {"quant_method": method}), info(None))
    assert c.status == FAIL and c.category == "quantization", c
    assert f"quant_method {method} needs {method}; not installed in {PY} (Python 3.12.1, /srv/venv)" in c.evidence
    assert c.hint == f"{PY} -m pip install {method}"


@pytest.mark.parametrize("req", REQUIREMENTS, ids=lambda r: r.value)
def test_each_value_needs_its_first_release(tmp_path: Path, req: Any):
    """Each row alone decides: the release before the first fails naming the value and its source; the first passes."""
    q = ct(req.value) if req.field == "format" else ct(config_groups={"g": {"weights": {"strategy": req.value}}})
    path = model(tmp_path, q)
    major, minor, _ = req.min_version.split(".")
    before = f"{major}.{int(minor) - 1}.99"
    c = check(path, info(before))
    assert c.status == FAIL, c
    assert (f"compressed-tensors {before} installed in {PY} (Python 3.12.1, /srv/venv); {req.field} {req.value} "
            f"first appears in compressed-tensors {req.min_version} ({req.source})") in c.evidence
    assert c.hint == (f"compressed-tensors {before} is too old for this checkpoint: {PY} -m pip install "
                      f"'compressed-tensors>={req.min_version}'")
    c = check(path, info(req.min_version))
    assert c.status == OK, c
    assert c.evidence == (f"{tmp_path / 'config.json'}: quant_method compressed-tensors ({req.value}); "
                          f"compressed-tensors {req.min_version} in {PY} (Python 3.12.1, /srv/venv)")


def test_several_values_too_new_are_all_named_and_the_fix_asks_for_the_newest(tmp_path: Path):
    q = ct("nvfp4-pack-quantized", sparsity_config={"format": "mxfp8-quantized"},
           config_groups={"g": {"weights": {"strategy": "attn_head"}}})
    c = check(model(tmp_path, q), info("0.9.0"))
    assert c.status == FAIL, c
    said = c.evidence.split("; ", 1)[1]
    assert said.count("first appears in") == 3
    for v in ("format nvfp4-pack-quantized", "format mxfp8-quantized", "strategy attn_head"):
        assert v in said
    assert "(absent in 0.9.4)); format mxfp8-quantized first appears" in said  # one rule after the other
    assert c.hint is not None and c.hint.endswith("'compressed-tensors>=0.15.0'")


def test_the_fix_asks_for_the_newest_whatever_the_table_order(tmp_path: Path):
    # mixed-precision (0.11.0) and tensor_group (0.10.0): the max is not the last row of the table matched
    q = ct("mixed-precision", config_groups={"g": {"weights": {"strategy": "tensor_group"}}})
    c = check(model(tmp_path, q), info("0.9.0"))
    assert c.status == FAIL and c.hint is not None and c.hint.endswith("'compressed-tensors>=0.11.0'"), c
    q = ct("sparse-24-bitmask", config_groups={"g": {"weights": {"strategy": "attn_head"}}})
    c = check(model(tmp_path, q), info("0.8.1"))
    assert c.status == FAIL and c.hint is not None and c.hint.endswith("'compressed-tensors>=0.13.0'"), c


def test_only_the_library_of_the_method_is_compared(tmp_path: Path):
    # bitsandbytes has no value rows: an old bitsandbytes with a compressed-tensors format named passes
    q = {"quant_method": "bitsandbytes", "format": "nvfp4-pack-quantized"}
    c = check(model(tmp_path, q), InterpreterInfo(PY, "3.12.1", "/srv/venv", {"bitsandbytes": "0.1.0"}))
    assert c.status == OK, c
    assert c.evidence.endswith("quant_method bitsandbytes (nvfp4-pack-quantized); bitsandbytes 0.1.0 in "
                               f"{PY} (Python 3.12.1, /srv/venv)")


def test_a_version_that_is_not_pep_440_is_never_called_too_old(tmp_path: Path):
    c = check(model(tmp_path, ct("nvfp4-pack-quantized")), info("custom-build"))
    assert c.status == OK, c


def test_a_config_naming_no_values_says_so(tmp_path: Path):
    c = check(model(tmp_path, ct()), info("0.1.0"))
    assert c.status == OK, c
    assert c.evidence.endswith("quant_method compressed-tensors (no formats named); compressed-tensors 0.1.0 in "
                               f"{PY} (Python 3.12.1, /srv/venv)")


def test_a_value_without_a_row_passes_and_values_are_listed_sorted(tmp_path: Path):
    q = ct("pack-quantized", config_groups={"g": {"weights": {"strategy": "channel"}}})
    c = check(model(tmp_path, q), info("0.1.0"))
    assert c.status == OK, c
    assert "(channel, pack-quantized)" in c.evidence


# -- preflight/quantization.py: nvfp4-pack-quantized needs compressed-tensors 0.10.0 exactly ------------------
@pytest.mark.parametrize("installed, status", [("0.9.4", FAIL), ("0.9.99", FAIL), ("0.10.0", OK), ("0.10.1", OK)])
def test_nvfp4_needs_compressed_tensors_0_10_0(tmp_path: Path, installed: str, status: str):
    # nvfp4 is the only value used (no tensor_group strategy), so its row alone decides.
    q = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
         "config_groups": {"g": {"format": "nvfp4-pack-quantized", "weights": {"num_bits": 4}}}}
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": q}))
    info = InterpreterInfo("/venv/bin/python", "3.12", "/venv", {"compressed-tensors": installed})
    c = check_quantization(read_target(["vllm", "serve", str(tmp_path)]), info)
    assert c.status == status, c
    if status == FAIL:
        assert "'compressed-tensors>=0.10.0'" in (c.hint or "") and "nvfp4-pack-quantized" in c.evidence
