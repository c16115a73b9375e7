"""The task queue's rules (enact.tasks.queue) on real LMDB, without threads:
the clock is an argument, so leases and back-off are driven by the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from enact.fence import FencedError
from enact.messages.common import Done, NotFound, RefusalCode, Refused
from enact.messages.tasks import (
    CancelAccepted,
    Claimed,
    EventPage,
    Finish,
    Found,
    LeaseLost,
    LeaseRenewed,
    NothingQueued,
    ReportPhase,
    Submit,
    Submitted,
)
from enact.storage import Storage
from enact.tasks.queue import TaskQueue
from enact.tasks.records import (
    EventKind,
    FailureClass,
    Outcome,
    Phase,
    Task,
    TaskState,
    retry_delay_s,
)
from enact.tasks.tables import DATABASES

T0 = 1_000_000.0
TTL = 60.0


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    opened = Storage(tmp_path / "state")
    yield opened
    opened.close()


@pytest.fixture
def queue(storage: Storage) -> TaskQueue:
    return TaskQueue(storage.grant("tasks", DATABASES), default_repo="/repo", lease_ttl_s=TTL)


def submit(queue: TaskQueue, text: str = "fix the bug", now: float = T0, **fields: object) -> Task:
    reply = queue.submit(Submit(request=text, origin="human-cli", **fields), now)  # type: ignore[arg-type]
    assert isinstance(reply, Submitted), reply
    return reply.task


def claim(queue: TaskQueue, worker: str = "w1", now: float = T0) -> Task:
    reply = queue.claim(worker, now)
    assert isinstance(reply, Claimed), reply
    return reply.task


def state_of(queue: TaskQueue, task_id: int) -> Task:
    found = queue.get(task_id)
    assert isinstance(found, Found)
    return found.task


def kinds(queue: TaskQueue, task_id: int) -> list[EventKind]:
    page = queue.events(task_id, 0, 1000)
    assert isinstance(page, EventPage)
    return [e.event.kind for e in page.events]


def finish(queue: TaskQueue, task: Task, outcome: Outcome, failure: FailureClass | None = None,
           now: float = T0 + 1, worker: str = "w1") -> Done | LeaseLost:
    return queue.finish(Finish(task_id=task.id, worker_id=worker, attempt=task.attempt, outcome=outcome,
                               failure_class=failure, summary="it ended"), now)


def test_ids_are_monotonic_and_the_default_repo_is_used(queue: TaskQueue) -> None:
    first, second = submit(queue, "one"), submit(queue, "two")
    assert (first.id, second.id) == (1, 2)
    assert first.repo == "/repo" and first.state is TaskState.QUEUED and first.attempt == 1
    assert first.repairs == 2 and first.deadline_s == 600
    assert kinds(queue, 1) == [EventKind.QUEUED]


def test_a_used_idempotency_key_returns_the_existing_task(queue: TaskQueue) -> None:
    first = queue.submit(Submit(request="x", origin="chat:local", idempotency_key="chat:e1:task"), T0)
    again = queue.submit(Submit(request="x", origin="chat:local", idempotency_key="chat:e1:task"), T0 + 5)
    assert isinstance(first, Submitted) and isinstance(again, Submitted)
    assert not first.existing and again.existing and again.task.id == first.task.id
    assert queue.list(None, 10, None).tasks == (first.task,)


@pytest.mark.parametrize("fields, words", [
    ({"request": "  "}, "needs a request"),
    ({"brief": "b" * 3001}, "brief is 3001 characters"),
    ({"repairs": 6}, "repairs must be between 0 and 5"),
    ({"deadline_s": 59}, "between 60 and 7200 seconds"),
])
def test_bad_submissions_are_refused_and_change_nothing(queue: TaskQueue, fields: dict[str, object],
                                                        words: str) -> None:
    message = Submit(**{"request": "x", "origin": "human-cli", **fields})  # type: ignore[arg-type]
    reply = queue.submit(message, T0)
    assert isinstance(reply, Refused) and words in reply.reason and reply.code == RefusalCode.INVALID
    assert queue.list(None, 10, None).tasks == ()


def test_no_repository_anywhere_is_refused(storage: Storage) -> None:
    queue = TaskQueue(storage.grant("tasks", DATABASES), default_repo="", lease_ttl_s=TTL)
    reply = queue.submit(Submit(request="x", origin="human-cli"), T0)
    assert isinstance(reply, Refused) and "tasks.default_repo" in reply.reason


def test_claim_takes_the_oldest_queued_task_under_a_lease(queue: TaskQueue) -> None:
    submit(queue, "one"), submit(queue, "two")
    reply = queue.claim("w1", T0)
    assert isinstance(reply, Claimed) and reply.task.id == 1
    assert reply.task.state is TaskState.RUNNING and reply.task.worker == "w1"
    assert reply.lease_expires_at == T0 + TTL
    assert claim(queue, "w2").id == 2
    assert isinstance(queue.claim("w3", T0), NothingQueued)


def test_two_workers_never_hold_one_task(queue: TaskQueue) -> None:
    submit(queue)
    task = claim(queue, "w1")
    assert isinstance(queue.claim("w2", T0), NothingQueued)
    stranger = ReportPhase(task_id=task.id, worker_id="w2", attempt=1, phase=Phase.MODEL)
    assert isinstance(queue.report_phase(stranger, T0), LeaseLost)
    assert isinstance(queue.heartbeat(task.id, "w2", 1, T0), LeaseLost)
    assert isinstance(finish(queue, task, Outcome.SUCCEEDED, worker="w2"), LeaseLost)
    assert state_of(queue, task.id).state is TaskState.RUNNING


def test_heartbeat_renews_the_lease(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    renewed = queue.heartbeat(task.id, "w1", 1, T0 + 50)
    assert isinstance(renewed, LeaseRenewed) and renewed.lease_expires_at == T0 + 50 + TTL
    assert queue.expire_leases(T0 + 70) == 0
    assert state_of(queue, task.id).state is TaskState.RUNNING


def test_an_expired_lease_requeues_with_the_next_attempt_and_refuses_the_old_holder(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    assert queue.expire_leases(T0 + TTL) == 1
    requeued = state_of(queue, task.id)
    assert requeued.state is TaskState.QUEUED and requeued.attempt == 2 and requeued.worker == ""
    assert isinstance(queue.heartbeat(task.id, "w1", 1, T0 + TTL + 1), LeaseLost)
    again = claim(queue, "w2", T0 + TTL + 1)
    assert again.attempt == 2
    assert isinstance(finish(queue, task, Outcome.SUCCEEDED), LeaseLost)  # the first attempt's worker
    assert kinds(queue, task.id) == [EventKind.QUEUED, EventKind.CLAIMED, EventKind.LEASE_EXPIRED,
                                     EventKind.CLAIMED]


def test_a_lapsed_lease_is_lost_before_the_sweep_runs_and_nothing_changes(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    before = state_of(queue, task.id)
    late = T0 + TTL  # the lease's expiry; the sweep has not run yet
    phase = queue.report_phase(ReportPhase(task_id=task.id, worker_id="w1", attempt=1, phase=Phase.MODEL), late)
    for reply in (queue.heartbeat(task.id, "w1", 1, late), phase,
                  finish(queue, task, Outcome.SUCCEEDED, now=late + 1)):
        assert isinstance(reply, LeaseLost) and "expired" in reply.reason, reply
    assert state_of(queue, task.id) == before
    assert kinds(queue, task.id) == [EventKind.QUEUED, EventKind.CLAIMED]
    assert queue.take_changes()[-1].event.event.kind is EventKind.CLAIMED  # nothing new to publish
    assert queue.expire_leases(late + 1) == 1  # the sweep still puts it back, as it would have
    assert state_of(queue, task.id).attempt == 2


def test_a_task_whose_third_lease_expires_fails_worker_lost(queue: TaskQueue) -> None:
    task = submit(queue)
    now = T0
    for _ in range(3):
        claim(queue, "w1", now)
        now += TTL
        queue.expire_leases(now)
    lost = state_of(queue, task.id)
    assert lost.state is TaskState.FAILED and lost.summary.startswith("worker-lost")
    assert lost.attempt == 3


def test_phases_are_recorded_with_repair_rounds(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    for phase, repair in ((Phase.WORKSPACE, 0), (Phase.MODEL, 0), (Phase.REPAIR, 1)):
        reply = queue.report_phase(ReportPhase(task_id=task.id, worker_id="w1", attempt=1, phase=phase,
                                               repair=repair, confined=True, worktree="/wt/1"), T0 + 1)
        assert isinstance(reply, Done)
    running = state_of(queue, task.id)
    assert running.progress == "repair 1/2" and running.confined is True and running.worktree == "/wt/1"
    assert running.lease_expires_at == T0 + 1 + TTL


def test_success_records_the_review(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    reply = queue.finish(Finish(task_id=task.id, worker_id="w1", attempt=1, outcome=Outcome.SUCCEEDED,
                                summary="done", review_id="r1"), T0 + 9)
    assert isinstance(reply, Done)
    ended = state_of(queue, task.id)
    assert ended.state is TaskState.SUCCEEDED and ended.review_id == "r1" and ended.finished_at == T0 + 9
    assert isinstance(finish(queue, task, Outcome.SUCCEEDED), LeaseLost)  # it is not running any more


def test_a_transient_failure_is_retried_after_its_back_off(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    finish(queue, task, Outcome.FAILED, FailureClass.TRANSIENT, now=T0)
    waiting = state_of(queue, task.id)
    assert waiting.state is TaskState.QUEUED and waiting.attempt == 2 and waiting.not_before == T0 + 30
    nothing = queue.claim("w1", T0 + 29)
    assert isinstance(nothing, NothingQueued) and nothing.next_due_in_s == pytest.approx(1.0)
    assert claim(queue, "w1", T0 + 30).attempt == 2
    assert [retry_delay_s(n) for n in (1, 2, 3, 4, 5, 6)] == [30, 60, 120, 240, 300, 300]


def test_a_transient_failure_on_the_last_attempt_fails(queue: TaskQueue) -> None:
    task = submit(queue)
    now = T0
    for _ in range(3):
        running = claim(queue, "w1", now)
        finish(queue, running, Outcome.FAILED, FailureClass.TRANSIENT, now=now)
        now += 1000
    assert state_of(queue, task.id).state is TaskState.FAILED


def test_a_permanent_failure_fails_at_once(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    finish(queue, task, Outcome.FAILED, FailureClass.PERMANENT)
    failed = state_of(queue, task.id)
    assert failed.state is TaskState.FAILED and failed.failure_class is FailureClass.PERMANENT


def test_an_auth_failure_pauses_with_how_to_resume_and_resume_queues_it_again(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    finish(queue, task, Outcome.FAILED, FailureClass.AUTH)
    paused = state_of(queue, task.id)
    assert paused.state is TaskState.PAUSED and f"task resume {task.id}" in paused.summary
    resumed = queue.resume(task.id, T0 + 2)
    assert isinstance(resumed, Task) and resumed.state is TaskState.QUEUED and resumed.id == task.id
    assert isinstance(queue.resume(task.id, T0 + 3), Refused)
    assert kinds(queue, task.id)[-2:] == [EventKind.PAUSED, EventKind.RESUMED]


def test_an_interrupted_attempt_is_queued_again_without_counting_against_the_attempts(queue: TaskQueue) -> None:
    task = submit(queue)
    now = T0
    for _ in range(4):  # more graceful stops than a task has attempts
        running = claim(queue, "w1", now)
        assert isinstance(finish(queue, running, Outcome.INTERRUPTED, now=now), Done)
        now += 1
    interrupted = state_of(queue, task.id)
    assert (interrupted.state, interrupted.attempt, interrupted.uncounted_attempts) == (TaskState.QUEUED, 5, 4)
    assert interrupted.not_before == 0.0 and kinds(queue, task.id)[-1] is EventKind.INTERRUPTED
    for _ in range(2):  # still its three counted attempts
        running = claim(queue, "w1", now)
        finish(queue, running, Outcome.FAILED, FailureClass.TRANSIENT, now=now)
        now += 1000
        assert state_of(queue, task.id).state is TaskState.QUEUED
    finish(queue, claim(queue, "w1", now), Outcome.FAILED, FailureClass.TRANSIENT, now=now)
    assert state_of(queue, task.id).state is TaskState.FAILED


def test_a_resumed_task_keeps_its_attempts(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    finish(queue, task, Outcome.FAILED, FailureClass.AUTH)
    queue.resume(task.id, T0 + 2)
    now = T0 + 3
    for _ in range(2):
        claim(queue, "w1", now)
        now += TTL
        queue.expire_leases(now)
        assert state_of(queue, task.id).state is TaskState.QUEUED
    claim(queue, "w1", now)
    queue.expire_leases(now + TTL)
    lost = state_of(queue, task.id)
    assert lost.state is TaskState.FAILED and (lost.attempt, lost.counted_attempts) == (4, 3)


def test_the_owner_notice_of_an_ending_is_held_with_its_commit_until_the_inbox_takes_it(queue: TaskQueue) -> None:
    from enact.tasks.records import ConversationRef

    chat = ConversationRef(channel="local", conversation="owner")
    task = (submit(queue, conversation=chat), claim(queue))[1]
    assert queue.notices.take() == [] and queue.notices.held() == []  # running: nothing to tell
    finish(queue, task, Outcome.SUCCEEDED)
    [told] = queue.notices.take()
    assert told.notice_id == f"task:{task.id}:1:succeeded" and told.acknowledge_to == "tasks"
    assert queue.notices.held() == [told]
    queue.notices.taken(told.notice_id)
    assert queue.notices.held() == [] and queue.notices.take() == []


def test_a_notice_the_inbox_has_not_taken_within_a_lease_ttl_is_told_again(storage: Storage,
                                                                         queue: TaskQueue) -> None:
    from enact.tasks.records import ConversationRef

    task = (submit(queue, conversation=ConversationRef(channel="local", conversation="owner")), claim(queue))[1]
    finish(queue, task, Outcome.SUCCEEDED, now=T0 + 1)
    [told] = queue.notices.take()
    assert queue.notices.retell(T0 + TTL / 2) == 0 and queue.notices.take() == []  # the inbox may be at it
    assert queue.notices.retell(T0 + 1 + TTL) == 1 and queue.notices.take() == [told]  # it lost it
    assert queue.notices.retell(T0 + 1 + TTL * 1.5) == 0  # told again just now
    restarted = TaskQueue(storage.grant("tasks", DATABASES), default_repo="/repo", lease_ttl_s=TTL)
    assert restarted.notices.retell(T0 + 2 + TTL) == 1 and restarted.notices.take() == [told]  # at start: all
    queue.notices.taken(told.notice_id)
    assert queue.notices.retell(T0 + 1 + TTL * 3) == 0 and queue.notices.take() == []


def test_cancel_ends_a_queued_task_at_once(queue: TaskQueue) -> None:
    task = submit(queue)
    reply = queue.cancel(task.id, T0 + 1)
    assert isinstance(reply, CancelAccepted) and reply.at_once and reply.task.state is TaskState.CANCELLED
    assert isinstance(queue.claim("w1", T0 + 2), NothingQueued)
    assert isinstance(queue.cancel(task.id, T0 + 3), Refused)


def test_cancel_of_a_running_task_reaches_its_worker_through_the_heartbeat(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    reply = queue.cancel(task.id, T0 + 1)
    assert isinstance(reply, CancelAccepted) and not reply.at_once
    assert reply.task.state is TaskState.RUNNING
    beat = queue.heartbeat(task.id, "w1", 1, T0 + 2)
    assert isinstance(beat, LeaseRenewed) and beat.cancel_requested
    finish(queue, task, Outcome.CANCELLED)
    assert state_of(queue, task.id).state is TaskState.CANCELLED


def test_a_cancelled_task_whose_worker_vanished_ends_cancelled_not_requeued(queue: TaskQueue) -> None:
    task = (submit(queue), claim(queue))[1]
    queue.cancel(task.id, T0 + 1)
    queue.expire_leases(T0 + TTL)
    assert state_of(queue, task.id).state is TaskState.CANCELLED


@pytest.mark.parametrize("outcome, failure", [(Outcome.INTERRUPTED, None), (Outcome.FAILED, FailureClass.TRANSIENT),
                                              (Outcome.FAILED, FailureClass.AUTH)])
def test_an_accepted_cancel_is_kept_by_an_attempt_that_would_hand_the_task_back(
        queue: TaskQueue, outcome: Outcome, failure: FailureClass | None) -> None:
    # A graceful stop (or a transient failure, or a pause) before the
    # heartbeat that would have told the worker: the owner's cancel stands.
    task = (submit(queue), claim(queue))[1]
    queue.cancel(task.id, T0 + 1)
    assert isinstance(finish(queue, task, outcome, failure, now=T0 + 2), Done)
    ended = state_of(queue, task.id)
    assert (ended.state, ended.attempt) == (TaskState.CANCELLED, 1)
    assert "cancelled by its owner" in ended.summary and kinds(queue, task.id)[-1] is EventKind.CANCELLED
    assert isinstance(queue.claim("w1", T0 + 1000), NothingQueued)


def test_retry_creates_a_child_of_a_failed_or_cancelled_task_only(queue: TaskQueue) -> None:
    task = submit(queue, brief="keep it small", repairs=4)
    still_queued = queue.retry(task.id, "human-cli", T0)
    assert isinstance(still_queued, Refused) and still_queued.code == RefusalCode.WRONG_STATE
    queue.cancel(task.id, T0)
    child = queue.retry(task.id, "human-cli", T0 + 1)
    assert isinstance(child, Submitted) and not child.existing
    assert child.task.parent == task.id and child.task.id != task.id
    assert (child.task.request, child.task.brief, child.task.repairs) == (task.request, "keep it small", 4)
    assert queue.retry(99, "human-cli", T0) == NotFound(kind="task", id="99")


def test_retrying_the_same_ended_task_twice_finds_the_first_child(queue: TaskQueue) -> None:
    task = submit(queue)
    queue.cancel(task.id, T0)
    first = queue.retry(task.id, "human-cli", T0 + 1)
    again = queue.retry(task.id, "human-cli", T0 + 2)  # the CLI retry sent twice, or replayed after a crash
    assert isinstance(first, Submitted) and isinstance(again, Submitted)
    assert again.existing and again.task.id == first.task.id
    assert first.task.idempotency_key == f"retry:{task.id}:{task.attempt}"
    assert [t.id for t in queue.list(None, 10, None).tasks] == [first.task.id, task.id]
    # The child, once it ended too, is retried on its own key.
    queue.cancel(first.task.id, T0 + 3)
    grandchild = queue.retry(first.task.id, "human-cli", T0 + 4)
    assert isinstance(grandchild, Submitted) and not grandchild.existing
    assert grandchild.task.parent == first.task.id


def test_listing_is_newest_first_by_state_and_pages_on(queue: TaskQueue) -> None:
    for n in range(1, 8):
        submit(queue, f"task {n}")
    for _ in range(3):
        claim(queue)
    page = queue.list(None, 3, None)
    assert [t.id for t in page.tasks] == [7, 6, 5] and page.next_before == 5
    assert [t.id for t in queue.list(None, 3, page.next_before).tasks] == [4, 3, 2]
    last = queue.list(None, 3, 2)
    assert [t.id for t in last.tasks] == [1] and last.next_before is None
    queued = queue.list(TaskState.QUEUED, 2, None)
    assert [t.id for t in queued.tasks] == [7, 6] and queued.next_before == 6
    assert [t.id for t in queue.list(TaskState.QUEUED, 10, 6).tasks] == [5, 4]
    assert [t.id for t in queue.list(TaskState.RUNNING, 10, None).tasks] == [3, 2, 1]


def test_events_read_by_cursor_in_full_per_task_and_overall(queue: TaskQueue) -> None:
    first = submit(queue, "one")
    submit(queue, "two")
    running = claim(queue)
    for n in range(5):
        queue.report_phase(ReportPhase(task_id=first.id, worker_id="w1", attempt=running.attempt,
                                       phase=Phase.MODEL, summary=f"step {n}"), T0 + n)
    seen, cursor = [], 0
    while True:
        page = queue.events(first.id, cursor, 2)
        assert isinstance(page, EventPage)
        seen += page.events
        cursor = page.next_cursor
        if not page.more:
            break
    assert len(seen) == 7 and all(e.event.task_id == first.id for e in seen)
    everything = queue.events(None, 0, 100)
    assert isinstance(everything, EventPage) and len(everything.events) == 8
    assert queue.events(42, 0, 10) == NotFound(kind="task", id="42")


def test_leases_say_who_holds_which_task(queue: TaskQueue) -> None:
    submit(queue), submit(queue), submit(queue)
    claim(queue, "w1"), claim(queue, "w2")
    table = queue.leases()
    assert {(lease.task_id, lease.worker_id) for lease in table.leases} == {(1, "w1"), (2, "w2")}
    assert table.queued == 1


def test_committed_changes_are_collected_for_publishing(queue: TaskQueue) -> None:
    task = submit(queue)
    claim(queue)
    changes = queue.take_changes()
    assert [(c.task.id, c.event.event.kind) for c in changes] == [(task.id, EventKind.QUEUED),
                                                                  (task.id, EventKind.CLAIMED)]
    assert queue.take_changes() == []


def test_a_fenced_queue_writes_nothing(storage: Storage, queue: TaskQueue) -> None:
    submit(queue)

    def refuse(_: lmdb.Transaction) -> None:
        raise FencedError(1, 2)

    storage.set_write_guard(refuse)
    with pytest.raises(FencedError):
        queue.submit(Submit(request="later", origin="human-cli"), T0)
    with pytest.raises(FencedError):
        queue.claim("w1", T0)
    storage.set_write_guard(None)
    assert [t.id for t in queue.list(None, 10, None).tasks] == [1]
    assert queue.take_changes()[-1].task.id == 1
