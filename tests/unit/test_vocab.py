"""The vocabulary (verdicts, phases, failure categories, exit codes) lives in ``firstlight.vocab``; the help
texts and the documentation's tables (docs/usage.md) say the same words and numbers."""

from __future__ import annotations

import re

import pytest

from firstlight import vocab
from firstlight.cli import EXIT_HELP
from tests.support.docs import section as _section


def test_exit_help_lists_every_exit_code_with_its_verdict():
    codes = {**vocab.EXIT_CODES, vocab.REGRESSION: vocab.EXIT_REGRESSION}
    for verdict, code in codes.items():
        assert re.search(rf"^\s*{code}\s+{verdict}\b", EXIT_HELP, re.M), (verdict, code)
    for code in (vocab.EXIT_USAGE, vocab.EXIT_INTERNAL):
        assert re.search(rf"^\s*{code}\s+\S", EXIT_HELP, re.M), code


def test_readme_exit_code_table_matches_the_vocabulary():
    table = dict(re.findall(r"^\| (\d+) \| `(\w+)`", _section("Exit codes"), re.M))
    expected = {str(c): v for v, c in vocab.EXIT_CODES.items()}
    expected[str(vocab.EXIT_REGRESSION)] = vocab.REGRESSION
    assert table == expected
    codes = _section("Exit codes")
    assert f"| {vocab.EXIT_USAGE} |" in codes and f"| {vocab.EXIT_INTERNAL} |" in codes


def test_readme_names_every_failure_category_and_no_other():
    text = _section("JSON output")
    para = text[text.index("`failure` is one of"):]
    para = para[: para.index("(the server answers, but not with valid text)")]
    named = set(re.findall(r"`(\w+)`", para)) - {"failure", "hint"}
    assert named == set(vocab.ALL_FAILURES)


def test_readme_names_every_phase_in_order():
    text = _section("JSON output")
    para = text[text.index("`phase` is the engine-neutral phase") + len("`phase` is"):]
    named = re.findall(r"`(\w+)`", para[: para.index(").")])
    assert tuple(named) == vocab.ALL_PHASES


def test_serving_is_the_phase_after_ready_for_the_result_and_prometheus():
    from prometheus_client import generate_latest

    from firstlight.report.prometheus import PrometheusExporter
    from firstlight.result import RunResult

    assert vocab.ALL_PHASES[-2:] == ("ready", vocab.SERVING_PHASE) == ("ready", "serving")
    assert vocab.SERVING_PHASE not in vocab.PHASE_INDEX  # no log line leads a start into it
    ready = RunResult(verdict=vocab.READY, phase="ready", started_at=1.0, ended_at=2.0, engine="sim",
                      url="http://127.0.0.1:1", ready_at=2.0, cold_start_s=1.0)
    assert ready.died_serving(1, 5.0).phase == vocab.SERVING_PHASE  # a server that exited after READY
    exporter = PrometheusExporter(0)
    try:
        states = set(re.findall(r'firstlight_phase\{firstlight_phase="(\w+)"\}', generate_latest(exporter.registry)
                                .decode()))
        assert states == set(vocab.ALL_PHASES)
        exporter.verdict(ready)
        shown = generate_latest(exporter.registry).decode()
        assert 'firstlight_phase{firstlight_phase="serving"} 1.0' in shown
    finally:
        exporter.close()


def test_exit_code_of_a_regression_depends_on_the_flag():
    assert vocab.exit_code(vocab.REGRESSION) == 0
    assert vocab.exit_code(vocab.REGRESSION, fail_on_regression=True) == vocab.EXIT_REGRESSION
    assert vocab.exit_code(vocab.HUNG) == 2


def test_help_lists_every_failure_category():
    from click.testing import CliRunner

    from firstlight.cli import cli

    for command in ("up", "watch"):
        out = CliRunner().invoke(cli, [command, "--help"]).output
        listed = out[out.index("Failure categories"):]
        named = set(re.findall(r"\b[a-z_]+\b", listed.split(":", 1)[1]))
        assert set(vocab.ALL_FAILURES) <= named, (command, set(vocab.ALL_FAILURES) - named)


def _exit_codes_of(command: str) -> dict[int, str]:
    """The exit codes a command's --help states, with their text (both forms: one line or a table)."""
    from click.testing import CliRunner

    from firstlight.cli import cli

    text = CliRunner().invoke(cli, [command, "--help"], terminal_width=110).output
    block = text[text.index("Exit codes:") + len("Exit codes:"):]
    return {int(m.group(1)): m.group(2).strip() for m in re.finditer(r"(?:^|;)[ \t]*(\d+)[ \t]+([^;\n]+)", block, re.M)}


@pytest.mark.parametrize("command", ["up", "watch", "probe", "replay", "bench", "history", "preflight", "report",
                                     "explain"])
def test_every_commands_exit_code_text_uses_the_vocabularys_codes(command: str):
    codes = _exit_codes_of(command)
    known = {*vocab.EXIT_CODES.values(), vocab.EXIT_REGRESSION, vocab.EXIT_USAGE, vocab.EXIT_INTERNAL}
    assert codes and set(codes) <= known, (command, codes)
    assert 0 in codes and vocab.EXIT_USAGE in codes, (command, codes)  # each says what success and misuse exit
    assert "usage" in codes[vocab.EXIT_USAGE], codes[vocab.EXIT_USAGE]
    if vocab.EXIT_INTERNAL in codes:
        assert "internal" in codes[vocab.EXIT_INTERNAL]
    for verdict in (vocab.HUNG, vocab.TIMEOUT, vocab.INTERRUPTED):
        if vocab.EXIT_CODES[verdict] in codes and command in ("up", "watch"):
            assert verdict in codes[vocab.EXIT_CODES[verdict]], (verdict, codes)
