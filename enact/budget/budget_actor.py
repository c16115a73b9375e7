"""The budget actor: keeps the budget day's ledger in ``budget.ledger``
(key: the day, ``YYYY-MM-DD`` of its start; the value: tokens used by
purpose and the budgets the owner was told are spent), so a restart, even
a kill -9, keeps the day's use. It publishes the ledger to the gate every
caller reads (``enact.budget.gate``), tells the owner once a budget day
when a budget is spent (a notice whose id names the day and the budget, so
the inbox sends it once however often it is told), and at the day's reset
(or at its start, when a reset passed while no daemon ran) queues again the
tasks its budget paused.

The gate holds the day's ledger before any actor starts (``fill_gate``, the
spec's ``prepare``): the inbox, which starts before this actor, resumes an
unfinished chat at its start, and that chat's call must find today's use."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import WriteBatch
from enact.budget.gate import BudgetGate
from enact.budget.ledger import Ledger, Period, notice_text, period_at
from enact.chat.settings import ChatSettings
from enact.messages.budget import Roll, Spend
from enact.messages.common import Done
from enact.messages.inbox import Notify
from enact.messages.tasks import ResumeAfterBudget
from enact.ownership import notice_target
from enact.storage import Store

log = logging.getLogger(__name__)

LEDGER = "budget.ledger"
DATABASES = (LEDGER,)
ORIGIN = "scheduler"
"""The origin of the notices it sends: the daemon's own, unasked."""
LOCAL_OWNER = ("local", "cli")
"""Where a notice goes with neither ``budget.notify_to`` nor a conversation lock: the owner's CLI
conversation (``enact turns`` shows it)."""
ROLL_CHECK_S = 900.0
"""The longest the actor sleeps before it looks whether the day started again: a wall clock that jumps
(a suspended laptop) is noticed within this."""


def load_ledger(store: Store, period: Period) -> Ledger:
    """The ledger kept for ``period``'s day, or an empty one."""
    table = store.table(LEDGER)
    found = store.read(lambda txn: table.get(txn, period.day.encode()))
    if found is None:
        return Ledger(period=period)
    used = {str(purpose): int(tokens) for purpose, tokens in dict(found.get("used", {})).items()}
    return Ledger(period=period, used=used, noticed=frozenset(str(name) for name in found.get("noticed", ())))


def fill_gate(gate: BudgetGate) -> Callable[[Store], None]:
    """The budget actor's ``prepare``: today's ledger, read into the gate
    before any actor starts."""
    return lambda store: gate.publish(load_ledger(store, gate.ledger().period))


class BudgetActor(EnactActor):
    def __init__(self, context: ActorContext, *, gate: BudgetGate) -> None:
        super().__init__(context)
        self._gate = gate
        self._settings = gate.settings
        self._store = context.own_store()
        self._table = self._store.table(LEDGER)
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        named = notice_target(self._settings.notify_to, context.config.typed(ChatSettings).allowed_conversations)
        self._notify_to = named or LOCAL_OWNER
        self._ledger = self._load(self._period(self.context.clock.time()))

    def on_start(self) -> None:
        self._gate.publish(self._ledger)
        self._resume_if_a_reset_passed()
        self._notice_spent()
        self._roll_later()

    def on_stop(self) -> None:
        self.cancel_timers()
        super().on_stop()

    def handle(self, message: Any) -> Any:
        match message:
            case Spend():
                return self._spend(message)
            case Roll():
                self._roll()
                self._roll_later()
                return None
        return super().handle(message)

    # -- the ledger -------------------------------------------------------

    def _period(self, now: float) -> Period:
        return period_at(now, self._settings.reset_minute)

    def _load(self, period: Period) -> Ledger:
        return load_ledger(self._store, period)

    def _save(self, *, told: bool = False) -> None:
        """Stage the ledger; ``told``: for a tally nobody waits for, which may
        ride another actor's commit (``WriteBatch.stage``)."""
        ledger = self._ledger
        document = {"used": dict(ledger.used), "noticed": sorted(ledger.noticed)}

        def write(txn: lmdb.Transaction) -> None:
            self._table.put(txn, ledger.period.day.encode(), document)

        self._batch.stage(write, told=told)

    def _spend(self, message: Spend) -> Done:
        self._roll()
        if message.tokens > 0:
            self._ledger = self._ledger.spent(message.purpose, message.tokens)
            self._save(told=True)
            self._gate.publish(self._ledger)
            self._notice_spent()
        return Done()

    def _roll(self) -> None:
        """Start the new budget day if this one ended: its ledger (kept, if a
        daemon before this one started it), published, and the tasks its
        budget paused queued again."""
        period = self._period(self.context.clock.time())
        if period == self._ledger.period:
            return
        ended = self._ledger.period.day
        self._ledger = self._load(period)
        self._gate.publish(self._ledger)
        self._delete_before(period.day)
        log.info("the budget day %s ended; the budgets start again for %s", ended, period.day)
        self.context.tell("tasks", ResumeAfterBudget())

    def _resume_if_a_reset_passed(self) -> None:
        """A ledger of an earlier day is kept only when no daemon ran at
        that day's reset (the roll deletes it): the tasks it paused are due
        again, as the reset would have queued them."""
        day = self._ledger.period.day
        if not self._store.read(lambda txn: any(key.decode() < day for key, _ in self._table.items(txn))):
            return
        self._delete_before(day)
        log.info("a budget day ended while no daemon ran; the budgets start again for %s", day)
        self.context.tell("tasks", ResumeAfterBudget())

    def _delete_before(self, day: str) -> None:
        """Keep today's ledger only (and a later one, after the clock went back)."""
        def write(txn: lmdb.Transaction) -> None:
            for key in [key for key, _ in self._table.items(txn) if key.decode() < day]:
                self._table.delete(txn, key)

        self._batch.stage(write)

    def _roll_later(self) -> None:
        if self._settings.limited:
            delay = self._ledger.period.end - self.context.clock.time()
            self.tell_later(min(max(delay, 0.0), ROLL_CHECK_S), Roll())

    # -- telling the owner --------------------------------------------------

    def _notice_spent(self) -> None:
        limits = self._settings.limits
        spent = self._ledger.spent_budgets(limits)
        if not spent:
            return
        for name in spent:
            ledger = self._ledger
            text = notice_text(name, limits[name], ledger.use_of(name), ledger.period.end)
            channel, conversation = self._notify_to
            log.warning("budget: %s", text)
            self.context.tell("inbox", Notify(channel=channel, conversation=conversation,
                                              notice_id=f"budget:{ledger.period.day}:{name}", text=text,
                                              session_note="", origin=ORIGIN))
            self._ledger = ledger.noticed_of(name)
        self._save()
        self._gate.publish(self._ledger)
