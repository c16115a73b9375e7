"""The budget's plain rules, time an argument: the budget day starts at
``budget.reset`` local time, a purpose over its own budget or the total may
not spend, each purpose has its key without a change to the budget, and the
scripted runtime reports the tokens its rules say."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from enact import components
from enact.budget.gate import BudgetGate
from enact.budget.ledger import Ledger, period_at
from enact.budget.settings import BudgetSettings
from enact.clock import ManualClock
from enact.config import ConfigError
from enact.runtime import PURPOSES, RuntimeRequest
from enact.runtime.scripted import RulesError, ScriptedRuntime


@pytest.fixture(autouse=True)
def local_time_zone() -> Iterator[None]:
    """A zone that is not UTC, so that "local" is tested as local."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Paris"
    time.tzset()
    yield
    if before is None:
        os.environ.pop("TZ")
    else:
        os.environ["TZ"] = before
    time.tzset()


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()  # naive: local time


def test_the_budget_day_starts_at_the_reset_in_local_time() -> None:
    reset = 4 * 60
    before = period_at(at("2024-03-05 03:59:59"), reset)
    after = period_at(at("2024-03-05 04:00:00"), reset)
    assert (before.day, before.start, before.end) == ("2024-03-04", at("2024-03-04 04:00"), at("2024-03-05 04:00"))
    assert (after.day, after.start, after.end) == ("2024-03-05", at("2024-03-05 04:00"), at("2024-03-06 04:00"))
    assert period_at(at("2024-03-05 23:59"), 0).end == at("2024-03-06 00:00")  # midnight by default


def test_a_day_across_a_clock_change_is_an_hour_shorter_and_still_ends_at_the_reset() -> None:
    day = period_at(at("2024-03-31 12:00"), 0)  # Paris moves to summer time that night
    assert day.end - day.start == 23 * 3600 and day.end == at("2024-04-01 00:00")


def test_a_purpose_over_its_own_budget_or_the_total_may_not_spend_and_others_may() -> None:
    ledger = Ledger(period=period_at(at("2024-03-05 12:00"), 0)).spent("scan", 120).spent("conversation", 30)
    limits = {"scan": 100, "task": 500, "total": 1000}
    over = ledger.overrun(limits, "scan")
    assert over is not None and (over.spent, over.limit, over.used) == ("scan", 100, 120)
    assert "today's scan token budget (100) is spent (120 used); it starts again at 00:00" in over.said()
    assert ledger.overrun(limits, "task") is None and ledger.overrun(limits, "curation") is None
    spent_total = ledger.spent("task", 850)
    total = spent_total.overrun(limits, "curation")
    assert total is not None and (total.spent, total.used) == ("total", 1000)
    assert spent_total.spent_budgets(limits) == ["scan", "task", "total"]
    assert spent_total.noticed_of("scan").spent_budgets(limits) == ["task", "total"]
    lines = {line.purpose: line for line in spent_total.lines(limits)}
    assert (lines["scan"].remaining, lines["conversation"].remaining, lines["total"].remaining) == (0, None, 0)
    assert list(lines)[-1] == "total"


def test_the_gate_reads_a_day_that_ended_as_a_fresh_one_before_the_actor_rolls_it() -> None:
    clock = ManualClock(at("2024-03-05 23:00"))
    gate = BudgetGate(BudgetSettings(limits={"scan": 10}, reset_minute=0, conversation="notice", notify_to=""),
                      clock)
    gate.publish(gate.ledger().spent("scan", 10))
    assert gate.overrun("scan") is not None
    clock.advance(3600)
    assert gate.overrun("scan") is None and gate.lines()[0].used == 0


def test_no_budget_set_means_no_limit_and_no_clock_read() -> None:
    class NoClock(ManualClock):
        def time(self) -> float:
            raise AssertionError("an unlimited gate must not read the clock")

    gate = BudgetGate(BudgetSettings(limits={}, reset_minute=0, conversation="notice", notify_to=""),
                      ManualClock())
    gate.clock = NoClock()
    assert gate.overrun("conversation") is None


def test_every_purpose_has_a_daily_budget_key_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    installed = components.load()
    keys = {setting.key for setting in installed.settings()}
    assert {f"budget.daily_tokens.{purpose}" for purpose in (*PURPOSES, "total")} <= keys
    (tmp_path / "config.toml").write_text('[budget]\nreset = "04:30"\nconversation = "refuse"\n'
                                          "[budget.daily_tokens]\ntotal = 5000\nscan = 100\ntask = 0\n")
    typed = installed.load_config(tmp_path, environ={"ENACT_BUDGET_DAILY_TOKENS_LINEAGE": "7"}).typed(
        BudgetSettings)
    assert (typed.limits, typed.reset_minute, typed.conversation) == (
        {"total": 5000, "scan": 100, "lineage": 7}, 270, "refuse")
    for bad, why in (("[budget.daily_tokens]\nscann = 1\n", "did you mean 'budget.daily_tokens.scan'"),
                     ('[budget]\nreset = "24:00"\n', "a time of day HH:MM"),
                     ("[budget.daily_tokens]\ntask = -1\n", "between 0 and"),
                     ('[budget]\nconversation = "ignore"\n', "one of notice, refuse")):
        (tmp_path / "config.toml").write_text(bad)
        with pytest.raises(ConfigError, match=why):
            installed.load_config(tmp_path, environ={})


def test_a_scripted_rule_reports_the_tokens_it_says_and_a_bad_count_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "scripted.toml"
    rules.write_text("[[rule]]\nmatch = 'hello'\nreply = 'hi'\ninput_tokens = 60\noutput_tokens = 50\n"
                     "[[rule]]\npurpose = 'scan'\nmatch = 'scan'\nreply = '[]'\noutput_tokens = 9\n")
    runtime = ScriptedRuntime(rules)
    chat = runtime.invoke(RuntimeRequest(session_key="s", prompt="p", owner_message="hello"))
    scan = runtime.invoke(RuntimeRequest(session_key="", prompt="scan this", purpose="scan"))
    other = runtime.invoke(RuntimeRequest(session_key="s", prompt="p", owner_message="something else",
                                          native_session=chat.native_session))
    assert (chat.usage.input_tokens, chat.usage.output_tokens, scan.usage.output_tokens) == (60, 50, 9)
    assert other.usage.input_tokens == other.usage.output_tokens == 0
    rules.write_text("[[rule]]\nmatch = 'x'\nreply = 'y'\ninput_tokens = -3\n")
    with pytest.raises(RulesError, match="'input_tokens' must be a whole number of tokens"):
        ScriptedRuntime(rules)
