"""A secret inside the model path or id is never stored in clear in the history (``firstlight.history.key`` masks
the model as it masks the command; ``firstlight.history.scrub`` the summary): a model id with a token, a model URL
with a password, a model path that holds the value given to ``--api-key``. The history's file is read byte by byte,
so a copy of the secret in any column or table counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.history import History
from firstlight.history.key import DeploymentKey
from firstlight.redact import Redactor

TOKEN = "hf_" + "Q" * 8 + "modelToken1234567"  # the shape a Hugging Face token has
PASSWORD = "pw-model-9d1c2b7e"
API_KEY = "apikey-in-path-5f3e1a"

# (the model as given, the secret in it, options of the command beside it)
CASES = {
    "a token in the model id": (f"{TOKEN}/llama-3-8b", TOKEN, ()),
    "a password in the model URL": (f"https://loader:{PASSWORD}@models.example/llama.gguf", PASSWORD, ()),
    "the api key's value in the model path": (f"/models/{API_KEY}/llama.gguf", API_KEY, ("--api-key", API_KEY)),
}


def _key(model: str, extra: tuple[str, ...]) -> DeploymentKey:
    command = ["llama-server", "-m", model, "--port", "8080", *extra]
    return DeploymentKey.create("llama.cpp", model, command, 1)  # its own redactor, as the migration makes one


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_secret_in_the_model_is_masked_in_the_deployment_key(case: str):
    model, secret, extra = CASES[case]
    key = _key(model, extra)
    assert key.model and secret not in key.model and "***" in key.model
    assert secret not in (key.command or "") and secret not in (key.start_flags or "")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_secret_in_the_model_is_never_stored_in_clear_in_the_history(tmp_path: Path, case: str):
    model, secret, extra = CASES[case]
    key = _key(model, extra)
    summary = {"verdict": "ready", "model": model, "cold_start_s": 12.0,
               "command": ["llama-server", "-m", model, *extra]}
    with History(tmp_path / "history.db", redactor=Redactor()) as h:
        run_id = h.record_run("up", summary, key)
        stored = h.get(run_id)
    assert stored is not None and stored.model is not None and secret not in stored.model
    assert secret not in str(stored.summary) and secret not in (stored.command or "")
    files = [p for p in tmp_path.iterdir() if p.is_file()]
    assert files and not [p.name for p in files if secret.encode() in p.read_bytes()]


def test_the_same_model_without_a_secret_is_stored_as_given(tmp_path: Path):
    key = _key("/models/llama.gguf", ())
    with History(tmp_path / "history.db", redactor=Redactor()) as h:
        stored = h.get(h.record_run("up", {"verdict": "ready", "model": "/models/llama.gguf"}, key))
    assert stored is not None and stored.model == "/models/llama.gguf"
