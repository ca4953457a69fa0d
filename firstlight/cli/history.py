"""``firstlight history``: list past runs, compare two, pin a baseline."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from firstlight.cli.options import EXIT_FAILED, EXIT_OK, Command, UsageFailure, history_option
from firstlight.history import DIRECTION, History, HistoryError, Run, default_path
from firstlight.history.k8s import format_budget, probe_budget
from firstlight.history.location import Where, exists, mask
from firstlight.history.policy import forecast_accuracy, slow_nodes, start_groups, version_regressions

EXIT_HELP = """\b
Exit codes:
  0    ok
  1    the history database cannot be used (unwritable, locked, from a newer firstlight),
       or --k8s-probe: the deployment has no good cold start to size a probe from
  64   usage error (bad option, unknown run id or deployment)"""
K8S_WINDOW = 50  # --k8s-probe: the most recent good starts (older ones may be from other hardware)


def _num(v: float | None, fmt: str = ".1f") -> str:
    return "-" if v is None else format(v, fmt)


def format_runs(runs: list[Run]) -> str:
    head = f"{'id':>5}  {'when':16}  {'kind':5}  {'deployment':12}  {'engine':8}  {'model':24}  {'ok':3}  " \
           f"{'start s':>8}  {'out tok/s':>9}  {'weights':16}  {'compile':7}  {'node':16}  pin"
    lines = [head]
    for r in runs:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at))
        lines.append(f"{r.id:>5}  {when:16}  {r.kind:5}  {r.deployment:12}  {(r.engine or '?')[:8]:8}  "
                     f"{(r.model or '?')[-24:]:24}  {'yes' if r.ok else 'no':3}  "
                     f"{_num(r.metrics.get('cold_start_s')):>8}  {_num(r.metrics.get('output_throughput')):>9}  "
                     f"{_weights(r.summary):16}  {_compile(r.summary):7}  {(r.node or '-')[:16]:16}  "
                     f"{'*' if r.pinned else ''}".rstrip())
    return "\n".join(lines)


def _weights(summary: dict[str, Any]) -> str:
    """The anatomy's weights bound and the page-cache share at start: ``disk 0%``, ``page_cache 100%``."""
    a = summary.get("anatomy") or {}
    w = next((p for p in a.get("phases", []) if p.get("name") == "weights_loading"), None)
    resident = (a.get("cache") or {}).get("page_cache_resident")
    if w is None:
        return "-"
    return f"{w.get('bound')} {resident:.0%}" if isinstance(resident, int | float) else str(w.get("bound"))


def _compile(summary: dict[str, Any]) -> str:
    return str(((summary.get("anatomy") or {}).get("cache") or {}).get("compile_cache") or "-")


def _forecast_error(summary: dict[str, Any]) -> float | None:
    """The whole start's forecast error of a run's summary; None when it was not forecast or not graded."""
    said = summary.get("forecast") if isinstance(summary, dict) else None
    graded = said.get("graded") if isinstance(said, dict) else None
    total = graded.get("total") if isinstance(graded, dict) else None
    err = total.get("error") if isinstance(total, dict) else None
    return err if isinstance(err, int | float) and not isinstance(err, bool) else None


def format_groups(groups: list[dict[str, Any]]) -> str:
    """Good starts by deployment, start type and engine version."""
    lines = [f"{'deployment':12}  {'start type':16}  {'version':16}  {'starts':>6}  {'median s':>8}  "
             f"{'min s':>7}  {'max s':>7}"]
    for g in groups:
        lines.append(f"{g['deployment']:12}  {g['start_type'][:16]:16}  {g['version'][:16]:16}  {g['starts']:>6}  "
                     f"{g['median_s']:>8.1f}  {g['min_s']:>7.1f}  {g['max_s']:>7.1f}")
    return "\n".join(lines)


