"""``firstlight.cli.options``: the options the start commands share, each declared once, and the Config parts built
from them. In process, through click's own parser (``CliRunner``): the option factories are called inside each
test, so a changed name, default, type or help shows; what a command's defaults build is compared with the
settings' one declaration; every refusal is the one-line usage error, exit 64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from firstlight.cli import options as o
from firstlight.config import AfterReadyConfig, JudgeConfig, ProbeConfig
from firstlight.engines import PROFILES, get_profile
from firstlight.settings import DAY_S, NUMBERS
from firstlight.vocab import EXIT_USAGE


def _command(*decorators: o.Decorator) -> click.Command:
    @click.command(cls=o.Command)
    @o.options(*decorators)
    def cmd(**kw: Any) -> None:
        click.echo(repr(sorted(kw.items())))

    return cmd


def _parse(cmd: click.Command, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    got: dict[str, Any] = {}
    cmd.callback = lambda **kw: got.update(kw)  # type: ignore[assignment]
    result = CliRunner().invoke(cmd, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return got


def _refuse(cmd: click.Command, *args: str) -> str:
    result = CliRunner().invoke(cmd, list(args))
    assert result.exit_code == EXIT_USAGE, result.output
    return result.output


# -- one option per setting --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_a_number_option_takes_its_flag_default_and_check_from_the_one_declaration(name: str):
    f = o.number_option(name, "what it does")(lambda **kw: None)
    (param,) = f.__click_params__  # type: ignore[attr-defined]
    number = NUMBERS[name]
    assert param.opts == [f"--{name.replace('_', '-')}"] and param.name == name
    assert (param.default, param.show_default, param.help) == (number.default, True, "what it does")
    assert isinstance(param.type, o.Setting) and param.type.number is number
    assert param.type.name == (number.unit or ("integer" if number.integer else "number"))
    assert _parse(_command(o.number_option(name)))[name] == number.default


def test_a_number_options_default_can_be_given_and_its_values_are_checked():
    cmd = _command(o.number_option("timeout", default=5.0), o.number_option("max_tokens"))
    assert _parse(cmd) == {"timeout": 5.0, "max_tokens": 8}
    assert _parse(cmd, "--timeout", "7.5", "--max-tokens", "16") == {"timeout": 7.5, "max_tokens": 16}
    out = _refuse(cmd, "--timeout", "0")
    assert out.strip() == "Error: --timeout 0: give a number of seconds above 0 and at most 86400"
    assert _refuse(cmd, "--max-tokens", "1.5").strip() == "Error: --max-tokens 1.5: give a whole number from 1 to 4096"
    assert "Usage:" not in out  # the option's own check says all there is: one line


def test_the_setting_type_names_its_unit_or_kind():
    assert o.Setting(NUMBERS["timeout"]).name == "seconds"
    assert o.Setting(NUMBERS["max_tokens"]).name == "integer"
    assert o.Setting(NUMBERS["margin"]).name == "number"
    with pytest.raises(o.UsageFailure, match=r"^value nan: give a number from 0 to 10$"):
        o.Setting(NUMBERS["margin"]).convert("nan", None, None)


def test_seconds_are_above_0_and_at_most_the_maximum():
    day, hour = o.Seconds(), o.Seconds(3600.0)
    assert day.convert("86400", None, None) == DAY_S and day.convert("0.001", None, None) == 0.001
    assert hour.convert("3600", None, None) == 3600.0 and day.name == "seconds"
    for seconds, bad in ((day, "0"), (day, "-1"), (day, "86401"), (hour, "3601"), (day, "inf"), (day, "soon")):
        with pytest.raises(o.UsageFailure, match=rf"^value {bad}: give a number of seconds above 0 and at most"):
            seconds.convert(bad, None, None)
    assert o.TIMEOUT.number.high == DAY_S


# -- the usage error ----------------------------------------------------------------------------------------------
def test_a_usage_failure_exits_64_in_one_line_unless_clicks_parser_refused():
    assert o.UsageFailure("x").exit_code == EXIT_USAGE == 64
    cmd = _command(o.number_option("timeout"))
    unknown = _refuse(cmd, "--no-such-option")
    assert "Usage:" in unknown and "No such option '--no-such-option'" in unknown  # the options help there
    assert _refuse(cmd, "--timeout").strip().endswith("Option '--timeout' requires an argument.")
    assert not o.UsageFailure("x").usage and o.UsageFailure("x", usage=True).usage


def test_a_usage_failure_shows_one_line_on_stderr(capsys: pytest.CaptureFixture[str]):
    o.UsageFailure("--engine nope: give one of a, b").show()
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "Error: --engine nope: give one of a, b\n")
    with click.Context(click.Command("up"), info_name="up") as ctx:
        o.UsageFailure("no such option", ctx, usage=True).show()
    err = capsys.readouterr().err
    assert err.startswith("Usage: up") and "Error: no such option" in err


def test_usage_turns_a_settings_refusal_into_the_options_line():
    with pytest.raises(o.UsageFailure, match=r"^--stall-timeout -1(\.0)?: give a number of seconds above 0"):
        o.judge_config({"timeout": 10.0, "stall_timeout": -1.0, "spin_timeout": 10.0})
    assert o.usage(lambda a, b=0: a + b, 1, b=2) == 3


# -- shared options -----------------------------------------------------------------------------------------------
def test_the_engine_option_takes_a_known_profile_else_names_them_all():
    cmd = _command(o.engine_option())
    assert _parse(cmd) == {"engine": None} and _parse(cmd, "--engine", "vllm") == {"engine": "vllm"}
    out = _refuse(cmd, "--engine", "nope").strip()
    assert out == f"Error: --engine nope: give one of {', '.join(sorted(PROFILES))}"
    (param,) = o.engine_option("the unit's")(lambda **kw: None).__click_params__  # type: ignore[attr-defined]
    assert param.metavar == "ENGINE" and param.help.startswith("Engine profile (default: the unit's): one of sglang")
    assert "(default: detect)" in o.engine_option()(lambda **kw: None).__click_params__[0].help  # type: ignore


def test_the_history_option_is_a_file_path(tmp_path: Path):
    cmd = _command(o.history_option())
    assert _parse(cmd) == {"history_path": None}
    assert _parse(cmd, "--history", str(tmp_path / "h.db")) == {"history_path": tmp_path / "h.db"}
    assert "is a directory" in _refuse(cmd, "--history", str(tmp_path))
    (param,) = o.history_option()(lambda **kw: None).__click_params__  # type: ignore[attr-defined]
    assert param.help.startswith("Run history: a SQLite file, or a postgresql:// URL")


def test_options_keep_the_order_they_are_listed_in():
    cmd = _command(o.number_option("timeout"), o.engine_option(), o.history_option())
    assert [p.name for p in cmd.params] == ["timeout", "engine", "history_path"]


# -- the start commands' groups and the Config parts they build ------------------------------------------------------
def _start_command() -> click.Command:
    return _command(o.probe_options, o.after_ready_options, o.watch_options)


def test_the_start_commands_defaults_build_the_configs_defaults():
    kw = _parse(_start_command())
    probe = o.probe_config("http://127.0.0.1:8000", get_profile("vllm"), kw)
    default = ProbeConfig()
    for field in ("api", "prompt", "expect", "max_tokens", "model", "api_key", "connect_timeout", "read_timeout",
                  "generation_timeout", "min_interval", "max_interval"):
        assert getattr(probe, field) == getattr(default, field), field
    assert o.judge_config(kw) == JudgeConfig()
    after, history = o.after_ready_config(kw)
    assert after == AfterReadyConfig()
    assert (history.enabled, history.path, history.fail_on_regression, history.margin) == (True, None, False, 0.2)
    assert (kw["serving_interval"], kw["sample_interval"], kw["member_port"], kw["as_json"], kw["plain"]) == (
        10.0, 1.0, 8081, False, False)


def test_each_start_option_reaches_its_config(tmp_path: Path):
    kw = _parse(_start_command(), "--api", "chat", "--prompt", "Hi", "--max-tokens", "3", "--expect", "o+k",
                "--served-model", "m1", "--health-path", "/ping", "--connect-timeout", "2", "--read-timeout", "3",
                "--generation-timeout", "4", "--poll-min", "0.2", "--poll-max", "2", "--timeout", "50",
                "--stall-timeout", "6", "--spin-timeout", "7", "--warmup", "2", "--bench", "--bench-requests", "9",
                "--bench-concurrency", "3", "--bench-duration", "11", "--bench-output-len", "12",
                "--history", str(tmp_path / "h.db"), "--fail-on-regression", "--margin", "0.5",
                env={"FIRSTLIGHT_API_KEY": "k3y-from-env"})
    probe = o.probe_config("http://127.0.0.1:8000", get_profile("vllm"), kw)
    assert (probe.api, probe.prompt, probe.max_tokens, probe.expect, probe.model, probe.api_key) == (
        "chat", "Hi", 3, "o+k", "m1", "k3y-from-env")
    assert (probe.health_path, probe.connect_timeout, probe.read_timeout, probe.generation_timeout) == (
        "/ping", 2.0, 3.0, 4.0)
    assert (probe.min_interval, probe.max_interval) == (0.2, 2.0)
    assert o.judge_config(kw) == JudgeConfig(timeout=50.0, stall_timeout=6.0, spin_timeout=7.0)
    after, history = o.after_ready_config(kw)
    assert after == AfterReadyConfig(warmup=2, bench=True, bench_requests=9, bench_concurrency=3,
                                     bench_duration=11.0, bench_output_len=12)
    assert (history.enabled, history.path, history.fail_on_regression, history.margin) == (
        True, tmp_path / "h.db", True, 0.5)
    assert o.after_ready_config({**kw, "no_history": True})[1].enabled is False


def test_known_answer_is_check_by_default_takes_its_modes_and_refuses_others_with_64():
    cmd = _command(o.probe_options, o.after_ready_options, o.watch_options)
    assert o.after_ready_config(_parse(cmd))[1].known_answer == "check"
    assert o.after_ready_config(_parse(cmd, "--known-answer", "record"))[1].known_answer == "record"
    assert o.after_ready_config(_parse(cmd, "--known-answer", "off"))[1].answers is False
    assert "--known-answer" in _refuse(cmd, "--known-answer", "sometimes")


def test_a_probe_without_polling_options_polls_at_the_settings_defaults():
    kw = _parse(_command(o.probe_options))
    probe = o.probe_config("http://127.0.0.1:8000", get_profile("vllm"), kw)
    assert (probe.min_interval, probe.max_interval) == (NUMBERS["poll_min"].default, NUMBERS["poll_max"].default)


def test_the_builders_refuse_in_one_line_naming_the_option():
    kw = _parse(_start_command())
    with pytest.raises(o.UsageFailure, match=r"^--expect \(: "):
        o.check_expect("(")
    o.check_expect(None)
    o.check_expect("ok")
    with pytest.raises(o.UsageFailure, match=r"^--poll-min 2(\.0)?: the fastest polling period"):
        o.probe_config("http://127.0.0.1:8000", get_profile("vllm"), {**kw, "poll_min": 2.0, "poll_max": 1.0})
    with pytest.raises(o.UsageFailure, match=r"^--engine nope: unknown engine 'nope'; valid engines: sglang, vllm"):
        o.profile_for("nope")
    assert o.profile_for(None, ["vllm", "serve", "m"]).name == "vllm" and o.profile_for("sglang").name == "sglang"
    assert o.profile_for(None).name == "generic"
    with pytest.raises(o.UsageFailure, match=r"^--url: cannot tell the server's port"):
        o.url_from_command(["python", "-c", "pass"], get_profile("generic"))
    assert o.url_from_command(["vllm", "serve", "m", "--port", "9001"], get_profile("vllm")) == \
        "http://127.0.0.1:9001"


def test_the_runs_redactor_knows_the_key_and_the_command_lines_secrets():
    red = o.redactor_for(["srv", "--api-key", "cmd-secret-123"], "k3y-given-456")
    shown = red.text("cmd-secret-123 and k3y-given-456")
    assert "cmd-secret-123" not in shown and "k3y-given-456" not in shown
    assert o.redactor_for([], None).text("nothing secret") == "nothing secret"


def test_a_usage_failure_is_shown_on_the_file_given():
    import io

    shown = io.StringIO()
    o.UsageFailure("bad value").show(shown)
    assert shown.getvalue() == "Error: bad value\n"
    with click.Context(click.Command("up"), info_name="up") as ctx:
        o.UsageFailure("no such option", ctx, usage=True).show(shown)
    assert "Usage: up" in shown.getvalue() and shown.getvalue().endswith("Error: no such option\n")


def test_the_engine_options_help_lists_the_engines():
    (param,) = o.engine_option()(lambda **kw: None).__click_params__  # type: ignore[attr-defined]
    assert param.help == ("Engine profile (default: detect): one of sglang, vllm, llamacpp, tgi, trtllm, lmdeploy, "
                          "ollama, generic.")


def test_the_probe_config_resolves_the_host_within_the_bound_given(monkeypatch: pytest.MonkeyPatch):
    seen: dict[str, Any] = {}
    monkeypatch.setattr(o.settings, "probe", lambda *a, **kw: seen.update(kw) or "probe")
    kw = _parse(_command(o.probe_options))
    assert o.probe_config("http://127.0.0.1:8000", get_profile("vllm"), kw, resolve_within=0.25) == "probe"
    assert seen["resolve_within"] == 0.25
    o.probe_config("http://127.0.0.1:8000", get_profile("vllm"), kw)
    assert seen["resolve_within"] == o.settings.RESOLVE_S
