"""``firstlight --version``: the version and the engine releases the profiles were checked against (each profile's
``checked_versions``, the releases the set-up scripts pin for the real-engine tests)."""

from __future__ import annotations

import dataclasses
import re

from click.testing import CliRunner

from firstlight._version import __version__
from firstlight.cli import cli
from firstlight.engines import GENERIC, PROFILES, register_profile, unregister_profile
from tests.support.common import REPO


def _version() -> list[str]:
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0, r.output
    return r.output.splitlines()


def _pin(script: str, name: str) -> str:
    m = re.search(rf'^{name} = "?([\w.]+)"?$', (REPO / "scripts" / script).read_text(), re.M)
    assert m is not None, (script, name)
    return m[1]


def test_version_says_the_version_then_each_checked_engine_release():
    lines = _version()
    assert lines[0] == f"firstlight, version {__version__}"
    checked = [p for p in PROFILES.values() if p.checked_versions]
    assert {p.name for p in checked} >= {"vllm", "llamacpp"}
    for p in checked:
        assert any(re.fullmatch(rf"\s+{re.escape(p.display_name)}\s+{re.escape(', '.join(p.checked_versions))}", x)
                   for x in lines), (p.name, lines)
    rest = " ".join(lines[1 + len(checked) + 1:])
    assert all(p.name in rest for p in PROFILES.values() if not p.checked_versions), lines


def test_the_checked_releases_are_the_ones_the_real_engine_tests_set_up():
    assert PROFILES["llamacpp"].checked_versions == (f"b{_pin('setup_llama_server.py', 'LLAMA_BUILD_NUMBER')}",)
    assert PROFILES["llamarpc"].checked_versions == PROFILES["llamacpp"].checked_versions
    assert PROFILES["vllm"].checked_versions == (_pin("setup_vllm.py", "VLLM_VERSION"),)


def test_a_profile_registered_with_checked_versions_is_named_by_version():
    toy = dataclasses.replace(GENERIC, name="toyllm", display_name="Toy LLM", checked_versions=("1.2.3", "1.3.0"))
    register_profile(toy)
    try:
        assert "  Toy LLM" in "\n".join(_version()) and any(x.endswith("1.2.3, 1.3.0") for x in _version())
    finally:
        unregister_profile("toyllm")
    assert not any("Toy LLM" in x for x in _version())
