"""The scheduled evolve run, as the evolve actor carries it out on a tick.

The clock (``enact.evolution.schedule``) lives in ``scheduler.evolve`` (its
name predates this actor) under one key. When a due time has come and the
daemon is current, it is claimed (committed), then the run asks: the curator
for the mode (the stored one, or ``evolve.mode``); nothing more when it is
``disabled``. Otherwise ``scanner.Scan(scheduled=True)`` (which scans only a
source with a full batch of new records, so an idle home calls no model),
then ``lineage.Scan(scheduled=True)`` (no new parent commit, no model call;
a rewritten parent history is reported once; waited for as long as
``lineage.scan_timeout_s`` allows, and one that does not answer is reported
and the run goes on);
with auto-evolve ``curator.Brainstorm``; then ``curator.Propose`` when a scan
found signals, or active candidates exist and no proposal is open or one was
created after it. What happened is told to the owner once per run
(``inbox.Notify``, notice id from the due time), and the due time is
acknowledged. The clock is stored here only: ``evolve.GetClock`` reads it
(``shown``) for whoever shows when the next run is due.

A run is a chain of messages, not blocking asks: each ask waits off the
actor's thread (``OffThread``) and its reply is the next step, on it, so
the actor never waits for a model. One run at a time; a run cut short by a
stop or a crash stays claimed and is run again (``Decision.RERUN``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TypeVar

import lmdb

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.actors._long_work import OffThread
from enact.budget.gate import BudgetGate
from enact.chat.settings import ChatSettings
from enact.claimed_clock import Decision, nest_flat_claim
from enact.config import DaemonSettings, RuntimeSettings
from enact.evolution import schedule as rules
from enact.evolution.modes import EvolveMode
from enact.evolution.schedule import EvolveClock
from enact.evolution.settings import EvolutionSettings, LineageSettings
from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request
from enact.messages.common import Refused
from enact.messages.curator import (
    MAX_LIST,
    Brainstorm,
    Brainstormed,
    CandidateList,
    Candidates,
    EvolveHistory,
    EvolveRunFailed,
    EvolveRunSkipped,
    GetMode,
    History,
    ModeShown,
    ProposalState,
    Propose,
    Proposed,
)
from enact.messages.evolve import ClockShown
from enact.messages.inbox import Notify
from enact.messages.lineage import LineageScanned
from enact.messages.lineage import Scan as LineageScan
from enact.messages.memory import GetIdentity, Identity
from enact.messages.scanner import Scan, ScanReport
from enact.schedules import ParsedSchedule, parse
from enact.spoken import Audience, command
from enact.storage import RecordTable, Store
from enact.wording import counted

log = logging.getLogger(__name__)

DATABASE = "scheduler.evolve"
_CLOCK = b"clock"
ORIGIN = "scheduler"
"""The origin of what a run asks (kept from when the Scheduler carried it)."""
R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportTarget:
    channel: str
    conversation: str


def report_target(report_to: str, allowed_conversations: Sequence[str]) -> ReportTarget | None:
    """``evolve.report_to``, else the first ``channel:id`` the conversation
    lock names, else None (the report is only logged)."""
    for key in (report_to, *allowed_conversations):
        channel, sep, conversation = key.partition(":")
        if sep and channel and conversation:
            return ReportTarget(channel=channel, conversation=conversation)
    return None


@dataclass(slots=True, kw_only=True)
class _Run:
    """A run under way: its claim, and what it did so far."""

    claimed: EvolveClock
    due: float
    now: float
    mode: EvolveMode = EvolveMode.DISABLED
    lines: list[str] = field(default_factory=list)
    found_signals: bool = False
    active_created_at: list[float] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """The steps not run because their purpose's budget was spent, each with why."""


def lineage_line(report: LineageScanned | Refused) -> str:
    """What the run reports of its lineage scan: a rewritten parent once, "" when nothing happened."""
    if isinstance(report, Refused):
        return f"lineage scan refused: {report.reason}"
    if report.outcome == "assessed":
        more = f" ({report.remaining} more next run)" if report.remaining else ""
        refused = f", {len(report.refused)} refused ({', '.join(report.refused)})" if report.refused else ""
        return f"lineage: {counted(len(report.entries), 'parent change')} assessed{refused}{more}"
    if report.outcome == "failed" or (report.outcome == "rewritten" and report.first_report):
        return f"lineage scan {report.outcome}: {report.error}"
    return ""


