"""The deployment key without the port (``firstlight.history.key``) and the migration of a schema-1 database
(``firstlight.history.db``).

``tests/fixtures/history/schema1.sqlite3`` was written by the old code (``firstlight/history/store.py`` at commit
831da3d, schema 1): three ready ``up`` runs of ``python -m vllm.entrypoints.openai.api_server --model /models/qwen
--tensor-parallel-size 2 --api-key sk-...``, runs 1 and 2 on ``--port 8000`` (old hash ``7b096d27baa3``, run 1
pinned), run 3 on ``--port 8001`` (old hash ``22f7a4dcded2``), 30 s, 32 s and 31 s, engine version 0.10.1.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from firstlight.history import DeploymentKey, History
from firstlight.history.db import SCHEMA_VERSION
from firstlight.history.key import legacy_hash
from tests.support.common import FIXTURES

OLD_DB = FIXTURES / "history" / "schema1.sqlite3"
VLLM = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/qwen"]


def _key(*extra: str, engine: str = "vllm") -> DeploymentKey:
    return DeploymentKey.create(engine, "/models/qwen", [*VLLM, *extra], 2)


def test_the_same_server_on_another_port_or_host_is_the_same_deployment():
    a = _key("--port", "8000", "--tensor-parallel-size", "2")
    assert _key("--port=9000", "--tensor-parallel-size", "2", "--host", "0.0.0.0").hash == a.hash
    assert _key("--port", "8000", "--tensor-parallel-size", "2").command != _key("--port", "9001",
                                                                                 "--tensor-parallel-size", "2").command
    assert a.parallelism == "tp=2"


@pytest.mark.parametrize("extra", [("--tensor-parallel-size", "4"), ("--quantization", "fp8"),
                                   ("--enforce-eager",), ("--max-model-len", "4096")])
def test_parallelism_quantization_and_start_flags_make_another_deployment(extra: tuple[str, ...]):
    assert _key("--port", "8000", "--tensor-parallel-size", "2", *extra).hash != \
        _key("--port", "8000", "--tensor-parallel-size", "2").hash


def test_the_key_reads_the_command_through_the_one_reader_env_and_docker_wrappers_included():
    plain = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m", "--port", "8000"], 1)
    wrapped = DeploymentKey.create("vllm", "m", ["env", "A=1", "vllm", "serve", "m", "--port", "8001"], 1)
    assert plain.hash == wrapped.hash
    q = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m", "--quantization", "awq"], 1)
    assert q.quantization == "awq"


def test_a_secret_in_the_command_is_masked_in_the_key():
    k = _key("--api-key", "sk-verysecret123456", "--port", "1")
    assert "verysecret" not in (k.command or "") and "verysecret" not in (k.start_flags or "")


def test_a_schema_1_database_written_by_the_old_code_is_migrated_and_its_rows_keep_working(tmp_path: Path):
    db = tmp_path / "h.db"
    shutil.copy(OLD_DB, db)
    with History(db, readonly=True) as h:  # a listing reads the old file as it is, migrates nothing
        assert [r.deployment for r in h.runs()] == ["22f7a4dcded2", "7b096d27baa3", "7b096d27baa3"]
        assert h.runs()[0].start_type is None
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 1
    with History(db) as h:
        assert h.schema == SCHEMA_VERSION == 3
        runs = h.runs()
        assert len(runs) == 3 and len({r.deployment for r in runs}) == 1  # ports 8000 and 8001: one deployment
        key = DeploymentKey.create("vllm", "/models/qwen", [*VLLM, "--port", "8123", "--tensor-parallel-size", "2",
                                                            "--api-key", "sk-other"], 2)
        assert runs[0].deployment == key.hash  # a new run of it on a third port finds the old ones
        assert [r.engine_version for r in runs] == ["0.10.1"] * 3
        assert [r.id for r in h.runs("7b096d27baa3")] == [2, 1]  # an old hash (--deployment) finds its old rows
        assert h.baseline(key, "cold_start_s") == 30.0  # the pinned run 1 is still the baseline
        assert h.expected_start_seconds(key) == 31.0  # the median of 30, 32 and 31
        new = h.record_run("up", {"verdict": "ready", "cold_start_s": 33.0}, key)
        assert h.get(new) is not None and h.get(new).deployment == key.hash  # type: ignore[union-attr]
    with History(db) as h:  # opened again: nothing migrated twice
        assert len(h.runs()) == 4 and len({r.deployment for r in h.runs()}) == 1


# -- every field of the key, from each form a command comes in ---------------------------------------------------------
SECRET = "sk-" + "k" * 24


def test_every_field_of_the_key_is_read_from_the_command_secrets_masked():
    argv = [*VLLM, "--tensor-parallel-size", "2", "--pipeline-parallel-size", "3", "--data-parallel-size", "4",
            "--nnodes", "5", "--quantization", "fp8", "--api-key", SECRET, "--port", "8000"]
    k = DeploymentKey.create("vllm", "/models/qwen", argv, 8)
    assert k == DeploymentKey(
        engine="vllm", model="/models/qwen", gpu_count=8, parallelism="tp=2 pp=3 dp=4 nnodes=5", quantization="fp8",
        command=f"{' '.join(VLLM)} --tensor-parallel-size 2 --pipeline-parallel-size 3 --data-parallel-size 4 "
                "--nnodes 5 --quantization fp8 --api-key '***' --port 8000",
        start_flags="--model /models/qwen --tensor-parallel-size 2 "
                    "--pipeline-parallel-size 3 --data-parallel-size 4 --nnodes 5 --quantization fp8 --api-key '***'")


def test_a_command_given_as_text_is_the_same_key_as_its_words():
    argv = [*VLLM, "--tensor-parallel-size", "2", "--api-key", SECRET]
    assert DeploymentKey.create("vllm", "/models/qwen", " ".join(argv), 2) == \
        DeploymentKey.create("vllm", "/models/qwen", argv, 2)


def test_a_command_text_that_cannot_be_split_is_kept_whole_with_its_secrets_masked():
    text = f'vllm serve /models/{SECRET} --api-key "{SECRET}'  # an unbalanced quote
    k = DeploymentKey.create("vllm", f"/models/{SECRET}", text, 2)
    masked = 'vllm serve /models/*** --api-key "***'
    assert k == DeploymentKey("vllm", "/models/***", masked, 2, start_flags=masked)


@pytest.mark.parametrize("command", [None, [], ""])
def test_without_a_command_the_key_is_the_engine_model_and_gpus(command: list[str] | str | None):
    assert DeploymentKey.create("vllm", f"/models/{SECRET}", command, 2) == \
        DeploymentKey("vllm", "/models/***", None, 2)


def test_the_command_is_read_as_the_engine_named_reads_it():
    argv = ["python", "launch.py", "--tp", "2", "--model-path", "/models/qwen"]  # --tp is SGLang's, not vLLM's
    assert DeploymentKey.create("sglang", "/models/qwen", argv, 2).parallelism == "tp=2"
    assert DeploymentKey.create("vllm", "/models/qwen", argv, 2).parallelism is None


@pytest.mark.parametrize("model", [None, ""])
def test_a_key_without_a_model_keeps_it_as_given(model: str | None):
    assert DeploymentKey.create("vllm", model, VLLM, 2).model == model
    assert DeploymentKey.create("vllm", model, None, 2).model == model
    assert DeploymentKey.create("vllm", model, 'vllm serve "unbalanced', 2).model == model


def test_the_schema_1_hash_is_the_one_the_old_code_stored():
    con = sqlite3.connect(f"file:{OLD_DB}?mode=ro", uri=True)  # the fixture is read, never written
    try:
        rows = con.execute("SELECT deployment, engine, model, command, gpu_count FROM runs").fetchall()
    finally:
        con.close()
    assert {r[0] for r in rows} == {"7b096d27baa3", "22f7a4dcded2"}  # two ports: two deployments in schema 1
    assert [legacy_hash(*r[1:]) for r in rows] == [r[0] for r in rows]


def test_a_key_as_a_dict_is_its_hash_and_every_field():
    k = _key("--tensor-parallel-size", "2")
    assert k.to_dict() == {"hash": k.hash, "engine": "vllm", "model": "/models/qwen", "command": k.command,
                           "gpu_count": 2, "parallelism": "tp=2", "quantization": None,
                           "start_flags": k.start_flags}
    assert len(k.hash) == 12 and int(k.hash, 16) >= 0
