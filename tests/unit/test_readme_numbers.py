"""Every number the README and the docs pages state about behaviour is the code's number (issue 35, item 2).

Each row quotes the README's own words as a pattern (whitespace-insensitive: the README wraps lines), reads the
stated figure(s) from it, and compares them with every place in the code that holds that number (the constant,
the dataclass default, the CLI option's default, the API's default). A row fails when the README's sentence
changes, when the code's value moves, or when two places in the code disagree. The rules' most important
numbers have behavioural tests beside this table (named in each row's comment).
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpcore
import pytest
import yaml

import firstlight.api as api
from firstlight import anatomy, budgets, interpret, judge, settings, starts, vocab
from firstlight.cli import history as cli_history
from firstlight.cli import options
from firstlight.cli import preflight as cli_preflight
from firstlight.cli.app import cli
from firstlight.config import Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import get_profile, words
from firstlight.history import History, k8s
from firstlight.history import policy as history_policy
from firstlight.logtext import CLASSIFY_CHARS
from firstlight.preflight import DEADLINE_S, PreflightOptions, checkpoint, disk, fit, gpus, pagecache
from firstlight.probes import loop
from firstlight.probes.identify import IDENTIFY_BUDGET_S
from firstlight.redact import Redactor
from firstlight.report import dashboard, html, readiness, record
from firstlight.report import events as event_log
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.report.prometheus import COLD_START_BUCKETS
from firstlight.runner import members, output, policy, pump
from firstlight.samplers import logs, process
from firstlight.serving import SLOW_FACTOR, SLOW_FLOOR_S, ServingConfig
from firstlight.units import systemctl
from firstlight.wire.content import MAX_BODY
from tests.support.docs import TEXT as DOCS_TEXT

REPO = Path(__file__).resolve().parents[2]
README = " ".join(DOCS_TEXT.split())  # the README and the docs pages (tests/support/docs.py)
RULES_TEXT = (REPO / "deploy" / "prometheus" / "firstlight-rules.yml").read_text(encoding="utf-8")
RULES = yaml.safe_load(RULES_TEXT)

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
WORDS = {"one": 1, "once": 1, "two": 2, "three": 3, "twice": 2, "half": 0.5}


def _cli_default(command: str, option: str) -> Any:
    return next(p.default for p in cli.commands[command].params if p.name == option)


def _api_default(fn: Callable[..., Any], name: str) -> Any:
    return inspect.signature(fn).parameters[name].default


def _alert(name: str) -> dict[str, Any]:
    return next(r for g in RULES["groups"] for r in g["rules"] if r.get("alert") == name)


def _record(name: str) -> str:
    return next(r["expr"] for g in RULES["groups"] for r in g["rules"] if r.get("record") == name)


def _num(s: str) -> float:
    s = s.replace(",", "")
    return float(WORDS[s]) if s in WORDS else float(s)


def _everywhere(*values: Any) -> tuple[Any, ...]:
    """The one value every place holds, or all of them when they differ (which fails the row)."""
    return tuple(sorted(set(values))) if len(set(values)) > 1 else (values[0],)


# (id, the README's words with (groups) around each figure, the scale of each figure, the code's values)
ROWS: list[tuple[str, str, tuple[float, ...], Callable[[], tuple[Any, ...]]]] = [
    # -- The readiness ladder -----------------------------------------------------------------------------------
    ("header cap", r"headers are capped at (\d+) KiB", (KiB,),
     lambda: (httpcore._sync.http11.HTTP11Connection.MAX_INCOMPLETE_EVENT_SIZE,)),
    ("body cap", r"and bodies at (\d+) MiB;", (MiB,), lambda: (MAX_BODY,)),
    ("identify budget", r"all at once within a (\d+) s budget", (1,), lambda: (IDENTIFY_BUDGET_S,)),
    ("identify budget, in the table", r"engine identification is bounded \((\d+) s in all\)", (1,),
     lambda: (IDENTIFY_BUDGET_S,)),
    ("bad generations", r"(three) definitive bad answers in a row", (1,),
     lambda: (JudgeConfig().generation_attempts,)),
    ("--poll-min", r"polls every `--poll-min` \(([\d.]+) s\)", (1,),
     lambda: _everywhere(ProbeConfig().min_interval, _cli_default("up", "poll_min"),
                         _cli_default("watch", "poll_min"))),
    ("back-off", r"backs off ×([\d.]+) per quiet round", (1,), lambda: (loop.BACKOFF,)),  # + tests/unit/probes
    ("--poll-max", r"to `--poll-max` \((\d+) s\)", (1,),
     lambda: _everywhere(ProbeConfig().max_interval, _cli_default("up", "poll_max"),
                         _cli_default("watch", "poll_max"))),
    ("generation probe", r"One (\d+)-token answer says the model serves", (1,),
     lambda: _everywhere(ProbeConfig().max_tokens, *(_cli_default(c, "max_tokens") for c in ("up", "watch", "probe")),
                         _api_default(api.up, "max_tokens"), _api_default(api.watch, "max_tokens"))),
    ("watched pid's exec", r"a pid read before its exec waits \((\d+) s at most\)", (1,),
     lambda: (settings.EXEC_SETTLE_S,)),
    # -- Slow or hung? ------------------------------------------------------------------------------------------
    ("reads step", r"≥ (\d+) MiB between samples", (MiB,), lambda: (JudgeConfig().io_step_bytes,)),
    ("CPU weak progress", r"CPU busy \(≥ (\d+) % of a core\)", (0.01,),  # + tests/unit/test_trackers.py
     lambda: _everywhere(JudgeConfig().cpu_busy_cores, ServingConfig().cpu_busy_cores)),
    ("--stall-timeout", r"no progress at all for `--stall-timeout` \((\d+) s\)", (1,),  # + test_trackers
     lambda: _everywhere(JudgeConfig().stall_timeout, ServingConfig().stall_timeout,
                         _cli_default("up", "stall_timeout"), _cli_default("watch", "stall_timeout"),
                         _api_default(api.up, "stall_timeout"), _api_default(api.watch, "stall_timeout"),
                         _cli_default("report", "stall_timeout"))),
    ("--spin-timeout", r"only weak progress for `--spin-timeout` \((\d+) min:", (60,),
     lambda: _everywhere(JudgeConfig().spin_timeout, _cli_default("up", "spin_timeout"),
                         _cli_default("watch", "spin_timeout"), _api_default(api.up, "spin_timeout"),
                         _api_default(api.watch, "spin_timeout"), _cli_default("report", "spin_timeout"))),
    ("death lines", r"or by (\d+) lines read after it, whichever comes first", (1,),
     lambda: (interpret.DEATH_LINES,)),  # + tests/unit/judge/test_edges.py
    ("failure settle", r"Either settles at the latest ([\d.]+) s after the fatal line", (1,),
     lambda: (judge._FAILURE_SETTLE_S,)),
    ("word table", r"printed by at least (\d+) of the corpus's dev logs, the log-odds that a log printing it is "
     r"each engine's rather than another's \(counts smoothed by ([\d.]+)\), each bounded by ±([\d.]+)", (1, 1, 1),
     lambda: (words.MIN_LOGS, words.SMOOTHING, words.CAP)),  # + tests/unit/engines/test_words.py
    ("words name", r"Once at least (\d+) known words are read and one engine \(or `generic`\) leads the next by "
     r"(\d+), the words name it", (1, 1), lambda: (words.MIN_WORDS, words.MARGIN)),
    # -- Preflight ----------------------------------------------------------------------------------------------
    ("SGLang balance", r"least free ≥ ([\d.]+) × most free", (1,), lambda: (gpus.SGLANG_BALANCE,)),
    ("read-rate sample", r"a read-rate sample of at most (\d+) MiB / (\d+) s", (MiB, 1),
     lambda: (pagecache.SAMPLE_BYTES, pagecache.SAMPLE_S)),
    ("safetensors header", r"the safetensors crate's limit \(([\d,]+) bytes\)", (1,),
     lambda: (checkpoint.MAX_SAFETENSORS_HEADER,)),
    ("full parse", r"parsed in full only up to (\d+) MiB", (MiB,), lambda: (checkpoint.MAX_FULL_PARSE,)),
    ("preflight deadline", r"The whole preflight has a deadline \((\d+) s, or `--timeout` if shorter\)", (1,),
     lambda: _everywhere(DEADLINE_S, PreflightOptions().deadline_s,
                         _api_default(api.run_preflight, "deadline_s"),
                         _api_default(cli_preflight.preflight, "deadline_s"))),
    # -- Exit codes ---------------------------------------------------------------------------------------------
    ("exit codes", r"\| (0) \| `ready`.*?\| (1) \| `failed`.*?\| (2) \| `hung`.*?\| (3) \| `timeout`.*?"
     r"\| (4) \| `regression`.*?\| (64) \| usage error.*?\| (70) \| internal error.*?\| (130) \| `interrupted`",
     (1,) * 8, lambda: (vocab.EXIT_CODES["ready"], vocab.EXIT_CODES["failed"], vocab.EXIT_CODES["hung"],
                        vocab.EXIT_CODES["timeout"], vocab.EXIT_REGRESSION, vocab.EXIT_USAGE,
                        vocab.EXIT_INTERNAL, vocab.EXIT_CODES["interrupted"])),
    # -- Anatomy ------------------------------------------------------------------------------------------------
    ("warm page cache", r"at least (\d+) % of the weights resident", (0.01,), lambda: (anatomy.RESIDENT_WARM,)),
    ("loader CPU-bound", r"`loader_cpu` \(reads below (half) the device's measured rate", (1,),
     lambda: (anatomy.DISK_SHARE,)),
    ("log runs", r"no run of log lines each less than (\d+) s after the last", (1,), lambda: (anatomy.IDLE_MIN_S,)),
    ("hot thread", r"runnable in at least (\d+) % of the samples", (0.01,), lambda: (anatomy.HOT_THREAD,)),
    ("reads phase", r"`reads` \(at least (\d+) KiB/s\)", (KiB,), lambda: (anatomy.IDLE_READ_BPS,)),
    ("idle stretch", r"`idle`: at least (\d+) s in which no measured signal moved", (1,),
     lambda: (anatomy.IDLE_MIN_S,)),
    ("idle CPU", r"under ([\d.]+) cores; no run of log lines", (1,), lambda: (anatomy.IDLE_CPU,)),
    ("per-thread CPU", r"processes that used at least ([\d.]+) cores since the last sample", (1,),
     lambda: (process.HOT_PROCESS,)),
    ("disk measurement", r"at most (\d+) GiB and (\d+) s of files not in the page cache", (GiB, 1),
     lambda: (disk.MAX_BYTES, disk.MAX_S)),
    # -- After READY --------------------------------------------------------------------------------------------
    ("regression margin", r"by more than `--margin` \((\d+) %\)", (0.01,),
     lambda: _everywhere(HistoryConfig().margin, _cli_default("up", "margin"), _cli_default("watch", "margin"),
                         _cli_default("bench", "margin"))),
    ("--serving-interval", r"\(default (\d+) s; `0` turns the checks off\)", (1,),
     lambda: _everywhere(Config().serving_interval, ServingConfig().interval,
                         _cli_default("up", "serving_interval"), _cli_default("watch", "serving_interval"),
                         _api_default(api.up, "serving_interval"))),
    ("slow check", r"slower than (\d+) × the first generation's latency \(at least (\d+) s\)", (1, 1),
     lambda: (SLOW_FACTOR, SLOW_FLOOR_S)),  # + tests/unit/serving/test_serving.py
    ("supervising step", r"plus the supervising loop's step \(([\d.]+) s\)", (1,), lambda: (policy.Supervise.poll_s,)),
    # -- Report, dashboard ---------------------------------------------------------------------------------------
    ("stored timeline", r"downsampled to at most (\d+) MB", (MiB,), lambda: (record.TIMELINE_CAP_BYTES,)),
    ("dashboard refresh", r"at most (twice) a second, and only when something it shows changed", (1,),
     lambda: (dashboard.REFRESH_PER_SECOND,)),
    # -- systemd ------------------------------------------------------------------------------------------------
    ("restart wait", r"the watch goes on while systemd restarts the unit \(`--restart-wait`, (\d+) s\)", (1,),
     lambda: _everywhere(_cli_default("watch", "restart_wait"), _cli_default("up", "restart_wait"))),
    ("systemd's start timeout", r"systemd's default is (\d+) s; run the engine under firstlight", (1,),
     lambda: (systemctl.DEFAULT_TIMEOUT_START_S,)),
    # -- Kubernetes ---------------------------------------------------------------------------------------------
    ("readiness server", r"at most (\d+) requests are handled at once, each connection has a (\d+) s timeout",
     (1, 1), lambda: (readiness.MAX_CONCURRENT, readiness.REQUEST_TIMEOUT_S)),
    ("readiness connections", r"trickles its request at the (\d+) s request deadline and hold at most (\d+) "
     r"connections", (1, 1), lambda: (readiness.REQUEST_TIMEOUT_S, readiness.MAX_CONNECTIONS)),
    ("event stream status", r"`status` at most (once) a second", (1,),
     lambda: _everywhere(readiness.STATUS_EVENT_S, JsonLinesReporter().status_interval)),
    ("event stream kept", r"the last (\d+) are kept", (1,), lambda: (event_log.CAPACITY,)),
    ("event stream clients", r"At most (\d+) streams at once \(more get a 503\); the (\d+) s deadline", (1, 1),
     lambda: (event_log.MAX_CLIENTS, readiness.REQUEST_TIMEOUT_S)),
    ("event stream writes", r"dropped when a write blocks (\d+) s, a comment line every (\d+) s", (1, 1),
     lambda: (readiness.REQUEST_TIMEOUT_S, event_log.KEEPALIVE_S)),
    ("event stream drain", r"each stream gets up to (\d+) s to send its last", (1,), lambda: (event_log.DRAIN_S,)),
    # -- History (docs/history.md) -------------------------------------------------------------------------------
    ("restored start", r"READY within (\d+) s with no load, compile or graph phase seen at all and at most (\d+) log "
     r"lines", (1, 1), lambda: (starts.RESTORED_MAX_S, starts.RESTORED_MAX_LINES)),
    ("warm page cache", r"at least / under (\d+) % of the weights in the page cache at start", (0.01,),
     lambda: (anatomy.RESIDENT_WARM,)),
    # + tests/unit/test_budgets.py, tests/unit/judge/test_budgets.py
    ("budget window", r"From the last (\d+) good starts of the same deployment and the same start", (1,),
     lambda: (budgets.WINDOW,)),
    ("budget starts", r"A phase seen in fewer than (\d+) such starts has no learned budget", (1,),
     lambda: (budgets.MIN_STARTS,)),
    ("budget rule", r"`max\((\d+) × p95, p95 \+ (\d+) s\)`", (1, 1),
     lambda: (budgets.BUDGET_FACTOR, budgets.BUDGET_FLOOR_S)),
    ("silence allowance", r"`max\((\d+) × usual longest silence, usual \+ (\d+) s\)`", (1, 1),
     lambda: (budgets.SILENCE_FACTOR, budgets.SILENCE_FLOOR_S)),
    ("ETA window", r"median time to READY of the last (\d+) good starts of the same deployment", (1,),
     lambda: (history_policy.ETA_WINDOW,)),
    ("baseline window", r"else the median of the last (\d+) good runs \*\*of the same start type\*\*", (1,),
     lambda: (inspect.signature(History.baseline).parameters["window"].default,)),
    ("version regression", r"a type's median start more than (\d+) % slower", (0.01,),
     lambda: (history_policy.VERSION_MARGIN,)),
    ("slow node", r"more than (\d+) % slower than the median of the other nodes' starts of that deployment and type "
                  r"\(at least (\d+) starts on each side", (0.01, 1),
     lambda: (history_policy.SLOW_NODE_MARGIN, history_policy.SLOW_NODE_STARTS)),
    # -- The forecast and the memory fit (tests/unit/preflight/test_fit.py, tests/unit/history/test_policy.py) ----
    ("llama.cpp cells", r"`LLAMA_ARG_CTX_SIZE` rounded up to (\d+) cells", (1,), lambda: (fit.LLAMACPP_PAD,)),
    ("vLLM memory share", r"\(vLLM `--gpu-memory-utilization`, ([\d.]+) by default;", (1,),
     lambda: (get_profile("vllm").flags.memory_share_default,)),
    ("forecast within", r"\(bias \+3%\), 92% within (\d+)%`", (0.01,), lambda: (history_policy.FORECAST_GOOD,)),
    ("copytruncate tail", r"the file still holds its last (\d+) bytes read where it read them", (1,),
     lambda: (logs.TAIL_BYTES,)),
    ("startup budget", r"good cold starts \(the last (\d+);.*?times a \*\*safety factor of ([\d.]+)\*\*", (1, 1),
     lambda: (cli_history.K8S_WINDOW, k8s.SAFETY_FACTOR)),
    ("progress deadline", r"its (\d+) s default trips on a ten-minute start\): the budget plus (\d+) s for "
     r"scheduling, image pull and volume attach, in whole minutes, never below (\d+)\.", (1, 1, 1),
     lambda: (k8s.DEFAULT_PROGRESS_DEADLINE_S, k8s.PULL_MARGIN_S, k8s.DEFAULT_PROGRESS_DEADLINE_S)),
    ("systemd units", r"The units in `deploy/systemd/` use `WatchdogSec=(\d+)` with `--serving-interval (\d+) "
     r"--generation-timeout (\d+)`", (1, 1, 1),
     lambda: (*_unit_values(r"(?m)^WatchdogSec=(\d+)$"), *_unit_values(r"--serving-interval (\d+) "),
              *_unit_values(r"--generation-timeout (\d+) "))),
    ("engine liveness and readiness", r"livenessProbe: \{httpGet: \{path: /livez, port: 8081\}, periodSeconds: (\d+), "
     r"failureThreshold: (\d+)\} readinessProbe: \{httpGet: \{path: /readyz, port: 8081\}, periodSeconds: (\d+), "
     r"failureThreshold: (\d+)\}", (1, 1, 1, 1),
     lambda: (*_engine_probe("livenessProbe"), *_engine_probe("readinessProbe"))),
    ("restart after hung", r"503 once firstlight judges it hung or failed, and (\d+) × (\d+) s later the kubelet",
     (1, 1),
     lambda: tuple(reversed(_engine_probe("livenessProbe")))),
    # -- Prometheus and the alert rules --------------------------------------------------------------------------
    ("histogram buckets", r"with buckets from (\d+) s to an hour, at most ([\d.]+)x apart above (\d+) s", (1, 1, 1),
     lambda: (COLD_START_BUCKETS[0], *_bucket_spacing())),
    ("start-failed window", r"`FirstlightStartFailed` \| a start failed.*?\((\d+) m at most\)", (1,),
     lambda: (_window(_alert("FirstlightStartFailed")["expr"]),)),
    ("restart loop", r"`FirstlightRestartLoop` \| (\d+) starts \(any verdict but `interrupted`\) within (\d+) "
     r"minutes", (1, 1),
     lambda: (_threshold(_alert("FirstlightRestartLoop")["expr"]), _window(_alert("FirstlightRestartLoop")["expr"]))),
    ("slow-start factor", r"`firstlight:slow_start:factor` \(([\d.]+)\)", (1,),
     lambda: (_vector(_record("firstlight:slow_start:factor")),)),
    ("not serving after READY", r"`FirstlightNotServingAfterReady` \| READY was reached and `firstlight_serving` "
     r"is 0 \| (\d+) m \|", (60,), lambda: (_for_s(_alert("FirstlightNotServingAfterReady")),)),
    ("member unreachable", r"`FirstlightGroupMemberUnreachable` \| the leader cannot read a member's firstlight.*?"
     r"within (\d+) s already\) \| (\d+) s \|", (1, 1),
     lambda: (members.AFTER_READY_BOUND_S, _for_s(_alert("FirstlightGroupMemberUnreachable")))),
    ("member restarting", r"`FirstlightGroupMemberRestarting` \| the leader saw a member restart (\d+) times within "
     r"(\d+) minutes", (1, 1),
     lambda: (int(re.search(r">= (\d+)\s", _alert("FirstlightGroupMemberRestarting")["expr"]).group(1)),  # type: ignore[union-attr]
              _window(_alert("FirstlightGroupMemberRestarting")["expr"]))),
    ("degraded", r"`FirstlightServingDegraded` \| `firstlight_serving` was 0\.5 \(warning\) for (\d+) of the last "
     r"(\d+) minutes", (60, 60), lambda: _degraded_window(_alert("FirstlightServingDegraded")["expr"])),
    ("spec-decoding drop factor", r"`firstlight:spec_acceptance_drop:factor` \(([\d.]+)", (1,),
     lambda: (_vector(_record("firstlight:spec_acceptance_drop:factor")),)),
    ("rule factors", r"The two factors are recording rules \(`vector\(([\d.]+)\)`, `vector\(([\d.]+)\)`\)", (1, 1),
     lambda: (_vector(_record("firstlight:slow_start:factor")),
              _vector(_record("firstlight:spec_acceptance_drop:factor")))),
    # -- Reliability --------------------------------------------------------------------------------------------
    ("known secrets", r"masked wherever it appears once it has (\d+) characters or more", (1,),
     lambda: _shortest_secret()),  # + tests/unit/redact/test_redact.py (longest first, 4 to 7 characters)
    ("assessment period", r"the judge assessed within (\d+) ms of an observation, every (\d+) ms while none arrives",
     (0.001, 0.001), lambda: (pump.ASSESS_EVERY_S, pump.IDLE_ASSESS_S)),
    ("classified prefix", r"looks at the first (\d+) KiB of a line", (KiB,), lambda: (CLASSIFY_CHARS,)),
    ("log buffer", r"only moves bytes into a bounded buffer \((\d+) MiB\)", (MiB,),
     lambda: (logs.MAX_PENDING_BYTES,)),
    ("pipe buffer", r"The pipe buffer is widened to (\d+) MiB", (MiB,), lambda: (logs.PIPE_BYTES,)),
    ("stderr buffer", r"stderr is written through a bounded buffer \((\d+) MiB\).*?at exit a stalled reader is "
     r"waited for (\d+) s at most", (MiB, 1), lambda: (output.LIMIT_BYTES, output.EXIT_WAIT_S)),
    ("report bounds", r"clipped to ([\d,]+) characters; a stored timeline is inflated to (\d+) MiB at most.*?"
     r"past (\d+) MiB, log lines are only tailed \(the last ([\d,]+)\)", (1, MiB, MiB, 1),
     lambda: (html.LINE_CHARS, record.INFLATED_CAP_BYTES, record.KEPT_CAP_BYTES, record.KEPT_TAIL_LINES)),
]


def _unit_values(pattern: str) -> tuple[int, ...]:
    """The one value every shipped systemd unit running firstlight gives (all of them when they differ)."""
    units = sorted((REPO / "deploy" / "systemd").glob("*-firstlight.service"))
    assert units
    return _everywhere(*(int(re.search(pattern, u.read_text()).group(1)) for u in units))  # type: ignore[union-attr]


def _engine_probe(kind: str) -> tuple[int, int]:
    """(periodSeconds, failureThreshold) of the engine container's probe in every sidecar manifest."""
    found = set()
    for manifest in sorted((REPO / "deploy" / "k8s").glob("*-sidecar.yaml")):
        for doc in yaml.safe_load_all(manifest.read_text()):
            for c in ((doc or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])):
                if c["name"] != "firstlight" and kind in c:
                    found.add((c[kind]["periodSeconds"], c[kind]["failureThreshold"]))
    assert len(found) == 1, found
    return found.pop()


