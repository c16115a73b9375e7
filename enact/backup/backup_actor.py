"""The backup actor: backups the running daemon takes (``backup.Create``)
and the backup schedule (``backup.schedule``).

A backup runs off the actor's thread (``off_thread``): LMDB copies from one
read transaction, so chat's writers go on meanwhile; one at a time. The
schedule follows the claimed clock (``enact.claimed_clock``), its state in
``backup.clock``: a due time is claimed (committed) before the backup
starts and acknowledged after. A scheduled backup is named by its due time,
so a claim run again after a crash (kill -9) finds the backup it made, if
it got that far, instead of taking a second.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from enact import claimed_clock
from enact.actors._base import ActorContext
from enact.actors._batching import Deferred
from enact.actors._ticking import TickingActor
from enact.backup.metrics import BackupMetrics
from enact.backup.settings import BackupSettings
from enact.backup.snapshot import Backup, create
from enact.cancellation import CancellationToken
from enact.claimed_clock import NO_CLAIM, ClaimState, Decision
from enact.frozen_dataclass import dataclass
from enact.messages.backup import Create, Created
from enact.messages.common import RefusalCode, Refused
from enact.schedules import latest_due, parse
from enact.storage import RecordTable
from enact.tasks.settings import TasksSettings

log = logging.getLogger(__name__)

DATABASE = "backup.clock"
DATABASES = (DATABASE,)
_CLOCK = b"clock"
BUSY = "a backup is being taken; ask again when it is done"


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupClock:
    spec: str
    anchor: float
    """When the spec was first seen: intervals count from here."""
    acknowledged: float | None = None
    claim: ClaimState = NO_CLAIM


@dataclass(frozen=True, slots=True)
class Tick:
    """Told to itself every ``scheduler.tick_s``: is a backup due?"""


class BackupActor(TickingActor):
    fenced_note = "it takes no scheduled backup"

    def __init__(self, context: ActorContext) -> None:
        # The schedulers' tick (cron's, the evolve schedule's): a due time is at most this late.
        super().__init__(context, every_s=context.config.typed(TasksSettings).scheduler_tick_s, tick=Tick())
        self._settings = context.config.typed(BackupSettings)
        self._clock = RecordTable(context.own_store().table(DATABASE), BackupClock)
        self._running = False

    def handle(self, message: Any) -> Any:
        match message:
            case Tick():
                return self.ticked()
            case Create():
                return self._create(message)
        return super().handle(message)

    # -- asked -------------------------------------------------------------

    def _create(self, message: Create) -> Deferred | Refused:
        if self._running:
            return Refused(reason=BUSY, code=RefusalCode.BUSY)
        reply = Deferred()
        to = Path(message.to) if message.to else None

        def done(backup: Backup) -> None:
            reply.resolve(Created(path=str(backup.path), manifest_json=orjson.dumps(backup.manifest.to_json())
                                  .decode()))

        def failed(error: Exception) -> None:
            log.error("backup failed: %s", error)
            reply.resolve(Refused(reason=f"the backup failed: {error}", code=RefusalCode.WRONG_STATE))

        self._start("cli", lambda _: create(self.context.home, self.context.own_store(), reason="cli",
                                            include_secrets=message.include_secrets, settings=self.context.config,
                                            to=to), done, failed)
        return reply

    def _start(self, reason: str, work: Any, then: Any, failed: Any) -> None:
        metrics = self.context.metrics.of(BackupMetrics)
        started = time.monotonic()
        self._running = True

        def measured(token: CancellationToken) -> Backup:
            backup: Backup = work(token)
            metrics.seconds.observe(time.monotonic() - started)
            return backup

        def ok(backup: Backup) -> None:
            self._running = False
            metrics.backups.labels(reason=reason, outcome="created").inc()
            metrics.last_success.set(time.time())
            then(backup)

        def bad(error: Exception) -> None:
            self._running = False
            metrics.backups.labels(reason=reason, outcome="failed").inc()
            failed(error)

        self.off_thread(measured, then=ok, failed=bad, name=f"backup-{reason}")

    # -- the schedule -------------------------------------------------------

    def tick(self) -> None:
        if not self._settings.scheduled or self._running:
            return
        schedule = parse(self._settings.schedule)
        now = self.context.clock.time()
        store = self.context.own_store()
        clock = store.read(lambda txn: self._clock.get(txn, _CLOCK))
        if clock is None or clock.spec != schedule.spec:
            clock = BackupClock(spec=schedule.spec, anchor=now)
            self._save(clock)

        def due_since(since: float, moment: float, anchor: float = clock.anchor) -> float | None:
            return latest_due(schedule, moment, since=since, anchor=anchor)

        since = clock.acknowledged if clock.acknowledged is not None else clock.anchor
        step = claimed_clock.decide(since, clock.claim, now, due_since)
        if step.due is None or step.decision in (Decision.NOTHING_DUE, Decision.WAIT):
            return
        due = step.due
        if step.decision is Decision.GIVE_UP:
            log.warning("the scheduled backup due at %s was %s", due, step.reason)
            self._save(replace(clock, acknowledged=due, claim=NO_CLAIM))
            return
        claimed = replace(clock, claim=claimed_clock.claim(clock.claim, due))
        self._save(claimed)  # committed before the backup starts

        def done(backup: Backup) -> None:
            log.info("scheduled backup %s taken", backup.path)
            self._save(replace(claimed, acknowledged=due, claim=NO_CLAIM))

        def failed(error: Exception) -> None:
            log.error("the scheduled backup failed: %s", error)
            self._save(replace(claimed, claim=claimed_clock.failed(claimed.claim, self.context.clock.time(),
                                                                   str(error))))

        self._start("schedule", lambda _: create(self.context.home, self.context.own_store(), reason="schedule",
                                                 settings=self.context.config, due=due), done, failed)

    def _save(self, clock: BackupClock) -> None:
        self.context.own_store().write(lambda txn: self._clock.put(txn, _CLOCK, clock))
