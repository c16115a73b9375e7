"""The lineage inbox (actor ``lineage``): the parent agent's changes since
the last assessed revision, each assessed by an isolated read-only model
call (purpose ``lineage``) and offered to the curator as a candidate.

A scan's fetch and model calls run off the actor's thread, within
``lineage.scan_timeout_s`` (the changes it had no time for are the next
scan's); its outcome is committed on it, all or nothing: one failed call or
malformed reply records no entry and leaves the revision where it was. A
change whose adaptation the guard refuses is recorded refused, with the
reason, and not offered; the others are. No new parent commit, no model
call. A rewritten parent history is reported (once to a scheduled run) and
waits for ``lineage.Reset``. Entries are offered to the curator after their
commit; one not yet linked (the curator did not answer) is offered again
on the next scan or start.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred
from enact.cancellation import CancellationToken
from enact.config import RuntimeSettings
from enact.evolution.candidates import LINEAGE, Draft
from enact.evolution.lineage_assessment import Assessed, AssessmentFailed, assess_in_turn, assessment_prompt
from enact.evolution.lineage_git import HistoryRewritten, LineageGitError, ParentChange, fetch, new_changes, resolve
from enact.evolution.lineage_store import DATABASES, LineageTables, entry_id
from enact.evolution.settings import LineageSettings
from enact.frozen_dataclass import dataclass
from enact.messages.common import NotFound, RefusalCode, Refused, is_human
from enact.messages.curator import Offer, Offered
from enact.messages.lineage import (
    ChangeAdopted,
    Ignore,
    LineageEntry,
    LineageList,
    LineageScanned,
    LineageShown,
    LineageState,
    List,
    Reset,
    ResetDone,
    Scan,
    Show,
)
from enact.runtime import Runtime, RuntimeRequest

log = logging.getLogger(__name__)

__all__ = ["DATABASES", "LineageActor"]
_EXCERPT = 1_000
_TITLE = 120


@dataclass(frozen=True, slots=True)
class _Catchup:
    """Told to itself at start: offer pending entries, adopt what was adopted meanwhile."""


def draft_of(entry: LineageEntry) -> Draft:
    a = entry.assessment
    title = "From the parent: " + " ".join(a.summary.split())
    return Draft(source=LINEAGE, evidence_ids=(entry.id,), title=title[:_TITLE], rationale=a.rationale,
                 proposed_change=a.adaptation, expected_benefit=a.behavioural_change, risk=a.risks,
                 test_plan=a.tests)


def reference_of(entry: LineageEntry) -> str:
    commits = " ".join(commit[:12] for commit in (entry.commit, *entry.merged))
    return f"commits {commits}: {entry.assessment.summary}\nDiff excerpt:\n{entry.diff_excerpt}"


class LineageActor(EnactActor):
    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context)
        self.tables = LineageTables(context.own_store())
        self._settings = context.config.typed(LineageSettings)
        self._runtime = runtime
        self._timeout_s = context.config.typed(RuntimeSettings).timeout_s
        self._scanning = False

    def on_start(self) -> None:
        self.actor_ref.tell(_Catchup())

    def handle(self, message: Any) -> Any:
        now = self.context.clock.time()
        match message:
            case Scan():
                return self._scan(message)
            case List():
                return self._list(message)
            case Show():
                found = self.tables.entry(message.entry_id)
                return LineageShown(entry=found) if found else NotFound(kind="lineage entry", id=message.entry_id)
            case Ignore():
                return self._ignore(message, now)
            case Reset():
                return self._reset(message, now)
            case ChangeAdopted():
                for adopted in message.entry_ids:
                    self._adopt(adopted, now)
                return None
            case _Catchup():
                return self._catch_up(now)
        return super().handle(message)

    # -- a scan -------------------------------------------------------------

    def _scan(self, message: Scan) -> LineageScanned | Refused | Deferred:
        if not self.context.fence.is_current():
            return Refused(reason="this daemon was taken over (fenced); it scans nothing", code=RefusalCode.FENCED)
        if not self._settings.parent:
            return LineageScanned(outcome="not-configured", error="no lineage.parent is set")
        if self._scanning:
            return Refused(reason="a lineage scan is running already", code=RefusalCode.BUSY)
        rewritten = self.tables.rewritten()
        if message.scheduled and rewritten:
            return LineageScanned(outcome="rewritten", error="the parent's history was rewritten; waiting for "
                                  "`enact lineage reset REV`", first_report=False)
        self._scanning = True
        reply = Deferred()
        since = self.tables.revision() or self._settings.since

        def done(outcome: LineageScanned | tuple[list[Assessed], int]) -> None:
            self._scanning = False
            try:
                reply.resolve(self._commit(outcome) if isinstance(outcome, tuple) else self._reported(outcome))
            except Exception as error:
                reply.fail(error)

        def failed(error: Exception) -> None:
            self._scanning = False
            reply.fail(error)

        self.off_thread(lambda cancel: self._assess(since, cancel), then=done, failed=failed)
        return reply

    def _assess(self, since: str, cancel: CancellationToken) -> LineageScanned | tuple[list[Assessed], int]:
        """Off the actor's thread: fetch, list and assess; nothing is written here."""
        settings = self._settings
        clock = self.context.clock
        started = clock.monotonic()
        try:
            head = fetch(self.context.home, settings.parent, settings.branch)
            if not since:
                return LineageScanned(outcome="started", revision=head)
            since = resolve(self.context.home, since)
            if since == head:
                return LineageScanned(outcome="nothing-new", revision=head)
            changes, remaining = new_changes(self.context.home, since, head, most=settings.max_commits,
                                             diff_bytes=settings.max_diff_bytes)
        except HistoryRewritten as rewritten:
            return LineageScanned(outcome="rewritten", revision=head, error=str(rewritten))
        except LineageGitError as error:
            return LineageScanned(outcome="failed", error=f"the parent could not be read: {error}")

        def invoke(change: ParentChange, timeout_s: float) -> str:
            return self._runtime.invoke(RuntimeRequest(
                session_key="", prompt=assessment_prompt(change), sandbox="read-only", purpose="lineage",
                timeout_s=timeout_s, cancel=cancel)).text

        try:
            assessed = assess_in_turn(changes, invoke, call_timeout_s=self._timeout_s, monotonic=clock.monotonic,
                                      budget_s=settings.scan_timeout_s - (clock.monotonic() - started))
        except AssessmentFailed as failed:
            return LineageScanned(outcome="failed", error=str(failed))
        if not assessed:
            return LineageScanned(outcome="failed", error=f"no parent change was assessed within "
                                  f"lineage.scan_timeout_s ({settings.scan_timeout_s:g} s)")
        return assessed, remaining + len(changes) - len(assessed)

    def _reported(self, outcome: LineageScanned) -> LineageScanned:
        now = self.context.clock.time()
        if outcome.outcome == "rewritten":
            return dataclasses.replace(outcome, first_report=self.tables.note_rewritten(outcome.revision))
        if outcome.outcome == "started":
            self.tables.move_to(outcome.revision, now)
        if outcome.outcome == "failed":
            log.warning("lineage scan failed: %s", outcome.error)
        return outcome

    def _commit(self, outcome: tuple[list[Assessed], int]) -> LineageScanned:
        assessed, remaining = outcome
        revision = assessed[-1].change.commit
        now = self.context.clock.time()
        sequence = self.tables.next_sequence()
        entries = [LineageEntry(id=entry_id(one.change.commit), commit=one.change.commit, merged=one.change.merged,
                                messages=one.change.messages[:2_000], diff_excerpt=one.change.diff[:_EXCERPT],
                                assessment=one.assessment, sequence=sequence + offset, created_at=now,
                                updated_at=now, state=LineageState.REFUSED if one.refused else LineageState.PENDING,
                                reason=f"not offered: {one.refused}" if one.refused else "")
                   for offset, one in enumerate(assessed)]
        self.tables.move_to(revision, now, entries)
        self._offer_pending(now)
        refused = tuple(entry.id for entry in entries if entry.state is LineageState.REFUSED)
        for entry in entries:
            if entry.state is LineageState.REFUSED:
                log.info("lineage entry %s refused: %s", entry.id, entry.reason)
        return LineageScanned(outcome="assessed", entries=tuple(e.id for e in entries), refused=refused,
                              remaining=remaining, revision=revision)

    # -- the candidates ---------------------------------------------------------

    def _offer_pending(self, now: float) -> None:
        for entry in self.tables.entries(LineageState.PENDING):
            try:
                offered = self.context.ask("curator", Offer(draft=draft_of(entry), reference=reference_of(entry),
                                                            score=entry.assessment.confidence))
            except ActorUnavailable as error:
                log.warning("lineage entries stay pending (offered again later): %s", error)
                return
            if isinstance(offered, Offered):
                self.tables.update(entry.id, now, only_from=frozenset({LineageState.PENDING}),
                                   state=LineageState.LINKED, candidate_id=offered.candidate_id)
            else:  # the curator's own check refused it: offering it again would be refused again
                self.tables.update(entry.id, now, only_from=frozenset({LineageState.PENDING}),
                                   state=LineageState.REFUSED, reason=f"not offered: {offered.reason}")

    def _adopt(self, adopted_id: str, now: float) -> None:
        self.tables.update(adopted_id, now, only_from=frozenset({LineageState.LINKED, LineageState.PENDING}),
                           state=LineageState.ADOPTED)

    def _catch_up(self, now: float) -> None:
        if not self.context.fence.is_current():
            return
        self._offer_pending(now)
        from enact.messages.curator import CandidateList, Candidates

        try:
            adopted = self.context.ask("curator", Candidates(state="adopted", limit=1_000))
        except ActorUnavailable as error:
            log.warning("adopted lineage entries not caught up: %s", error)
            return
        linked = {entry.candidate_id: entry.id for entry in self.tables.entries(LineageState.LINKED)}
        for candidate in adopted.candidates if isinstance(adopted, CandidateList) else ():
            if candidate.id in linked:
                self._adopt(linked[candidate.id], now)

    # -- the owner's decisions ----------------------------------------------------

    def _list(self, message: List) -> LineageList | Refused:
        state = None
        if message.state:
            try:
                state = LineageState(message.state)
            except ValueError:
                return Refused(reason=f"unknown state {message.state!r}; one of {', '.join(LineageState)}",
                               code=RefusalCode.INVALID)
        return LineageList(entries=tuple(self.tables.entries(state)), revision=self.tables.revision())

    def _ignore(self, message: Ignore, now: float) -> LineageShown | NotFound | Refused:
        if not is_human(message.origin):
            return Refused(reason="ignoring a parent's change needs a human", code=RefusalCode.NOT_HUMAN)
        if not message.reason.strip():
            return Refused(reason="ignoring needs a reason", code=RefusalCode.INVALID)
        changed = self.tables.update(message.entry_id, now, only_from=frozenset({LineageState.PENDING,
                                                                                 LineageState.LINKED}),
                                     state=LineageState.IGNORED, reason=message.reason.strip())
        if changed is None:
            return NotFound(kind="lineage entry", id=message.entry_id)
        if changed.state is not LineageState.IGNORED:
            return Refused(reason=f"{changed.id} is {changed.state.value}", code=RefusalCode.WRONG_STATE)
        return LineageShown(entry=changed)

    def _reset(self, message: Reset, now: float) -> ResetDone | Refused:
        if not is_human(message.origin):
            return Refused(reason="resetting the lineage needs a human", code=RefusalCode.NOT_HUMAN)
        try:
            revision = resolve(self.context.home, message.revision.strip())
        except LineageGitError as error:
            return Refused(reason=f"{message.revision!r} is not a revision of the fetched parent: {error}",
                           code=RefusalCode.INVALID)
        self.tables.move_to(revision, now)
        return ResetDone(revision=revision)
