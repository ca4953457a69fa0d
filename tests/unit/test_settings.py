"""The one settings path (firstlight/settings.py): every number declared once, refused with the same words by the
CLI and the Python API; the probe, judge, after-READY and history settings built from what the user gave; the
run's Config. In process: the CLI is parsed by click (``make_context``), nothing is launched."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import click
import pytest

from firstlight import api, settings
from firstlight.cli import cli
from firstlight.cli import options as cli_options
from firstlight.config import AfterReadyConfig, Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import get_profile
from firstlight.settings import NUMBERS, SettingError

VLLM = get_profile("vllm")
START_COMMANDS = ("up", "watch")


def probe(**kw: Any) -> ProbeConfig:
    args: dict[str, Any] = {"api": "chat", "prompt": "Hi", "expect": "Paris", "max_tokens": 8,
                            "served_model": "m", "api_key": "k-1234", "connect_timeout": 1.5, "read_timeout": 2.5,
                            "generation_timeout": 30.0}
    return settings.probe("127.0.0.1:8000", VLLM, **{**args, **kw})


def parsed(command: str, *args: str) -> dict[str, Any]:
    tail = ["--", "llama-server"] if command == "up" else ["http://127.0.0.1:1"]
    return cli.commands[command].make_context(command, [*args, *tail]).params


# -- the probe settings -------------------------------------------------------------------------------------------
def test_each_argument_lands_in_its_field_with_the_profiles_endpoints():
    c = probe()
    ep = VLLM.endpoints
    assert (c.url, c.api, c.prompt, c.max_tokens, c.expect, c.model, c.api_key) == (
        "http://127.0.0.1:8000", "chat", "Hi", 8, "Paris", "m", "k-1234")
    assert (c.health_path, c.models_path, c.completions_path, c.chat_path) == (
        ep.health, ep.models, ep.completions, ep.chat)
    assert (c.connect_timeout, c.read_timeout, c.generation_timeout) == (1.5, 2.5, 30.0)
    assert c.explicit == frozenset() and probe(api="completions").api == "completions"


def test_a_health_path_given_replaces_the_engines_and_is_marked_explicit():
    c = probe(health_path="/ping")
    assert c.health_path == "/ping" and c.explicit == {"health_path"}


@pytest.mark.parametrize("n", [1, 4096])
def test_max_tokens_1_to_4096_are_taken(n: int):
    assert probe(max_tokens=n).max_tokens == n


@pytest.mark.parametrize("n", [0, 4097, 8.5])
def test_max_tokens_outside_1_to_4096_or_not_whole_is_refused(n: float):
    with pytest.raises(SettingError, match=rf"^max_tokens {n!r}: give a whole number from 1 to 4096$"):
        probe(max_tokens=n)


def test_an_unknown_api_and_a_bad_expect_are_refused_with_their_reason():
    with pytest.raises(SettingError, match=r"^api 'x': give 'completions' or 'chat'$"):
        probe(api="x")
    with pytest.raises(SettingError, match=r"^expect '\(': not a valid regular expression: "):
        probe(expect="(")
    assert probe(expect=None).expect is None


@pytest.mark.parametrize("field", ["connect_timeout", "read_timeout", "generation_timeout"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan, 86_400.5, True, "soon"])
def test_each_timeout_must_be_finite_above_0_and_at_most_a_day(field: str, value: object):
    with pytest.raises(SettingError, match=rf"^{field} .*: give a number of seconds above 0 and at most 86400$"):
        probe(**{field: value})


def test_poll_min_above_poll_max_is_refused():
    assert probe(poll_min=0.5, poll_max=0.5).min_interval == 0.5
    with pytest.raises(SettingError, match=r"^poll_min 2\.0: the fastest polling period must not be above the "
                                           r"slowest \(1 s\)$"):
        probe(poll_min=2.0, poll_max=1.0)
    with pytest.raises(click.UsageError, match=r"^--poll-min 2(\.0)?: the fastest polling period must not be above"):
        options_from_cli = parsed("watch", "--poll-min", "2", "--poll-max", "1")
        cli_options.probe_config("http://127.0.0.1:1", VLLM, options_from_cli)


def test_a_url_that_is_no_url_or_does_not_resolve_is_refused_naming_it():
    with pytest.raises(SettingError, match=r"^url "):
        settings.probe("http://", VLLM)
    with pytest.raises(SettingError, match=r"cannot resolve host 'no-such-host\.invalid'"):
        settings.probe("http://no-such-host.invalid:8000", VLLM)


# -- the judge, after READY, history -------------------------------------------------------------------------------
def test_the_judge_takes_the_three_timeouts_each_in_its_own_field():
    c = settings.judge(3600.0, 120.0, 900.0)
    assert (c.timeout, c.stall_timeout, c.spin_timeout) == (3600.0, 120.0, 900.0)
    for name, args in (("timeout", (0, 1, 1)), ("stall_timeout", (1, 0, 1)), ("spin_timeout", (1, 1, 0))):
        with pytest.raises(SettingError, match=rf"^{name} 0: give"):
            settings.judge(*args)


def test_after_ready_and_history_land_in_their_fields():
    a = settings.after_ready(2, True, 10, 3, 5.0, 16)
    assert (a.warmup, a.bench, a.bench_requests, a.bench_concurrency, a.bench_duration, a.bench_output_len) == (
        2, True, 10, 3, 5.0, 16)
    h = settings.history(False, "/tmp/h.db", True, 0.5)
    assert (h.enabled, h.path, h.fail_on_regression, h.margin) == (False, Path("/tmp/h.db"), True, 0.5)
    assert settings.history().path is None


@pytest.mark.parametrize("margin", [math.nan, -0.1, 10.5, math.inf])
def test_a_margin_outside_0_to_10_is_refused(margin: float):
    with pytest.raises(SettingError, match=r"^margin .*: give a number from 0 to 10$"):
        settings.history(margin=margin)


def test_the_known_answer_is_checked_by_default_and_only_its_three_modes_are_taken():
    assert settings.history().known_answer == "check" and settings.history().answers
    assert settings.history(known_answer="record").known_answer == "record"
    assert not settings.history(known_answer="off").answers
    assert not settings.history(False).answers  # no history: nothing to record or check against
    with pytest.raises(SettingError, match=r"^known_answer 'sometimes': give one of check, record, off$"):
        settings.history(known_answer="sometimes")


def test_the_config_checks_its_periods_and_names_the_engine_of_the_watched_command():
    judge = settings.judge()
    c = settings.config(probe=probe(), judge=judge, command=["podman", "run", "img"],
                        watched_command=["vllm", "serve", "m"], grace=3)
    assert (c.engine, c.grace, c.command, c.watched_command) == ("vllm", 3.0, ["podman", "run", "img"],
                                                                   ["vllm", "serve", "m"])
    for name, bad in (("grace", 0), ("sample_interval", math.nan), ("serving_interval", -1)):
        with pytest.raises(SettingError, match=rf"^{name} "):
            settings.config(probe=probe(), judge=judge, **{name: bad})
    assert settings.config(probe=probe(), judge=judge, serving_interval=0).serving_interval == 0.0


def test_where_is_the_url_or_the_port_on_loopback_never_both():
    assert settings.where(None, 8081) == "http://127.0.0.1:8081"
    assert settings.where("http://h:1", None) == "http://h:1" and settings.where(None, None) is None
    for url, port in (("http://h:1", 2), (None, 0), (None, 65536), (None, True)):
        with pytest.raises(SettingError, match=r"^port "):
            settings.where(url, port)


def test_an_unknown_engine_is_refused_naming_the_choices():
    with pytest.raises(SettingError, match=r"^engine 'nope': .*vllm"):
        settings.profile("nope")
    assert settings.profile(None, ["llama-server", "-m", "x"]).name == "llamacpp"


# -- one declaration: the CLI and the API alike ---------------------------------------------------------------------
def _config_default(name: str) -> Any:
    where = {"poll_min": (ProbeConfig, "min_interval"), "poll_max": (ProbeConfig, "max_interval")}
    if name in where:
        cls, attr = where[name]
        return next(f.default for f in fields(cls) if f.name == attr)
    for cls in (JudgeConfig, ProbeConfig, AfterReadyConfig, HistoryConfig, Config):
        for f in fields(cls):
            if f.name == name:
                return f.default
    return None


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_each_number_defaults_to_its_config_field_and_the_cli_option_to_that(name: str):
    n = NUMBERS[name]
    if (default := _config_default(name)) is not None:
        assert n.default == default
    for command in START_COMMANDS:
        params = parsed(command)
        if name in params:
            assert params[name] == n.default, (command, name)


@pytest.mark.parametrize("name", sorted(NUMBERS))
@pytest.mark.parametrize("bad", ["nan", "inf", "1e12", "-1"])
def test_the_cli_and_the_api_refuse_the_same_value_with_the_same_words(name: str, bad: str):
    n = NUMBERS[name]
    with pytest.raises(SettingError) as api_error:
        n.check(bad)
    flag = f"--{name.replace('_', '-')}"
    for command in START_COMMANDS:
        if name not in parsed(command):
            continue
        with pytest.raises(click.UsageError) as cli_error:
            parsed(command, flag, bad)
        assert cli_error.value.format_message() == f"{flag} {bad}: {api_error.value.need}"
        assert cli_error.value.exit_code == 64


def test_every_number_of_up_and_watch_is_one_declared_setting():
    """Each numeric option of the start commands takes its range from settings.NUMBERS, none of its own."""
    for command in START_COMMANDS:
        for p in cli.commands[command].params:
            if isinstance(p.type, click.types._NumberParamTypeBase | cli_options.Setting) and p.name != "pid":
                assert isinstance(p.type, cli_options.Setting) and p.name in NUMBERS, (command, p.name)


@pytest.mark.parametrize("kw, word", [({"timeout": 1e12}, "timeout"), ({"serving_interval": math.nan},
                                                                         "serving_interval"),
                                      ({"grace": 0}, "grace"), ({"max_tokens": 0}, "max_tokens")])
def test_the_api_refuses_before_anything_starts(kw: dict[str, Any], word: str, tmp_path: Path):
    marker = tmp_path / "started"
    with pytest.raises(SettingError, match=rf"^{word} "):
        api.up(["sh", "-c", f"touch {marker}"], port=9, history=False, **kw)
    assert not marker.exists()


@pytest.mark.parametrize("command, margin", [("up", "nan"), ("bench", "nan"), ("up", "11"), ("bench", "11")])
def test_the_margin_is_refused_alike_by_up_and_bench(command: str, margin: str):
    c = cli.commands[command]
    args = ["--margin", margin, *(["--", "llama-server"] if command == "up" else ["http://127.0.0.1:1"])]
    with pytest.raises(click.UsageError, match=rf"^--margin {margin}: give a number from 0 to 10$"):
        c.make_context(command, args)


def test_history_and_engine_options_are_declared_once():
    """--history means the same database wherever it is given, --engine the same profiles."""
    helps = {}
    for name, command in cli.commands.items():
        for p in command.params:
            if "--history" in p.opts:
                helps[name] = (p.name, p.help)
    assert len(helps) >= 6 and len(set(helps.values())) == 1, helps
    with pytest.raises(click.UsageError, match=r"^--engine nope: give one of .*vllm"):
        cli.commands["preflight"].make_context("preflight", ["--engine", "nope", "--", "x"])


def test_the_unit_options_defaults_are_those_of_unit_options():
    """settings sits below firstlight.units, so the two defaults are written twice: this keeps them one."""
    from firstlight.units.watch import UnitOptions
    u = UnitOptions("x")
    assert (NUMBERS["max_attempts"].default, NUMBERS["restart_wait"].default) == (u.max_attempts, u.restart_wait)


def test_the_api_refusal_that_docs_readiness_quotes_is_the_one_it_raises(tmp_path: Path):
    from tests.support.docs import PAGES
    text = " ".join(PAGES["docs/readiness.md"].split())
    with pytest.raises(SettingError) as e:
        api.up(["sh", "-c", f"touch {tmp_path / 'x'}"], port=9, history=False, timeout=1e12)
    assert f"`timeout=1e12` raises `{e.value}`" in text


# -- what the mutation run of firstlight/settings.py found untested ---------------------------------------------
def test_the_probe_takes_every_endpoint_and_period_from_its_arguments():
    import dataclasses
    odd = dataclasses.replace(VLLM, endpoints=dataclasses.replace(
        VLLM.endpoints, health="/h", models="/m", completions="/x", chat="/c"))
    c = settings.probe("127.0.0.1:8000", odd, poll_min=0.2, poll_max=0.7)
    assert (c.health_path, c.models_path, c.completions_path, c.chat_path) == ("/h", "/m", "/x", "/c")
    assert (c.min_interval, c.max_interval) == (0.2, 0.7)
    d = settings.probe("127.0.0.1:8000", VLLM)  # the defaults are ProbeConfig's own
    assert (d.api, d.max_tokens, d.connect_timeout, d.read_timeout, d.generation_timeout, d.min_interval,
            d.max_interval) == (ProbeConfig.api, 8, 1.0, 5.0, 120.0, 0.1, 1.0)


def test_a_bad_url_and_a_resolver_that_fails_or_never_answers_are_each_worded(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(SettingError) as e:
        settings.probe("http://[::1", VLLM)
    assert e.value.name == "url" and e.value.need and e.value.need != "None"
    asked: list[tuple[str, int, float]] = []

    def never(host: str, port: int, within: float) -> None:
        asked.append((host, port, within))
        raise TimeoutError

    monkeypatch.setattr(settings, "resolve", never)
    with pytest.raises(SettingError) as e:
        settings.probe("http://h.example:8001", VLLM, resolve_within=3.0)
    assert str(e.value) == "url 'http://h.example:8001': cannot resolve host 'h.example' (no answer from the resolver)"
    assert asked == [("h.example", 8001, 3.0)]

    def refused(host: str, port: int, within: float) -> None:
        raise OSError(-2, "Name or service not known")

    monkeypatch.setattr(settings, "resolve", refused)
    with pytest.raises(SettingError) as e:
        settings.probe("http://h.example:8001", VLLM)
    assert str(e.value) == "url 'http://h.example:8001': cannot resolve host 'h.example' (Name or service not known)"


def test_the_url_of_a_command_is_read_for_its_engine_and_a_command_without_one_is_worded():
    assert settings.url_from_command(["vllm", "serve", "m"], VLLM) == "http://127.0.0.1:8000"
    # the engine given decides the default port, not the one the command would be detected as
    assert settings.url_from_command(["./my-wrapper"], get_profile("llamacpp")) == "http://127.0.0.1:8080"
    with pytest.raises(SettingError) as e:
        settings.url_from_command(["./my-wrapper"], get_profile("generic"))
    assert str(e.value) == "url: cannot tell the server's port from its command line; give the URL"
    assert e.value.as_option() == "--url: cannot tell the server's port from its command line; give the URL"


def test_where_words_each_refusal():
    with pytest.raises(SettingError, match=r"^port 2: give url or port, not both$"):
        settings.where("http://h:1", 2)
    with pytest.raises(SettingError, match=r"^port 0: give a port from 1 to 65535$"):
        settings.where(None, 0)
    assert settings.where(None, 1) == "http://127.0.0.1:1" and settings.where(None, 65535).endswith(":65535")


def test_the_config_holds_the_probe_and_judge_given_and_the_defaults_are_the_configs():
    p, j = probe(), settings.judge(10, 5, 7)
    c = settings.config(probe=p, judge=j)
    assert (c.probe, c.judge, c.command, c.watched_command, c.engine) == (p, j, [], [], None)
    assert settings.config(probe=p, judge=j, engine="sglang", command=["vllm", "serve"]).engine == "sglang"
    assert settings.config(probe=p, judge=j, command=["vllm", "serve", "m"]).engine == "vllm"
    assert settings.history() == HistoryConfig() and settings.after_ready() == AfterReadyConfig()
    assert settings.judge() == JudgeConfig()


def test_a_setting_error_names_the_option_and_the_value_as_typed():
    e = SettingError("stall_timeout", 1e12, "give X")
    assert (str(e), e.as_option(), e.as_option("1e12")) == (
        "stall_timeout 1000000000000.0: give X", "--stall-timeout 1000000000000.0: give X",
        "--stall-timeout 1e12: give X")
    assert (e.name, e.value, e.need) == ("stall_timeout", 1e12, "give X")


def test_the_url_of_a_command_reads_the_environment_the_server_inherits(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LLAMA_ARG_PORT", "8133")
    assert settings.url_from_command(["llama-server", "-m", "x.gguf"], get_profile("llamacpp")) == (
        "http://127.0.0.1:8133")


def test_the_probe_url_is_the_one_given_normalised():
    assert settings.probe("127.0.0.1:8001", VLLM).url == "http://127.0.0.1:8001"


def test_a_watched_servers_weights_are_the_ones_given_else_its_command_lines(tmp_path: Path):
    assert settings.watch_model(tmp_path, ["vllm", "serve", "/elsewhere"], None) == tmp_path
    assert settings.watch_model(None, ["vllm", "serve", str(tmp_path)], None) == tmp_path
    assert settings.watch_model(None, [], None) is None


def test_the_redactor_masks_the_key_the_command_line_and_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_TOKEN", "hf_envsecret123456")
    r = settings.redactor(["vllm", "serve", "m", "--api-key", "sk-cmdline-secret-1"], "sk-given-key-abcdef")
    text = r.text("sk-cmdline-secret-1 hf_envsecret123456 sk-given-key-abcdef")
    assert "secret" not in text and "abcdef" not in text, text


def test_the_commands_role_reaches_the_judges_rules():
    """A worker of a multi-node start (the command reader says so) is judged by its port; a server by a generation."""
    from firstlight import settings
    from firstlight.config import ProbeConfig
    probe = ProbeConfig(url="http://127.0.1.2:50111")
    worker = settings.config(probe=probe, judge=settings.judge(), command=["ggml-rpc-server", "-p", "50111"])
    assert (worker.engine, worker.judge.role) == ("llamarpc", "worker")
    node = settings.config(probe=probe, judge=settings.judge(),
                           watched_command=["python", "-m", "sglang.launch_server", "--node-rank", "1"])
    assert node.judge.role == "worker" and node.judge.head == ()  # SGLang's worker node: its port
    headless = settings.config(probe=probe, judge=settings.judge(),
                               command=["vllm", "serve", "/m", "--headless", "--master-addr", "10.0.0.1"])
    assert (headless.judge.role, headless.judge.head) == ("worker", ("10.0.0.1",))  # its connection to its head
    server = settings.config(probe=probe, judge=settings.judge(), command=["llama-server", "-m", "a.gguf"])
    assert server.judge.role == "server" and settings.config(probe=probe, judge=settings.judge()).judge.role == "server"


# -- the plan: a run read once ---------------------------------------------------------------------------------
@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    from firstlight.engines import command as reader

    seen: list[tuple[str, ...]] = []
    real = reader.parse_command

    def counting(argv: Any, profiles: Any, **kw: Any) -> Any:
        seen.append(tuple(argv))
        return real(argv, profiles, **kw)

    monkeypatch.setattr(reader, "parse_command", counting)
    return seen


def test_a_launched_command_is_read_once_in_the_environment_the_server_gets(
        monkeypatch: pytest.MonkeyPatch, parses: list[tuple[str, ...]]):
    monkeypatch.setenv("LLAMA_ARG_PORT", "9123")  # the launched server inherits it; a watched one's is unknown
    argv = ["llama-server", "-m", "/m/x.gguf", "--api-key", "s3cret-in-argv"]
    server = settings.read_server(argv, None, launched=True)
    engine = settings.profile(None, argv, server)
    url = settings.url_from_command(argv, engine, server)
    cfg = settings.config(probe=settings.probe(url, engine), judge=settings.judge(), command=argv, server=server)
    plan = settings.plan(cfg, engine, server, api_key="k3y-given-1234")
    assert (engine.name, url, cfg.engine, plan.server) == ("llamacpp", "http://127.0.0.1:9123", "llamacpp", server)
    assert parses == [tuple(argv)]
    watched = settings.read_server(argv, None, launched=False)
    assert watched.port == 8080  # llama-server's default: this environment is not the watched server's


def test_the_plans_redactor_masks_the_command_the_environment_the_key_and_the_url(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_TOKEN", "hf-env-secret-99")
    argv = ["vllm", "serve", "m", "--api-key", "argv-secret-77"]
    cfg = Config(command=argv, probe=ProbeConfig(url="http://alice:pa55word-9@127.0.0.1:8000"))
    plan = settings.plan(cfg, VLLM, api_key="given-key-1234")
    text = plan.redactor.text("argv-secret-77 hf-env-secret-99 given-key-1234 pa55word-9")
    assert not any(s in text for s in ("argv-secret-77", "hf-env-secret-99", "given-key-1234", "pa55word-9")), text


def test_an_engine_learnt_later_rereads_the_flags_without_parsing_again(parses: list[tuple[str, ...]]):
    argv = ["python", "serve.py", "--model-path", "/m/a", "--tp", "2", "--port", "30000"]  # names no engine
    plan = settings.plan(Config(command=argv), get_profile("generic"))
    assert plan.server is not None and plan.server.engine is None
    sglang = plan.server_as(get_profile("sglang"))
    assert sglang is not None and (sglang.engine, sglang.model, sglang.tp) == ("sglang", "/m/a", 2)
    assert plan.server_as(get_profile("generic")) is plan.server
    assert len(parses) == 1


def test_the_deployment_key_reads_the_plan_and_parses_nothing(parses: list[tuple[str, ...]]):
    from firstlight.runner.after_ready import deployment_key

    argv = ["vllm", "serve", "org/m", "--tensor-parallel-size", "2", "--port", "8001"]
    plan = settings.plan(Config(command=argv, engine="vllm"), VLLM)
    key = deployment_key(plan.config, VLLM, plan.argv, plan.redactor, plan.server_as(VLLM))
    assert len(parses) == 1 and key == deployment_key(Config(), VLLM, argv, plan.redactor)  # the same key
    assert (key.model, key.parallelism) == ("org/m", "tp=2")


def test_outputs_that_cannot_be_written_are_refused_with_the_options_name(tmp_path: Path):
    missing = tmp_path / "gone" / "r.html"
    with pytest.raises(SettingError, match=r"^report .*: cannot write in") as e:
        settings.outputs(report=missing)
    assert e.value.as_option().startswith(f"--report {missing}: cannot write in")
    out = settings.outputs(record=tmp_path / "r.jsonl", trace=str(tmp_path / "t.json"), json=True)
    assert (out.record, out.trace, out.report, out.json) == (tmp_path / "r.jsonl", tmp_path / "t.json", None, True)
