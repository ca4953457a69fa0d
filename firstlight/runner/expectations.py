"""What this deployment's history says to expect of one start: the whole-start ETA, the phase budgets, the
forecast said before the watch, and the known answer to check the first generation against. Looked up when the
run begins and again when the start's type or the engine becomes known (the deployment key names the engine;
budgets are per start type), by the session and its feed alike: one holder of what was learned."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from firstlight import forecast, settings
from firstlight.answers import answer_dict, known_from, request_fingerprint
from firstlight.budgets import Budgets, budgets_note, learn
from firstlight.config import Config
from firstlight.engines.profile import EngineProfile
from firstlight.forecast import Forecast
from firstlight.history.store import DeploymentKey, History, HistoryError, StartEstimate
from firstlight.result import RunResult
from firstlight.runner.after_ready import deployment_key, open_history
from firstlight.starts import predicted_type
from firstlight.timeline import Observation

if TYPE_CHECKING:
    from firstlight.preflight import PreflightReport
    from firstlight.timeline import WeightsTotal
    from firstlight.trackers import AnswerTracker


class Expectations:
    def __init__(self, cfg: Config, plan: settings.Plan, say: Callable[[str], None],
                 preflight: PreflightReport | None = None) -> None:
        self.cfg, self.plan, self._say, self.preflight = cfg, plan, say, preflight
        self.history: History | None = None
        self.expected_total_s = cfg.judge.expected_total_s  # the whole-start estimate: told, or from the history
        self.eta: StartEstimate | None = None  # ... and what it is from
        self.budgets: Budgets | None = None  # the phase budgets learned from the history (firstlight.budgets)
        self.forecast: Forecast | None = None  # said before the watch begins, graded with the result
        self.weights: WeightsTotal | None = None  # the weights as the judge's assessments carry them, once measured
        self._eta_said: str | None = None
        self._budgets_said: str | None = None

    def open(self, profile: EngineProfile) -> None:
        """The history opened, and what it says before the watch begins: the ETA, the budgets, the forecast."""
        self.history = open_history(self.cfg, self.plan.redactor, self._say)
        self.look(profile)
        self._make_forecast(profile)

    def key(self, profile: EngineProfile) -> DeploymentKey:
        """This deployment, from the plan's one reading of the command (by the engine known now)."""
        return deployment_key(self.cfg, profile, self.plan.argv, self.plan.redactor, self.plan.server_as(profile))

    def predicted_type(self, profile: EngineProfile) -> str | None:
        """This start's type as far as it is known now (``firstlight.starts.predicted_type``)."""
        return predicted_type(self.weights, self.plan.argv, profile.flags.attach)

    def look(self, profile: EngineProfile) -> None:
        """The whole-start ETA (the median time to READY of this deployment's previous good starts) and the phase
        budgets learned from them, both of the start's type as far as it is known; each said when it changes."""
        if self.history is None:
            return
        key = self.key(profile)
        with contextlib.suppress(HistoryError):
            if self.cfg.judge.expected_total_s is None:
                self.eta = self.history.expected_start(key, self.predicted_type(profile))
                self.expected_total_s = self.eta.seconds if self.eta else None
                if self.eta is not None and self.eta.note != self._eta_said:
                    self._eta_said = self.eta.note
                    self._say(f"history: {self.eta.note}: {self.eta.seconds:.1f}s")
            kind = self.predicted_type(profile)
            if kind is None:  # budgets are per start type: a cold start is never held to a warm one's
                return
            self.budgets = learn(self.history.start_anatomies(key), kind)
            said = budgets_note(self.budgets)
            if said != self._budgets_said:
                self._budgets_said = said
                self._say(f"history: {said}")

    def _make_forecast(self, profile: EngineProfile) -> None:
        """The forecast (``firstlight.forecast``): from this deployment's history of starts of the type its command
        or the preflight's page-cache reading predicts, else from the weights' bytes, with the memory fit."""
        pre = self.preflight
        facts = pre.facts if pre is not None else {}
        fit = next((c for c in pre.checks if c.name == "fit"), None) if pre is not None else None
        local = self.plan.server.model_local if self.plan.server is not None else None
        said = predicted_type(None, self.plan.argv, profile.flags.attach)  # what the command alone says
        self.forecast = forecast.from_store(self.history, self.key(profile), facts,
                                            fit.status if fit is not None else None, local, said)

    def graded_forecast(self, result: RunResult) -> dict[str, Any] | None:
        """The forecast said at the start, with what happened beside it; None when none was said."""
        if self.forecast is None:
            return None
        return forecast.grade(self.forecast.to_dict(), result.anatomy, result.cold_start_s)

    def known_answer(self, profile: EngineProfile, answers: AnswerTracker, t: float) -> Observation | None:
        """``--known-answer check``: this deployment's known answer to this request, for the judge (which compares
        the first answer with it before READY); None when there is none to give or the judge holds one already."""
        if (self.history is None or not self.cfg.history.answers or self.cfg.history.known_answer != "check"
                or answers.known is not None):
            return None
        with contextlib.suppress(HistoryError):
            found = self.history.known_answer(self.key(profile), request_fingerprint(self.cfg.probe))
            return known_from(found[0], found[1], found[2], t) if found is not None else None
        return None

    def known_answer_entry(self, answers: AnswerTracker | None) -> dict[str, Any] | None:
        """The summary's ``known_answer``: this start's first answer, recorded as the reference (the first verified
        start of this request, or ``--known-answer record``) or checked against it."""
        if not self.cfg.history.answers or answers is None or answers.first is None:
            return None
        mode = self.cfg.history.known_answer
        first = answer_dict(answers.first, request_fingerprint(self.cfg.probe))
        entry: dict[str, Any] = {"mode": mode, "answer": first}
        known, check = answers.known, answers.check
        if mode == "record":
            return {**entry, "outcome": "re-recorded"}
        if known is None or check is None:
            return {**entry, "outcome": "recorded"}
        return {**entry, "outcome": "same" if check.same else "different", "reference_run": known.run,
                "why": check.why}