def _shortest_secret() -> tuple[int, ...]:
    """The fewest characters a value the redactor is told (at its start, or later) needs to be masked, found by
    trying; both ways when they differ (which fails the row)."""
    def added(secret: str) -> Redactor:
        r = Redactor()
        r.add(secret)
        return r

    return _everywhere(*(next(n for n in range(1, 64) if make("q" * n).text(f"x {'q' * n} y") == "x *** y")
                         for make in (lambda v: Redactor([v]), added)))


def _bucket_spacing() -> tuple[float, int]:
    """(the widest ratio of two neighbouring buckets above the last wider gap, that gap's upper bucket)."""
    pairs = list(itertools.pairwise(COLD_START_BUCKETS))
    widest = max(b / a for a, b in pairs)
    above = max((b for a, b in pairs if b / a > 1.5), default=COLD_START_BUCKETS[0])
    return max(b / a for a, b in pairs if a >= above) if widest > 1.5 else widest, above


def _window(expr: str) -> int:
    (m,) = re.findall(r"\[(\d+)m\]", expr)
    return int(m)


def _threshold(expr: str) -> int:
    return int(re.search(r">= (\d+)\)", expr).group(1))  # type: ignore[union-attr]


def _degraded_window(expr: str) -> tuple[int, int]:
    """(seconds of degraded evaluations that fire it, the window in seconds) of the counted-over-a-window rule."""
    m = re.search(r"\[(\d+)m:(\d+)s\]\)\s*>= (\d+)\)", expr)
    assert m is not None, expr
    window, step, count = (int(g) for g in m.groups())
    return count * step, window * 60