class EvolveRuns:
    """The evolve actor's rules: call ``tick`` from each clock tick; each
    ask of a run is made through ``off_thread`` and the run goes on from its reply."""

    def __init__(self, context: ActorContext, store: Store, *, off_thread: OffThread,
                 budget: BudgetGate | None = None) -> None:
        self._context = context
        self._budget = budget
        self._store = store
        self._off_thread = off_thread
        self._clock = RecordTable(store.table(DATABASE), EvolveClock, upgrade=nest_flat_claim)
        config = context.config
        evolution = config.typed(EvolutionSettings)
        self._schedule: ParsedSchedule = parse(evolution.schedule)
        self._theme = evolution.theme.strip()
        self._target = report_target(evolution.report_to, config.typed(ChatSettings).allowed_conversations)
        # A scan or a proposal may make two model calls in a row.
        self._model_timeout_s = (2 * config.typed(RuntimeSettings).timeout_s
                                 + config.typed(DaemonSettings).request_timeout_s)
        # A lineage scan makes a call per parent change, within its own budget (as `enact lineage scan` waits).
        self._lineage_timeout_s = (config.typed(LineageSettings).scan_timeout_s
                                   + config.typed(DaemonSettings).request_timeout_s)
        self._run: _Run | None = None

    @property
    def running(self) -> bool:
        return self._run is not None

    def tick(self, now: float | None = None) -> None:
        now = self._context.clock.time() if now is None else now
        clock = self._current_clock(now)
        if self._run is None and self._context.fence.is_current():  # a fenced daemon runs nothing
            step = rules.decide(clock, self._schedule, now)
            if step.due is not None and step.decision is Decision.GIVE_UP:
                self._give_up(clock, step.due, step.reason)
            elif step.due is not None and step.decision in (Decision.CLAIM, Decision.RERUN):
                self._start(clock, step.due, now, resumed=step.decision is Decision.RERUN)

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

    def shown(self, now: float) -> ClockShown:
        """The clock as stored, read only (the next tick stores a moved anchor)."""
        stored = self._store.read(lambda txn: self._clock.get(txn, _CLOCK))
        if stored is None:  # not ticked yet (a fenced daemon never ticks)
            return ClockShown(schedule=self._schedule.spec, next_due_at=None, last_run_at=None)
        clock = rules.follow(stored, self._schedule, now)
        return ClockShown(schedule=self._schedule.spec, next_due_at=rules.upcoming(clock, self._schedule, now),
                          last_run_at=clock.last_run_at, last_outcome=clock.last_outcome)

    # -- one run, a step per reply -------------------------------------------

    def _give_up(self, clock: EvolveClock, due: float, reason: str) -> None:
        log.warning("evolve run %s: %s", rules.run_id(due), reason)
        # Acknowledged first: a stop between the two then loses the audit
        # line at worst, never tells it for a claim that is given up again.
        self._save(rules.acknowledge(clock, due, self._context.clock.time(), f"failed: {reason}", self._schedule))
        self._context.tell("curator", EvolveRunFailed(run_id=rules.run_id(due), due=due, reason=reason))

    def _start(self, clock: EvolveClock, due: float, now: float, *, resumed: bool) -> None:
        claimed = self._save(rules.claim(clock, due))  # committed before anything is done (fenced like every write)
        if resumed:
            log.info("evolve run %s: resuming a run that did not finish (attempt %d)", rules.run_id(due),
                     claimed.claim.attempts)
        run = self._run = _Run(claimed=claimed, due=due, now=now)
        self._ask(run, "curator", GetMode(), self._mode_known)

    def _ask(self, run: _Run, actor: str, message: Request[R], then: Callable[[_Run, R], None], *,
             model: bool = False, timeout_s: float | None = None,
             failed: Callable[[_Run, Exception], None] | None = None) -> None:
        """Ask ``actor`` off the thread; ``then(run, reply)`` on it. ``model``:
        the reply waits for model calls, and may take as long as they do
        (``timeout_s``: as long as that; else two calls). ``failed(run, error)``:
        the run goes on past a failed ask (else the ask's failure ends it)."""
        timeout = timeout_s if timeout_s is not None else self._model_timeout_s if model else None

        def step(reply: R) -> None:
            try:
                then(run, reply)
            except Exception as error:  # any fault ends this run, never the actor
                self._failed(run, error)

        def ask_failed(error: Exception) -> None:
            if failed is None:
                self._failed(run, error)
                return
            try:
                failed(run, error)
            except Exception as fault:
                self._failed(run, fault)

        self._off_thread(lambda _: self._context.ask(actor, message, timeout=timeout), then=step,
                         failed=ask_failed)

    def _over_budget(self, run: _Run, step: str, purpose: str) -> bool:
        """Whether ``step`` is skipped because the day's budget of ``purpose``
        is spent (noted in the run's record; the budget actor tells the owner)."""
        overrun = self._budget.overrun(purpose) if self._budget is not None else None
        if overrun is not None:
            run.skipped.append(f"{step} skipped for budget: {overrun.said()}")
        return overrun is not None

    def _mode_known(self, run: _Run, shown: ModeShown) -> None:
        run.mode = shown.mode
        if not run.mode.scans:
            self._finish(run)
        elif self._over_budget(run, "scan", "scan"):
            self._lineage_scan(run)
        else:
            self._ask(run, "scanner", Scan(scheduled=True), self._scanned, model=True)

    def _scanned(self, run: _Run, report: ScanReport | Refused) -> None:
        if isinstance(report, ScanReport):
            for scan in report.scans:
                if scan.outcome in ("completed", "failed"):
                    detail = f"{len(scan.signals)} signals" if scan.outcome == "completed" else scan.error
                    run.lines.append(f"{scan.source} scan {scan.outcome} over {scan.records} records: {detail}")
                run.found_signals = run.found_signals or (scan.outcome == "completed" and bool(scan.signals))
        else:
            run.lines.append(f"scan refused: {report.reason}")
        self._lineage_scan(run)

    def _lineage_scan(self, run: _Run) -> None:
        if self._over_budget(run, "lineage scan", "lineage"):
            self._after_lineage(run)
        else:
            self._ask(run, "lineage", LineageScan(scheduled=True), self._lineage_scanned,
                      timeout_s=self._lineage_timeout_s, failed=self._lineage_failed)

    def _lineage_failed(self, run: _Run, error: Exception) -> None:
        """A lineage scan that did not answer in its time (or at all) is
        reported; the run goes on: the lineage step is one of several."""
        log.warning("evolve run %s: the lineage scan did not answer: %s", rules.run_id(run.due), error)
        run.lines.append(f"lineage scan did not answer: {error}")
        self._after_lineage(run)

    def _lineage_scanned(self, run: _Run, report: LineageScanned | Refused) -> None:
        line = lineage_line(report)
        if line:
            run.lines.append(line)
        self._after_lineage(run)

    def _after_lineage(self, run: _Run) -> None:
        if not run.mode.brainstorms or self._over_budget(run, "brainstorm", "brainstorm"):
            self._check_proposal(run)
        elif self._theme:
            self._brainstorm(run, self._theme)
        else:
            self._ask(run, "memory", GetIdentity(), self._identity_known)

    def _identity_known(self, run: _Run, identity: Identity) -> None:
        mission = identity.private.mission.strip() if identity.private is not None else ""
        self._brainstorm(run, mission or identity.body.lineage)

    def _brainstorm(self, run: _Run, theme: str) -> None:
        self._ask(run, "curator", Brainstorm(theme=theme, origin=ORIGIN), self._brainstormed, model=True)

    def _brainstormed(self, run: _Run, reply: Brainstormed | Refused) -> None:
        if isinstance(reply, Refused):
            run.lines.append(f"brainstorm refused: {reply.reason}")
        elif not reply.skipped:
            titles = "; ".join(f"{cid}" for cid in reply.candidates) or "none new"
            run.lines.append(f"brainstorm: {counted(len(reply.candidates), 'candidate')} ({titles})"
                             f"{': ' + reply.note if reply.note else ''}")
        self._check_proposal(run)

    def _check_proposal(self, run: _Run) -> None:
        self._ask(run, "curator", Candidates(state="active", limit=MAX_LIST), self._candidates_known)

    def _candidates_known(self, run: _Run, listed: CandidateList | Refused) -> None:
        run.active_created_at = [c.created_at for c in listed.candidates] if isinstance(listed, CandidateList) \
            else []
        self._ask(run, "curator", History(limit=1), self._history_known)

    def _history_known(self, run: _Run, history: EvolveHistory | Refused) -> None:
        open_now = [p for p in history.proposals[:1] if p.state is ProposalState.OPEN] \
            if isinstance(history, EvolveHistory) else []
        if rules.proposal_needed(found_signals=run.found_signals, active_created_at=run.active_created_at,
                                 open_proposal_at=open_now[0].created_at if open_now else None) \
                and not self._over_budget(run, "proposal", "curation"):
            self._ask(run, "curator", Propose(origin=ORIGIN), self._proposed, model=True)
        else:
            self._finish(run)

    def _proposed(self, run: _Run, reply: Proposed | Refused) -> None:
        if isinstance(reply, Refused):
            run.lines.append(f"proposal refused: {reply.reason}")
        else:
            proposal = reply.proposal
            if proposal.candidate_id is None:
                run.lines.append(f"proposal {proposal.id}: no candidate recommended ({proposal.reason})")
            else:
                fallback = " (fallback)" if proposal.fallback else ""
                # The report is a notice on a conversation: it speaks chat.
                approve = command("evolve.approve", "evolve approve", proposal.candidate_id).to(Audience.CHAT)
                run.lines += [f"proposal {proposal.id} recommends {proposal.candidate_id}{fallback}: "
                              f"{proposal.reason}",
                              f"approve with `{approve}` (nothing is approved for you)"]
        self._finish(run)

    def _finish(self, run: _Run) -> None:
        lines = run.lines
        outcome = "\n".join([*lines, *run.skipped]) if lines or run.skipped \
            else f"{run.mode}: nothing new, no model called"
        if lines:  # not for a skip alone: the budget actor tells the owner of a spent budget once a day
            self._report(run.due, run.mode, lines)
        if run.skipped:
            self._context.tell("curator", EvolveRunSkipped(run_id=rules.run_id(run.due), due=run.due,
                                                           reason="; ".join(run.skipped)))
        log.info("evolve run %s (%s): %s", rules.run_id(run.due), run.mode, outcome.replace("\n", "; "))
        self._end(run, rules.acknowledge(run.claimed, run.due, self._context.clock.time(), outcome, self._schedule))

    def _failed(self, run: _Run, error: Exception) -> None:
        if isinstance(error, ActorUnavailable):
            # Left claimed: run again after the back-off, and given up after the attempts.
            log.warning("evolve run %s did not finish (%s); trying again later", rules.run_id(run.due), error)
            self._end(run, rules.run_failed(run.claimed, run.now, str(error)))
            return
        outcome = f"failed: {type(error).__name__}: {error}"
        log.error("evolve run %s %s", rules.run_id(run.due), outcome, exc_info=error)
        self._end(run, rules.acknowledge(run.claimed, run.due, self._context.clock.time(), outcome, self._schedule))

    def _end(self, run: _Run, clock: EvolveClock) -> None:
        self._run = None
        self._save(clock)

    def _report(self, due: float, mode: EvolveMode, lines: list[str]) -> None:
        text = f"Evolve run ({mode}):\n" + "\n".join(f"- {line}" for line in lines)
        if self._target is None:
            log.info("evolve report not sent (no evolve.report_to and no conversation lock): %s",
                     text.replace("\n", " "))
            return
        self._context.tell("inbox", Notify(
            channel=self._target.channel, conversation=self._target.conversation, notice_id=rules.run_id(due),
            text=text, session_note=text, origin=ORIGIN))
