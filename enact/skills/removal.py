"""When an installed skill becomes a removal candidate, by rule (no model):
it went unused for ``skills.unused_days`` since it was installed or last
used, or each of its last ``skills.failures_to_remove`` uses was followed by
a failure (the next turn of the conversation that read it failed, or the
task that read it did).

The candidate's evidence names the state it was made from (the skill's
revision, the reason and the uses it counted): the curator keeps one
candidate per draft, so the same state offers nothing new, and a changed one
(used again, then unused again) offers a new candidate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from enact.actors._asks import ActorUnavailable, Asker
from enact.evolution.candidates import Draft
from enact.frozen_dataclass import dataclass
from enact.messages.inbox import ReadTurns
from enact.messages.tasks import Found
from enact.messages.tasks import Get as GetTask
from enact.skills.installed import Installed

log = logging.getLogger(__name__)

SOURCE = "skill"
DAY_S = 86_400.0
FAILED_TURNS = frozenset({"failed", "runtime_failed"})
"""The turn outcomes that count as a failure after a skill's use."""
FAILED_TASK = "failed"
MAX_STREAK = 20
"""Uses looked at, newest first, for the failures that followed them."""
TURNS_READ = 50
"""A conversation's newest turns looked at for the one after a use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Removal:
    name: str
    revision: str
    reason: str
    """In a sentence, for the owner."""
    state: str
    """What the rule found, as evidence: the same state makes the same candidate."""


def removals(records: Sequence[Installed], uses: Sequence[Mapping[str, Any]], *, now: float, unused_days: float,
             failures: int, failed: Callable[[Mapping[str, Any]], bool]) -> list[Removal]:
    """The installed skills the rule proposes removing; ``failed(use)`` says
    whether a failure followed that use (asked only of the last uses)."""
    found = []
    for record in records:
        own = sorted((use for use in uses if use["skill"] == record.name and use["at"] >= record.installed_at),
                     key=lambda use: float(use["at"]))
        last = float(own[-1]["at"]) if own else record.installed_at
        if now - last >= unused_days * DAY_S:
            since = "since it was installed" if not own else "since its last use"
            found.append(Removal(name=record.name, revision=record.revision, state=f"unused-since:{last:.0f}",
                                 reason=f"unused for {unused_days:g} days {since}"))
            continue
        streak = _failing_streak(own, failed, at_least=failures)
        if len(streak) >= failures:
            # The streak's first use is the state: more failures in a row add no new candidate.
            found.append(Removal(name=record.name, revision=record.revision,
                                 state=f"failing-since:{float(streak[0]['at']):.0f}",
                                 reason=f"each of its last {failures} uses was followed by a failure"))
    return found


def _failing_streak(uses: list[Mapping[str, Any]], failed: Callable[[Mapping[str, Any]], bool], *,
                    at_least: int) -> list[Mapping[str, Any]]:
    """The newest uses that were each followed by a failure, oldest first (at most ``MAX_STREAK``)."""
    streak: list[Mapping[str, Any]] = []
    for use in reversed(uses[-max(at_least, MAX_STREAK):]):
        if not failed(use):
            break
        streak.insert(0, use)
    return streak


def draft(removal: Removal) -> Draft:
    return Draft(
        source=SOURCE, evidence_ids=(f"skill:{removal.name}:{removal.revision[:19]}:{removal.state}",),
        title=f"Remove the skill {removal.name}: {removal.reason}",
        rationale=f"The skill {removal.name} is {removal.reason}: it costs startup context and may mislead.",
        proposed_change=f"Remove the installed skill {removal.name} (revision {removal.revision[:19]}).",
        expected_benefit="A shorter startup context, without a skill that does not serve the owner.",
        risk="A skill that is needed seldom goes; learn it again to have it back.",
        test_plan=f"After approval, `enact skills list` no longer names {removal.name}.")


def followed_by_failure(ask: Asker, use: Mapping[str, Any]) -> bool:
    """Whether the task that read the skill failed, or the conversation's
    first turn that ended after the use did; unknown counts as no failure."""
    used_by, at = str(use.get("used_by", "")), float(use["at"])
    try:
        if used_by.startswith("task:") and used_by[5:].isdigit():
            found = ask("tasks", GetTask(task_id=int(used_by[5:])))
            return isinstance(found, Found) and found.task.state.value == FAILED_TASK
        if not used_by:
            return False
        turns = ask("inbox", ReadTurns(conversation=used_by, last=TURNS_READ)).turns
    except ActorUnavailable as error:
        log.warning("whether a failure followed a use of %s is not known now: %s", use["skill"], error)
        return False
    after = next((turn for turn in turns if turn.time >= at), None)
    return after is not None and after.outcome in FAILED_TURNS