def _vector(expr: str) -> float:
    return float(re.fullmatch(r"vector\(([\d.]+)\)", expr.strip()).group(1))  # type: ignore[union-attr]


def _for_s(rule: dict[str, Any]) -> int:
    m = re.fullmatch(r"(\d+)([sm])", rule["for"])
    assert m is not None, rule["for"]
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


def _disagreement(readme: str, what: str, pattern: str, scale: tuple[float, ...],
                  code: Callable[[], tuple[Any, ...]]) -> str | None:
    """Why the README and the code disagree on this row; None when they agree."""
    m = re.search(pattern, readme)
    if m is None:
        return f"{what}: the README no longer says {pattern!r}"
    try:
        stated = tuple(_num(f) * s for f, s in zip(m.groups(), scale, strict=True))
    except KeyError as e:
        return f"{what}: {e} is no number"
    values = code()
    if len(values) != len(stated):
        return f"{what}: the code places disagree: {values}"
    if not all(v == pytest.approx(s, rel=1e-9, abs=1e-12) for v, s in zip(values, stated, strict=True)):
        return f"{what}: the README says {stated}, the code {values}"
    return None


@pytest.mark.parametrize("what, pattern, scale, code", ROWS, ids=[r[0] for r in ROWS])
def test_the_readme_states_the_codes_number(what: str, pattern: str, scale: tuple[float, ...],
                                             code: Callable[[], tuple[Any, ...]]):
    why = _disagreement(README, what, pattern, scale, code)
    assert why is None, why


