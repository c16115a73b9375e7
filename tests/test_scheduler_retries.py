"""Claims whose action keeps failing, in the Scheduler's and the evolve
actor's parts in-process on a real home: a cron submission the queue does not answer and an evolve run
whose actors do not answer are tried again after the claimed clock's
back-off, then given up as failed with the reason where each shows its
outcomes, and the next due time runs."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from schedule_clock import FaultyActors, UnavailableActors, home

from enact.actors._asks import AskTimeout
from enact.actors._long_work import run_inline
from enact.claimed_clock import RETRIES, ClaimState
from enact.evolution.runs import DATABASE, EvolveRuns
from enact.evolution.schedule import EvolveClock
from enact.messages.curator import EvolveRunFailed
from enact.messages.tasks import Submit
from enact.storage import RecordTable, Storage
from enact.tasks.queue import TaskQueue
from enact.tasks.queue_actor import TaskQueueActor
from enact.tasks.scheduler_actor import DATABASES, SCHEDULES, SchedulerActor
from enact.tasks.scheduling import Schedule
from enact.tasks.tables import DATABASES as TASK_DATABASES


def test_a_cron_submission_the_queue_does_not_answer_backs_off_then_is_given_up_and_counted(
        tmp_path: Path) -> None:
    actors = UnavailableActors()
    with home(tmp_path, "scheduler", DATABASES, actors) as context:
        scheduler = SchedulerActor(context)  # never started: its clock is driven by hand
        table = RecordTable(context.own_store().table(SCHEDULES), Schedule)
        key = (1).to_bytes(8, "big")
        due_an_hour_ago = Schedule(id=1, spec="every 1h", request="tidy up", repo="",
                                   created_at=time.time() - 5_400, last_task=None)
        context.own_store().write(lambda txn: table.put(txn, key, due_an_hour_ago))

        def stored() -> Schedule:
            found = context.own_store().read(lambda txn: table.get(txn, key))
            assert found is not None
            return found

        before = time.time()
        scheduler._run_schedule(stored())
        failed = stored()
        assert actors.asked == ["tasks"] and failed.claim.claimed == due_an_hour_ago.created_at + 3_600
        assert failed.claim.attempts == 1 and failed.claim.failure.startswith("actor 'tasks' did not answer")
        assert failed.claim.retry_at is not None and failed.claim.retry_at >= before + RETRIES.delay(1)
        scheduler._run_schedule(failed)  # within the back-off: not asked again
        assert actors.asked == ["tasks"]

        # The attempts used up (as after four more back-offs): given up, counted, and the next due time runs.
        used_up = replace(failed, claim=replace(failed.claim, attempts=RETRIES.attempts, retry_at=time.time() - 1))
        scheduler._run_schedule(used_up)
        given_up = stored()
        # Asked once more, whether the queue took a Submit after all: it did not answer either.
        assert actors.asked == ["tasks", "tasks"] and given_up.claim.claimed is None and given_up.failed == 1
        assert given_up.last_due == failed.claim.claimed
        assert given_up.last_failure.startswith(f"given up after {RETRIES.attempts} attempts: actor 'tasks'")
        assert context.metrics.registry.get_sample_value("enact_cron_runs_total", {"outcome": "failed"}) == 1


def test_an_evolve_run_whose_actors_do_not_answer_is_retried_after_a_back_off_then_given_up(
        tmp_path: Path) -> None:
    actors = UnavailableActors()
    with home(tmp_path, "evolve", [DATABASE], actors, schedule="every 1h") as context:
        runs = EvolveRuns(context, context.own_store(), off_thread=run_inline)
        runs.tick(now=1_000.0)  # the anchor
        now = 4_601.0
        for attempt in range(1, RETRIES.attempts + 1):
            runs.tick(now=now)
            assert len(actors.asked) == attempt
            clock = runs._current_clock(now)
            assert clock.claim.claimed == 4_600.0 and clock.claim.attempts == attempt
            assert clock.claim.retry_at == now + RETRIES.delay(attempt)
            runs.tick(now=now + RETRIES.delay(attempt) - 1)  # within the back-off: nothing asked
            assert len(actors.asked) == attempt
            now += RETRIES.delay(attempt)
        runs.tick(now=now)
        clock = runs._current_clock(now)
        assert len(actors.asked) == RETRIES.attempts
        assert clock.claim.claimed is None and clock.acknowledged == 4_600.0
        assert clock.last_outcome == (f"failed: given up after {RETRIES.attempts} attempts: "
                                      "actor 'curator' did not answer GetMode within 120 s")
        [failed] = [told for told in actors.told if isinstance(told, EvolveRunFailed)]
        assert failed.run_id == "evolve:4600" and failed.reason in clock.last_outcome


def test_a_given_up_evolve_run_is_in_the_evolve_history(tmp_path: Path) -> None:
    from enact.evolution.curator_actor import DATABASES as CURATOR_DATABASES
    from enact.evolution.curator_actor import CuratorActor

    with home(tmp_path, "curator", CURATOR_DATABASES, FaultyActors()) as context:
        curator = CuratorActor(context, runtime=None)  # type: ignore[arg-type]  # never started
        curator.handle(EvolveRunFailed(run_id="evolve:4600", due=4_600.0, reason="given up after 5 attempts: x"))
        [event] = curator.records.events(5)
        assert (event.kind, event.detail) == ("run-failed", "evolve:4600: given up after 5 attempts: x")




def test_a_given_up_evolve_run_is_acknowledged_before_its_failure_is_told(tmp_path: Path) -> None:
    class Recording(UnavailableActors):
        """Notes the stored clock at the moment each message is told."""

        def __init__(self) -> None:
            super().__init__()
            self.stored_when_told: list[EvolveClock | None] = []

        def tell(self, name: str, message: object) -> None:
            super().tell(name, message)
            self.stored_when_told.append(context.own_store().read(lambda txn: clocks.get(txn, b"clock")))

    actors = Recording()
    with home(tmp_path, "evolve", [DATABASE], actors, schedule="every 1h") as context:
        clocks = RecordTable(context.own_store().table(DATABASE), EvolveClock)
        runs = EvolveRuns(context, context.own_store(), off_thread=run_inline)
        runs.tick(now=1_000.0)  # the anchor
        used_up = replace(runs._current_clock(4_601.0), claim=ClaimState(claimed=4_600.0, attempts=RETRIES.attempts))
        context.own_store().write(lambda txn: clocks.put(txn, b"clock", used_up))
        runs.tick(now=4_601.0)
        [at_failure] = [stored for told, stored in zip(actors.told, actors.stored_when_told, strict=True)
                        if isinstance(told, EvolveRunFailed)]
        # A stop right after the tell must not leave the claim open, to be given up and told again.
        assert at_failure is not None and at_failure.claim.claimed is None and at_failure.acknowledged == 4_600.0


class LateQueue(FaultyActors):
    """A real task queue whose every Submit is queued but answered too late
    (the ask times out); what else is asked it answers."""

    def __init__(self, queue: TaskQueue) -> None:
        super().__init__()
        self.queue = queue

    def ask(self, name: str, message: Any, *, timeout: float) -> Any:
        self.asked.append(type(message).__name__)
        if isinstance(message, Submit):
            self.queue.submit(message, time.time())
            raise AskTimeout(name, message, timeout)
        # The actor's own dispatch over this queue (it needs only ``queue``).
        return TaskQueueActor._handle(self, message, time.time())  # type: ignore[arg-type]


def test_a_cron_claim_whose_submissions_were_queued_unanswered_records_its_task_and_the_next_due_waits(
        tmp_path: Path) -> None:
    storage = Storage(tmp_path / "tasks")
    try:
        actors = LateQueue(TaskQueue(storage.grant("tasks", TASK_DATABASES), default_repo="/repo",
                                     lease_ttl_s=60))
        with home(tmp_path, "scheduler", DATABASES, actors) as context:
            scheduler = SchedulerActor(context)  # never started: its clock is driven by hand
            table = RecordTable(context.own_store().table(SCHEDULES), Schedule)
            key = (1).to_bytes(8, "big")

            def stored() -> Schedule:
                found = context.own_store().read(lambda txn: table.get(txn, key))
                assert found is not None
                return found

            due_an_hour_ago = Schedule(id=1, spec="every 1h", request="tidy up", repo="",
                                       created_at=time.time() - 5_400)
            context.own_store().write(lambda txn: table.put(txn, key, due_an_hour_ago))
            scheduler._run_schedule(stored())  # queued, but the reply timed out
            pending = stored()
            used_up = replace(pending, claim=replace(pending.claim, attempts=RETRIES.attempts,
                                                     retry_at=time.time() - 1))
            scheduler._run_schedule(used_up)
            settled = stored()
            [task] = actors.queue.list(None, 10, None).tasks
            assert settled.claim.claimed is None and settled.failed == 0 and settled.last_task == task.id
            assert settled.last_due == due_an_hour_ago.created_at + 3_600

            # An hour on, that task is still queued: the next due time is skipped, not queued beside it.
            scheduler._run_schedule(replace(settled, last_due=settled.last_due - 3_600))
            assert stored().skipped == 1 and len(actors.queue.list(None, 10, None).tasks) == 1
            assert actors.asked == ["Submit", "GetByKey", "Get"]
    finally:
        storage.close()


def test_records_stored_with_their_claim_flat_read_with_it_nested_from_the_scheduler_databases(
        tmp_path: Path) -> None:
    with home(tmp_path, "scheduler", (*DATABASES, DATABASE), FaultyActors(), schedule="every 1h") as context:
        store = context.own_store()  # the scheduler's and the evolve actor's, in one store here
        flat_claim = {"claimed": 4_600.0, "attempts": 2, "retry_at": 4_700.0, "failure": "no answer"}
        store.write(lambda txn: store.table(SCHEDULES).put(txn, (1).to_bytes(8, "big"), {
            "id": 1, "spec": "every 1h", "request": "tidy up", "repo": "", "created_at": 1_000.0,
            "last_due": None, "last_task": None, "skipped": 0, **flat_claim, "failed": 0, "last_failure": ""}))
        store.write(lambda txn: store.table(DATABASE).put(txn, b"clock", {
            "spec": "every 1h", "anchor": 1_000.0, "acknowledged": None, **flat_claim, "last_run_at": None,
            "last_outcome": "", "coalesced": 0}))
        [entry] = SchedulerActor(context)._list_schedules().schedules
        clock = EvolveRuns(context, store, off_thread=run_inline)._current_clock(4_650.0)
        assert entry.schedule.claim == clock.claim == ClaimState(**flat_claim)  # type: ignore[arg-type]
        assert clock.anchor == 1_000.0
