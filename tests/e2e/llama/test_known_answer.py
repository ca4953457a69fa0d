"""The known answer on the real llama-server, through ``firstlight up`` with a history file: the first start records
the answer (tokens and log-probabilities from llama.cpp's ``logprobs.content``); the same deployment (the same
command, the same model path) then serving other weights is ``wrong_answer``, never READY; the original weights again
are READY with the same answer.

The other weights: a copy of the pinned GGUF with its final norm's weights scaled by 1.3 (gguf-py, in place): the
logits scale, so the greedy tokens may stay while every log-probability moves. A requantized copy (llama.cpp's
``llama-quantize``) would be the closer case; the set-up does not build that tool.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from firstlight.sim.fixtures import free_port
from firstlight.vocab import EXIT_CODES, FAILED, READY, WRONG_ANSWER
from tests.support.common import run_firstlight
from tests.support.llama_server import FAST, llama, server_cmd  # noqa: F401  (the fixture)


def _summary(stdout: str) -> dict[str, Any]:
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    return next(x for x in reversed(lines) if x.get("event") == "summary")


def _other_weights(src: str, dst: Path) -> None:
    shutil.copyfile(src, dst)
    reader = gguf.GGUFReader(dst, "r+")
    norm = next(t for t in reader.tensors if t.name == "output_norm.weight")
    norm.data[:] = (np.asarray(norm.data) * 1.3).astype(norm.data.dtype)
    reader.data.flush()
    del reader


def _up(llama: dict[str, str], history: Path, model: Path, port: int, *extra: str) -> tuple[int, dict[str, Any]]:  # noqa: F811
    # --margin 10 (the most): a start of seconds on a busy machine may take twice its first one; these tests are
    # about the answer, and a slower start is reported as a regression (exit 0 still), not READY
    r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), "--margin", "10", *extra,
                       *FAST, "--",
                       *server_cmd(llama, port, model=str(model)), timeout=300)
    return r.rc, _summary(r.stdout)


def test_other_weights_at_the_same_path_are_wrong_answer_and_the_original_ready_again(
        llama: dict[str, str], tmp_path: Path):  # noqa: F811
    model, history, port = tmp_path / "model.gguf", tmp_path / "h.sqlite3", free_port()
    shutil.copyfile(llama["model"], model)
    code, first = _up(llama, history, model, port)
    assert code == 0 and first["verdict"] == READY, first
    recorded = first["known_answer"]
    assert recorded["outcome"] == "recorded" and recorded["mode"] == "check"
    answer = recorded["answer"]
    assert answer["tokens"] and len(answer["logprobs"]) == len(answer["tokens"])  # llama.cpp returned them

    original = tmp_path / "original.gguf"
    model.rename(original)
    _other_weights(str(original), model)
    code, wrong = _up(llama, history, model, port)
    assert code == EXIT_CODES[FAILED] and wrong["verdict"] == FAILED and wrong["failure"] == WRONG_ANSWER, wrong
    assert wrong["ready_at"] is None and "quantization change" in wrong["hint"]
    signals = {e["signal"]: e["value"] for e in wrong["evidence"]}
    assert signals["history"].startswith("known answer (run 1): tokens [")
    assert signals["probe:generation"].startswith("answer now: tokens [")
    assert wrong["known_answer"]["outcome"] == "different"

    original.replace(model)
    code, again = _up(llama, history, model, port)
    assert code == 0 and again["verdict"] == READY, again
    assert again["known_answer"]["outcome"] == "same" and again["known_answer"]["reference_run"] == 1
    assert again["known_answer"]["answer"]["tokens"] == answer["tokens"]


def test_record_makes_the_new_weights_the_reference(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    model, history, port = tmp_path / "model.gguf", tmp_path / "h.sqlite3", free_port()
    shutil.copyfile(llama["model"], model)
    assert _up(llama, history, model, port)[0] == 0
    _other_weights(llama["model"], model)
    code, rerecorded = _up(llama, history, model, port, "--known-answer", "record")
    assert code == 0 and rerecorded["known_answer"]["outcome"] == "re-recorded"
    code, checked = _up(llama, history, model, port)
    assert code == 0 and checked["known_answer"]["outcome"] == "same" and checked["known_answer"]["reference_run"] == 2