def format_compare(c: dict[str, Any]) -> str:
    a, b = c["a"], c["b"]
    lines = [f"run {a['id']} ({a['kind']}, {a['deployment']}) -> run {b['id']} ({b['kind']}, {b['deployment']})"]
    if not c["same_deployment"]:
        lines.append("note: different deployments (engine, model, command or GPU count differ)")
    lines.append(f"{'metric':24} {'A':>12} {'B':>12} {'B/A':>7}")
    for m, row in c["metrics"].items():
        ratio = row["ratio"]
        tag = ""
        if ratio is not None and row["lower_is_better"] is not None:
            better = ratio < 1 if row["lower_is_better"] else ratio > 1
            tag = "  better" if better and abs(ratio - 1) > 0.005 else ("  worse" if abs(ratio - 1) > 0.005 else "")
        lines.append(f"{m:24} {_num(row['a'], '.4g'):>12} {_num(row['b'], '.4g'):>12} {_num(ratio, '.2f'):>7}{tag}")
    return "\n".join(lines)


@click.command("history", cls=Command, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@history_option()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--deployment", default=None, metavar="HASH", help="Only this deployment (a hash or its prefix).")
@click.option("--compare", type=(int, int), default=None, metavar="RUN_A RUN_B", help="Compare two runs.")
@click.option("--pin", type=int, default=None, metavar="RUN",
              help="Use this run as the baseline of its deployment (instead of the median of recent good runs).")
@click.option("--unpin", is_flag=True, help="Drop the pinned baseline of --deployment.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=20, show_default=True)
@click.option("--k8s-probe", default=None, metavar="DEPLOYMENT",
              help="Print startupProbe periodSeconds/failureThreshold covering this deployment's p95 cold start "
                   "x 1.5, and the Deployment's progressDeadlineSeconds (a hash or its prefix).")
@click.option("--readiness-port", type=click.IntRange(1, 65535), default=8081, show_default=True,
              help="--k8s-probe: the port firstlight's --serve-readiness listens on, for the printed probe.")
def history_command(history_path: Path | None, as_json: bool, deployment: str | None,
                    compare: tuple[int, int] | None, pin: int | None, unpin: bool, limit: int,
                    k8s_probe: str | None, readiness_port: int) -> None:
    """Past starts and benchmarks, per deployment (engine, model, parallelism, quantization, the flags that change
    the start, GPU count; not the port), with good starts grouped by start type and engine version.

    \b
    firstlight history --deployment 3f2a9c
    firstlight history --compare 12 17
    firstlight history --pin 12
    """
    if sum(x is not None and x is not False for x in (compare, pin, unpin or None, k8s_probe)) > 1:
        raise UsageFailure("use one of --compare, --pin, --unpin, --k8s-probe")
    if unpin and not deployment:
        raise UsageFailure("--unpin needs --deployment")
    path = history_path or default_path()
    out: dict[str, Any] = {"event": "history", "path": mask(path)}
    if not exists(path) and k8s_probe is not None:
        raise UsageFailure(f"no history at {mask(path)}: no deployment {k8s_probe}")
    if not exists(path) and compare is None and pin is None:
        out["runs"] = []
        click.echo(json.dumps(out) if as_json else f"no history yet at {mask(path)}")
        sys.exit(EXIT_OK)
    try:
        with History(path, warn=lambda m: click.echo(f"firstlight: warning: {m}", err=True),
                     readonly=pin is None and not unpin) as h:  # a listing never writes, creates or moves
            if compare is not None:
                try:
                    c = h.compare(*compare)
                except KeyError as e:
                    raise UsageFailure(f"no run {e.args[0]} in {mask(path)}") from None
                out["compare"] = c
                click.echo(json.dumps(out, default=str) if as_json else format_compare(c))
            elif pin is not None:
                try:
                    run = h.pin(pin)
                except KeyError:
                    raise UsageFailure(f"no run {pin} in {mask(path)}") from None
                out["pinned"] = run.to_dict()
                click.echo(json.dumps(out, default=str) if as_json
                           else f"pinned run {run.id} as the baseline of deployment {run.deployment}")
            elif k8s_probe is not None:
                out["k8s_probe"] = _k8s_probe(h, k8s_probe, path, readiness_port, as_json)
                if as_json:
                    click.echo(json.dumps(out, default=str))
            elif unpin:
                assert deployment is not None
                found = h.runs(deployment, limit=1)
                if not found:
                    raise UsageFailure(f"no deployment {deployment} in {mask(path)}")
                h.unpin(found[0].deployment)
                out["unpinned"] = deployment
                click.echo(json.dumps(out) if as_json else f"deployment {deployment}: baseline is the median again")
            else:
                runs = h.runs(deployment, limit=limit)
                out["runs"] = [r.to_dict() for r in runs]
                deployments = sorted({r.deployment for r in runs})
                if deployment and len(deployments) == 1:
                    d = deployments[0]
                    out["baselines"] = {m: v for m in DIRECTION if (v := h.baseline(d, m)) is not None}
                    out["expected_start_seconds"] = h.expected_start_seconds(d)
                starts = [(r.deployment, r.start_type, r.engine_version, r.metrics["cold_start_s"])
                          for r in reversed(runs) if r.ok and r.kind in ("up", "watch") and "cold_start_s" in r.metrics]
                out["groups"] = start_groups(starts)
                out["version_regressions"] = version_regressions(out["groups"])
                out["slow_nodes"] = slow_nodes([(r.deployment, r.start_type, r.node, r.metrics["cold_start_s"])
                                                for r in reversed(runs) if r.ok and r.kind in ("up", "watch")
                                                and "cold_start_s" in r.metrics])
                out["forecasts"] = forecast_accuracy([(r.deployment, _forecast_error(r.summary)) for r in runs
                                                      if r.kind in ("up", "watch")])
                if as_json:
                    click.echo(json.dumps(out, default=str))
                else:
                    click.echo(format_runs(runs) if runs else f"no runs in {mask(path)}")
                    if out["groups"]:
                        click.echo(format_groups(out["groups"]))
                    for reg in out["version_regressions"]:
                        click.echo(f"REGRESSION {reg['deployment']}: {reg['message']}")
                    for slow in out["slow_nodes"]:
                        click.echo(f"SLOW NODE {slow['deployment']}: {slow['message']}")
                    for f in out["forecasts"]:
                        click.echo(f"FORECAST {f['deployment']}: {f['message']}")
                    for m, v in (out.get("baselines") or {}).items():
                        click.echo(f"baseline {m}: {v:.4g}")
                    if out.get("expected_start_seconds") is not None:
                        click.echo(f"expected start: {out['expected_start_seconds']:.1f}s (median of ready starts)")
    except HistoryError as e:
        click.echo(f"firstlight history: {e}", err=True)
        sys.exit(EXIT_FAILED)
    sys.exit(EXIT_OK)


def _k8s_probe(h: History, deployment: str, path: Where, readiness_port: int, as_json: bool) -> dict[str, Any]:
    """The probe budget of one deployment from its recent good cold starts; exits 1 when it has none."""
    runs = h.runs(deployment, limit=100_000)
    found = sorted({r.deployment for r in runs})
    if not found:
        raise UsageFailure(f"no deployment {deployment} in {mask(path)}")
    if len(found) > 1:
        raise UsageFailure(f"{deployment!r} names {len(found)} deployments ({', '.join(found[:5])}): give more of "
                           "the hash")
    # a start of 0 s is no start (a damaged row, or a watch that never saw one): it would give failureThreshold 1
    starts = [r.metrics["cold_start_s"] for r in runs if r.kind in ("up", "watch") and r.ok
              and r.metrics.get("cold_start_s", 0.0) > 0.0][:K8S_WINDOW]
    if not starts:
        click.echo(f"firstlight history: deployment {found[0]} has {len(runs)} runs but no good cold start to size "
                   "a startupProbe from (a ready `up`, or `watch` with --pid or --pid-from, records one)", err=True)
        sys.exit(EXIT_FAILED)
    budget = probe_budget(found[0], starts)
    if not as_json:
        click.echo(format_budget(budget, readiness_port))
    return budget.to_dict()
