"""Every runtime call is counted in one place: this wrapper around
``Runtime.invoke``, which the daemon puts around the runtime it makes, so the
conversation's calls and the background ones (tasks, scans, curation) are
all seen: calls by outcome, their duration, and tokens by kind and purpose.
It is also where the day's budget holds (``enact.budget``): a call whose
purpose's budget, or the total, is spent is not made (``RuntimeOverBudget``),
unless the request says it spends over budget (the owner's CLI)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from enact.cancellation import Cancelled
from enact.metrics import Children, Metrics
from enact.runtime import (
    Runtime,
    RuntimeFailure,
    RuntimeOverBudget,
    RuntimeRequest,
    RuntimeResult,
    RuntimeWrapper,
    Usage,
    checked_sandbox,
)

if TYPE_CHECKING:
    from enact.budget.gate import BudgetGate

log = logging.getLogger(__name__)

Spent = Callable[[str, Usage], None]
"""Told ``(purpose, usage)`` after each call, for the day's tally."""


class MeteredRuntime(RuntimeWrapper):
    def __init__(self, runtime: Runtime, metrics: Metrics, *, on_spent: Spent | None = None,
                 allow_full_access: bool = False, budget: BudgetGate | None = None) -> None:
        super().__init__(runtime)
        self._metrics = metrics
        self._on_spent = on_spent
        self._allow_full_access = allow_full_access
        self._budget = budget
        self._calls = Children(metrics.runtime_calls)
        self._seconds = Children(metrics.runtime_call_seconds)
        self._tokens = Children(metrics.runtime_tokens)

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        started = time.monotonic()
        try:
            self._check_sandbox(request.sandbox)
            self._check_budget(request)
            result = self.runtime.invoke(request)
        except RuntimeFailure as failure:
            self._count(request.purpose, failure.kind, failure.usage, started)
            raise
        except Cancelled:
            self._count(request.purpose, "cancelled", Usage(), started)
            raise
        except Exception:
            self._count(request.purpose, "failed", Usage(), started)
            raise
        self._count(request.purpose, "ok", result.usage, started)
        return result

    def admit(self, *, purpose: str, sandbox: str, spends_over_budget: bool) -> None:
        """What ``invoke`` checks before a call, for a call made on another
        machine (a task attempt on a Ray node, ``enact.tasks.remote_attempt``);
        raises RuntimeFailure (RuntimeOverBudget)."""
        self._check_sandbox(sandbox)
        if self._budget is not None and not spends_over_budget:
            overrun = self._budget.overrun(purpose)
            if overrun is not None:
                raise RuntimeOverBudget(overrun.said())

    def counted(self, *, purpose: str, outcome: str, usage: Usage, duration_s: float) -> None:
        """Count a call made on another machine as ``invoke`` counts its own."""
        self._count(purpose, outcome, usage, time.monotonic() - max(0.0, duration_s))

    def _check_sandbox(self, sandbox: str) -> None:
        """Every call's sandbox mode is vetted here, whoever makes it: a known
        mode, and full access only when the owner allowed it."""
        if checked_sandbox(sandbox) == "full-access" and not self._allow_full_access:
            raise RuntimeFailure("the full-access sandbox mode needs runtime.allow_full_access = true in the config")

    def _check_budget(self, request: RuntimeRequest) -> None:
        if self._budget is None or request.spends_over_budget:
            return
        overrun = self._budget.overrun(request.purpose)
        if overrun is not None:
            raise RuntimeOverBudget(overrun.said())

    def _count(self, purpose: str, outcome: str, usage: Usage, started: float) -> None:
        adapter = self.name
        self._calls(adapter, outcome, purpose).inc()
        self._seconds(adapter, purpose).observe(time.monotonic() - started)
        spent = {
            "input": usage.input_tokens,
            "cached_input": usage.cached_input_tokens,
            "output": usage.output_tokens,
            "reasoning": usage.reasoning_tokens,
        }
        for kind, count in spent.items():
            if count:
                self._tokens(adapter, kind, purpose).inc(count)
        if self._on_spent is not None and outcome != RuntimeOverBudget.kind:  # not made: nothing to tally
            try:
                self._on_spent(purpose, usage)
            except Exception:  # the tally is bookkeeping: a failure must not fail the call
                log.exception("cannot record the tokens a runtime call spent")
