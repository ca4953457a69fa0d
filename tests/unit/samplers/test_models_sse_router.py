"""llama-server's router mode told from its command, on every case of the code's tables: each router flag in both
spellings (``--flag V``, ``--flag=V``) and each environment variable llama-server reads for it
(``firstlight.samplers.models_sse.ROUTER_FLAGS`` / ``ROUTER_ENV``, from llama.cpp's common/arg.cpp)."""

from __future__ import annotations

import pytest

from firstlight.samplers.models_sse import ROUTER_ENV, ROUTER_FLAGS, is_router


def test_the_tables_hold_llama_servers_router_options():
    assert set(ROUTER_FLAGS) == {"--models-dir", "--models-preset"}
    assert set(ROUTER_ENV) == {"LLAMA_ARG_MODELS_DIR", "LLAMA_ARG_MODELS_PRESET"}


@pytest.mark.parametrize("spelling", ["space", "equals"])
@pytest.mark.parametrize("flag", ROUTER_FLAGS)
def test_every_router_flag_in_either_spelling_is_router_mode(flag: str, spelling: str):
    given = [flag, "/srv/models"] if spelling == "space" else [f"{flag}=/srv/models"]
    assert is_router(["llama-server", "--port", "8080", *given])
    assert is_router(["llama-server", *given], {})


@pytest.mark.parametrize("name", ROUTER_ENV)
def test_every_router_environment_variable_is_router_mode(name: str):
    assert is_router(["llama-server", "--port", "8080"], {name: "/srv/models"})
    assert not is_router(["llama-server", "--port", "8080"], {name: ""})  # set but empty: no directory named


@pytest.mark.parametrize("argv", [["llama-server", "-m", "/srv/models/m.gguf"],
                                  ["llama-server", "--models-directory", "/srv"],  # not the flag, only like it
                                  ["llama-server", "--model", "models-dir"]])
def test_a_command_without_a_router_option_is_not_router_mode(argv: list[str]):
    assert not is_router(argv, {"LLAMA_ARG_MODEL": "/srv/models/m.gguf"})


@pytest.mark.parametrize("flag", ROUTER_FLAGS)
def test_a_router_flag_whose_value_holds_an_equals_sign_is_router_mode(flag: str):
    assert is_router(["llama-server", f"{flag}=/srv/models/a=b"], {})  # the flag is what comes before the first =
