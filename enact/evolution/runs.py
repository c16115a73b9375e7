"""The scheduled evolve run, as the Scheduler actor carries it out on a tick.

The clock (``enact.evolution.schedule``) lives in ``scheduler.evolve`` under
one key. When a due time has come and the daemon is current, it is claimed
(committed), then the run asks: the curator for the mode (the stored one, or
``evolve.mode``); nothing more when it is ``disabled``. Otherwise
``scanner.Scan(scheduled=True)`` (which scans only a source with a full batch
of new records, so an idle home calls no model); with auto-evolve
``curator.Brainstorm``; then ``curator.Propose`` when a scan found signals,
or active candidates exist and no proposal is open or one was created after
it. What happened is told to the owner once per run (``inbox.Notify``,
notice id from the due time), and the due time is acknowledged. The
curator is told the clock (a tell: it never asks back) so that
``curator.GetMode`` can say when the next run is due.

The asks wait for model calls, so a tick that runs the evolve schedule holds
the Scheduler as long as they take; cron due times that pass meanwhile are
handled on the next tick (they coalesce as always).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TypeVar

import lmdb

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.claimed_clock import Decision, nest_flat_claim
from enact.evolution import schedule as rules
from enact.evolution.modes import EvolveMode
from enact.evolution.schedule import EvolveClock
from enact.evolve_schedule import EvolveSchedule, parse_schedule
from enact.messages._registry import Request
from enact.messages.common import Refused
from enact.messages.curator import (
    MAX_LIST,
    Brainstorm,
    Brainstormed,
    CandidateList,
    Candidates,
    EvolveClockChanged,
    EvolveHistory,
    EvolveRunFailed,
    GetMode,
    History,
    ProposalState,
    Propose,
    Proposed,
)
from enact.messages.inbox import Notify
from enact.messages.memory import GetIdentity
from enact.messages.scanner import Scan, ScanReport
from enact.storage import RecordTable, Store

log = logging.getLogger(__name__)

DATABASE = "scheduler.evolve"
_CLOCK = b"clock"
ORIGIN = "scheduler"
R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportTarget:
    channel: str
    conversation: str


def report_target(report_to: str, allowed_conversations: list[str]) -> ReportTarget | None:
    """``evolve.report_to``, else the first ``channel:id`` the conversation
    lock names, else None (the report is only logged)."""
    for key in (report_to, *allowed_conversations):
        channel, sep, conversation = key.partition(":")
        if sep and channel and conversation:
            return ReportTarget(channel=channel, conversation=conversation)
    return None


class EvolveRuns:
    """The Scheduler's part of evolution: call ``tick`` from each clock tick."""

    def __init__(self, context: ActorContext, store: Store) -> None:
        self._context = context
        self._store = store
        self._clock = RecordTable(store.table(DATABASE), EvolveClock, upgrade=nest_flat_claim)
        config = context.config
        self._schedule: EvolveSchedule = parse_schedule(config["evolve.schedule"])
        self._theme = str(config["evolve.theme"]).strip()
        self._target = report_target(config["evolve.report_to"], list(config["chat.allowed_conversations"]))
        # A scan or a proposal may make two model calls in a row.
        self._model_timeout_s = 2 * float(config["runtime.timeout_s"]) + float(config["control.request_timeout_s"])
        self._told: EvolveClock | None = None

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        clock = self._current_clock(now)
        if self._context.fence.is_current():  # a fenced daemon runs nothing
            step = rules.decide(clock, self._schedule, now)
            if step.due is not None and step.decision is Decision.GIVE_UP:
                clock = self._give_up(clock, step.due, step.reason)
            elif step.due is not None and step.decision in (Decision.CLAIM, Decision.RERUN):
                clock = self._run(clock, step.due, now, resumed=step.decision is Decision.RERUN)
        self._tell_curator(clock, now)

    # -- the clock --------------------------------------------------------

    def _current_clock(self, now: float) -> EvolveClock:
        def write(txn: lmdb.Transaction) -> EvolveClock:
            stored = self._clock.get(txn, _CLOCK)
            clock = rules.follow(stored, self._schedule, now)
            if clock != stored:  # the anchor is kept durably: a restart must not move it
                self._clock.put(txn, _CLOCK, clock)
            return clock

        stored = self._store.read(lambda txn: self._clock.get(txn, _CLOCK))
        if stored is not None and rules.follow(stored, self._schedule, now) is stored:
            return stored
        return self._store.write(write)

    def _save(self, clock: EvolveClock) -> EvolveClock:
        self._store.write(lambda txn: self._clock.put(txn, _CLOCK, clock))
        return clock

    def _tell_curator(self, clock: EvolveClock, now: float) -> None:
        if clock == self._told:
            return
        self._context.tell("curator", EvolveClockChanged(
            schedule=self._schedule.spec, next_due_at=rules.upcoming(clock, self._schedule, now),
            last_run_at=clock.last_run_at, last_outcome=clock.last_outcome))
        self._told = clock

    # -- one run ----------------------------------------------------------

    def _give_up(self, clock: EvolveClock, due: float, reason: str) -> EvolveClock:
        log.warning("evolve run %s: %s", rules.run_id(due), reason)
        # Acknowledged first: a stop between the two then loses the audit
        # line at worst, never tells it for a claim that is given up again.
        given_up = self._save(rules.acknowledge(clock, due, time.time(), f"failed: {reason}", self._schedule))
        self._context.tell("curator", EvolveRunFailed(run_id=rules.run_id(due), due=due, reason=reason))
        return given_up

    def _run(self, clock: EvolveClock, due: float, now: float, *, resumed: bool) -> EvolveClock:
        claimed = self._save(rules.claim(clock, due))  # committed before anything is done (fenced like every write)
        if resumed:
            log.info("evolve run %s: resuming a run that did not finish (attempt %d)", rules.run_id(due),
                     claimed.claim.attempts)
        try:
            mode = self._context.ask("curator", GetMode()).mode
            lines = self._act(mode) if mode.scans else []
            outcome = "\n".join(lines) if lines else f"{mode}: nothing new, no model called"
            if lines:
                self._report(due, mode, lines)
            log.info("evolve run %s (%s): %s", rules.run_id(due), mode, outcome.replace("\n", "; "))
        except ActorUnavailable as error:
            # Left claimed: run again after the back-off, and given up after the attempts.
            log.warning("evolve run %s did not finish (%s); trying again later", rules.run_id(due), error)
            return self._save(rules.run_failed(claimed, now, str(error)))
        except Exception as error:  # any other fault ends this run, never the Scheduler (and cron with it)
            outcome = f"failed: {type(error).__name__}: {error}"
            log.exception("evolve run %s %s", rules.run_id(due), outcome)
        return self._save(rules.acknowledge(claimed, due, time.time(), outcome, self._schedule))

    def _ask_long(self, actor: str, message: Request[R]) -> R:
        return self._context.ask(actor, message, timeout=self._model_timeout_s)

    def _act(self, mode: EvolveMode) -> list[str]:
        """Scan, brainstorm (auto-evolve), propose; what was done, a line each."""
        lines: list[str] = []
        report = self._ask_long("scanner", Scan(scheduled=True))
        found_signals = False
        if isinstance(report, ScanReport):
            for scan in report.scans:
                if scan.outcome in ("completed", "failed"):
                    detail = f"{len(scan.signals)} signals" if scan.outcome == "completed" else scan.error
                    lines.append(f"{scan.source} scan {scan.outcome} over {scan.records} records: {detail}")
                found_signals = found_signals or (scan.outcome == "completed" and bool(scan.signals))
        elif isinstance(report, Refused):
            lines.append(f"scan refused: {report.reason}")
        if mode.brainstorms:
            lines.extend(self._brainstorm())
        if self._proposal_needed(found_signals):
            lines.extend(self._propose())
        return lines

    def _proposal_needed(self, found_signals: bool) -> bool:
        listed = self._context.ask("curator", Candidates(state="active", limit=MAX_LIST))
        created = [c.created_at for c in listed.candidates] if isinstance(listed, CandidateList) else []
        history = self._context.ask("curator", History(limit=1))
        open_now = [p for p in history.proposals[:1] if p.state is ProposalState.OPEN] \
            if isinstance(history, EvolveHistory) else []
        return rules.proposal_needed(found_signals=found_signals, active_created_at=created,
                                     open_proposal_at=open_now[0].created_at if open_now else None)

    def _theme_or_mission(self) -> str:
        if self._theme:
            return self._theme
        identity = self._context.ask("memory", GetIdentity())
        if identity.private is not None and identity.private.mission.strip():
            return identity.private.mission.strip()
        return identity.body.lineage

    def _brainstorm(self) -> list[str]:
        reply = self._ask_long("curator", Brainstorm(theme=self._theme_or_mission(), origin=ORIGIN))
        if isinstance(reply, Refused):
            return [f"brainstorm refused: {reply.reason}"]
        if not isinstance(reply, Brainstormed) or reply.skipped:
            return []
        titles = "; ".join(f"{cid}" for cid in reply.candidates) or "none new"
        return [f"brainstorm: {len(reply.candidates)} candidates ({titles}){': ' + reply.note if reply.note else ''}"]

    def _propose(self) -> list[str]:
        reply = self._ask_long("curator", Propose(origin=ORIGIN))
        if isinstance(reply, Refused):
            return [f"proposal refused: {reply.reason}"]
        if not isinstance(reply, Proposed):
            return []
        proposal = reply.proposal
        if proposal.candidate_id is None:
            return [f"proposal {proposal.id}: no candidate recommended ({proposal.reason})"]
        fallback = " (fallback: curation failed)" if proposal.fallback else ""
        return [f"proposal {proposal.id} recommends {proposal.candidate_id}{fallback}: {proposal.reason}",
                f"approve with `enact evolve approve {proposal.candidate_id}` (nothing is approved for you)"]

    def _report(self, due: float, mode: EvolveMode, lines: list[str]) -> None:
        text = f"Evolve run ({mode}):\n" + "\n".join(f"- {line}" for line in lines)
        if self._target is None:
            log.info("evolve report not sent (no evolve.report_to and no conversation lock): %s",
                     text.replace("\n", " "))
            return
        self._context.tell("inbox", Notify(
            channel=self._target.channel, conversation=self._target.conversation, notice_id=rules.run_id(due),
            text=text, session_note=text, origin=ORIGIN))