@pytest.mark.parametrize("what, pattern, scale, code", ROWS, ids=[r[0] for r in ROWS])
def test_each_row_fails_when_the_readme_states_another_number(what: str, pattern: str, scale: tuple[float, ...],
                                                               code: Callable[[], tuple[Any, ...]]):
    """The row reads its figures from the README, not from itself: each figure changed fails it."""
    m = re.search(pattern, README)
    assert m is not None
    for g in range(1, len(m.groups()) + 1):
        figure = m.group(g)
        other = "four" if figure in WORDS else figure + "1"
        changed = README[:m.start(g)] + other + README[m.end(g):]
        assert _disagreement(changed, what, pattern, scale, code) is not None, (what, figure, other)


@pytest.mark.parametrize("given, ok", [("86400", True), ("86400.5", False), ("0", False), ("-1", False),
                                       ("1e12", False), ("nan", False), ("0.001", True)])
def test_a_timeout_is_finite_above_0_and_at_most_a_day(given: str, ok: bool):
    """README: "Timeouts must be finite, above 0 and at most a day"."""
    if ok:
        assert options.TIMEOUT.convert(given, None, None) == float(given)
    else:
        with pytest.raises(options.UsageFailure, match="above 0 and at most 86400"):
            options.TIMEOUT.convert(given, None, None)


def test_the_cli_builds_the_judge_and_serving_settings_from_its_defaults():
    """The CLI's parsed defaults become the run's settings (not only the option's declared default)."""
    params = cli.commands["up"].make_context("up", ["--", "llama-server"]).params
    judge = options.judge_config(params)
    assert (judge.timeout, judge.stall_timeout, judge.spin_timeout) == (3600.0, 120.0, 900.0)
    assert params["serving_interval"] == 10.0 and params["grace"] == 10.0
    assert (params["poll_min"], params["poll_max"]) == (0.1, 1.0)


def test_the_histogram_buckets_end_at_an_hour():
    assert COLD_START_BUCKETS[-1] == 3600 and list(COLD_START_BUCKETS) == sorted(set(COLD_START_BUCKETS))
