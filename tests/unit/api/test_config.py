"""What ``up``/``watch`` build from their arguments before anything starts, in process: the probe settings
(``_probe_config``: each argument lands in its field, the profile's endpoints, the bounds of max_tokens, the api
names, a bad regular expression, timeouts that are positive and finite) and the judge's (``_judge_config``). Named
by the mutation run of firstlight/api.py, where these functions were reached only by tests that start a server."""

from __future__ import annotations

import math
from typing import Any

import pytest

from firstlight.api import _judge_config, _probe_config
from firstlight.config import ProbeConfig
from firstlight.engines import get_profile

VLLM = get_profile("vllm")


def probe(**kw: Any) -> ProbeConfig:
    args: dict[str, Any] = {"api": "chat", "prompt": "Hi", "expect": "Paris", "max_tokens": 8,
                            "served_model": "m", "api_key": "k-1234", "connect_timeout": 1.5, "read_timeout": 2.5,
                            "generation_timeout": 30.0}
    return _probe_config("127.0.0.1:8000", VLLM, **{**args, **kw})


def test_each_argument_lands_in_its_field_with_the_profiles_endpoints():
    c = probe()
    ep = VLLM.endpoints
    assert (c.url, c.api, c.prompt, c.max_tokens, c.expect, c.model, c.api_key) == (
        "http://127.0.0.1:8000", "chat", "Hi", 8, "Paris", "m", "k-1234")
    assert (c.health_path, c.models_path, c.completions_path, c.chat_path) == (
        ep.health, ep.models, ep.completions, ep.chat)
    assert (c.connect_timeout, c.read_timeout, c.generation_timeout) == (1.5, 2.5, 30.0)
    assert probe(api="completions").api == "completions"


@pytest.mark.parametrize("n", [1, 4096])
def test_max_tokens_1_to_4096_are_taken(n: int):
    assert probe(max_tokens=n).max_tokens == n


@pytest.mark.parametrize("n", [0, 4097])
def test_max_tokens_outside_1_to_4096_is_refused(n: int):
    with pytest.raises(ValueError, match=rf"^max_tokens must be within 1\.\.4096, not {n}$"):
        probe(max_tokens=n)


def test_an_unknown_api_and_a_bad_expect_are_refused_with_their_reason():
    with pytest.raises(ValueError, match=r"^api must be 'completions' or 'chat', not 'x'$"):
        probe(api="x")
    with pytest.raises(ValueError, match=r"^expect is not a valid regular expression: "):
        probe(expect="(")
    assert probe(expect=None).expect is None


@pytest.mark.parametrize("field", ["connect_timeout", "read_timeout", "generation_timeout"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_each_timeout_must_be_positive_and_finite(field: str, value: float):
    with pytest.raises(ValueError, match=rf"^{field} must be a positive number of seconds, not "):
        probe(**{field: value})


def test_the_judge_takes_the_three_timeouts_each_in_its_own_field():
    c = _judge_config(3600.0, 120.0, 900.0)
    assert (c.timeout, c.stall_timeout, c.spin_timeout) == (3600.0, 120.0, 900.0)
    for name, args in (("timeout", (0, 1, 1)), ("stall_timeout", (1, 0, 1)), ("spin_timeout", (1, 1, 0))):
        with pytest.raises(ValueError, match=rf"^{name} must be"):
            _judge_config(*args)
