"""Packaging (issue 19, item 5): the license is an SPDX expression, which setuptools reads without its
"`project.license` as a TOML table is deprecated" warning from version 77 on, so the build asks for 77+."""

from __future__ import annotations

import re

from tests.support.common import REPO

PYPROJECT = (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_license_is_an_spdx_string_and_the_build_needs_a_setuptools_that_reads_it():
    assert re.search(r'^license = "Apache-2\.0"$', PYPROJECT, re.M), "license must be an SPDX string (PEP 639)"
    assert "License ::" not in PYPROJECT  # a license classifier beside it is an error for setuptools 77+
    requires = re.search(r"^requires = \[(.*)\]", PYPROJECT, re.M)
    assert requires is not None
    m = re.search(r'"setuptools>=(\d+)', requires[1])
    assert m is not None and int(m[1]) >= 77, requires[1]


def test_the_version_is_written_once_and_the_installed_metadata_says_it():
    import importlib.metadata

    from firstlight import __version__
    from firstlight._version import __version__ as leaf

    assert __version__ is leaf
    assert importlib.metadata.version("firstlight") == leaf
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and "\nversion = " not in pyproject.split("[tool.")[0]


def test_the_changelogs_latest_version_is_the_packages_and_it_keeps_a_changelogs_form():
    from firstlight._version import __version__

    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n") and "Keep a Changelog" in text
    versions = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert versions and versions[0][0] == "Unreleased", versions
    released = [v for v, _ in versions[1:]]
    assert released and released[0] == __version__, (released, __version__)
    assert all(date for _, date in versions[1:]), versions  # every release has its date
    sections = re.findall(r"^### (\w+)$", text, re.M)
    assert set(sections) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, sections


def _stages() -> list[list[str]]:
    """The Containerfile's instructions (continuation lines joined, comments dropped), one list per stage."""
    text = re.sub(r"\\\n\s*", " ", (REPO / "Containerfile").read_text(encoding="utf-8"))
    stages: list[list[str]] = [[]]
    for line in (x.strip() for x in text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM ") and stages[-1] and any(x.startswith("FROM ") for x in stages[-1]):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_containerfiles_final_stage_holds_the_wheel_only_runs_as_a_user_and_its_entrypoint_is_firstlight():
    builder, final = _stages()[-2:]
    builder = builder[[x.startswith("FROM ") for x in builder].index(True):]  # the ARGs before it are global
    assert re.fullmatch(r"FROM \$\{BASE\} AS builder", builder[0]) and "python -m build --wheel" in " ".join(builder)
    assert final[0] == "FROM ${BASE}"
    copies = [x for x in final if x.startswith(("COPY", "ADD"))]
    assert copies == ["COPY --from=builder /dist/ /tmp/dist/"], copies  # the wheel, never the sources
    body = " ".join(final)
    for tool in ("apt-get", "gcc", "build-essential", "pip install --no-cache-dir --disable-pip-version-check build"):
        assert tool not in body, tool  # no compiler, no build tool in the image
    assert "firstlight-*.whl" in body
    # the postgres extra: the sidecars' shared history (deploy/k8s); the glob expanded before the extra is named
    assert '"$(echo /tmp/dist/firstlight-*.whl)[postgres]"' in body
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert any(d.startswith("psycopg[binary]") for d in extras["postgres"]), extras["postgres"]
    users = [x.split()[1] for x in final if x.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root"), users
    assert final[-2:] == ['ENTRYPOINT ["firstlight"]', 'CMD ["--help"]']
    assert not any(x.startswith("HEALTHCHECK") for stage in _stages() for x in stage)  # /readyz and /livez answer
