"""One task attempt (enact.tasks.worker.TaskAttempt) against the real queue
logic on real LMDB and a real git repository, with the worker's messages
carried by a plain function instead of actors: how an attempt winds down
when it is cancelled (the deadline, the daemon stopping, the owner) and
still hands the queue its Finish, and how one whose step ignores the cancel
lets its lease lapse. The runtime is the test's: it is told what to do
when the attempt is cancelled.

The lease TTL is long enough that a stall of a few seconds on a loaded
machine does not lapse it (beats come every second)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from task_repos import make_repo

from enact import components, config
from enact.actors._asks import ActorNotFound
from enact.cancellation import DAEMON_STOPPING, CancellationToken
from enact.messages.reviews import List, ReviewList
from enact.messages.tasks import Claimed, Finish, Found, Heartbeat, ReportPhase, Submit, Submitted
from enact.runtime import Capabilities, RuntimeCancelled, RuntimeRequest, RuntimeResult, RuntimeTimeout
from enact.storage import Storage
from enact.tasks.queue import TaskQueue
from enact.tasks.records import EventKind, FailureClass, Task, TaskState, task_log_path
from enact.tasks.settings import TasksSettings
from enact.tasks.tables import DATABASES
from enact.tasks.worker import TaskAttempt, WorkerServices

from conftest import wait_for

WORKER = "worker:0@g1"
LEASE_TTL_S = 6.0


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[TaskQueue]:
    storage = Storage(tmp_path / "state")
    yield TaskQueue(storage.grant("tasks", DATABASES), default_repo="", lease_ttl_s=LEASE_TTL_S)
    storage.close()


class Transport:
    """Carries the worker's asks to the queue as the tasks actor would (the
    time is the wall clock); the reviews hold none for the task. The first
    ``refused_finishes`` Finishes meet an unavailable queue (restarting)."""

    def __init__(self, queue: TaskQueue, *, refused_finishes: int = 0) -> None:
        self.queue = queue
        self.refused_finishes = refused_finishes

    def __call__(self, actor: str, message: Any) -> Any:
        now = time.time()
        match actor, message:
            case "reviews", List():
                return ReviewList(reviews=(), more=False)
            case "tasks", Heartbeat():
                return self.queue.heartbeat(message.task_id, message.worker_id, message.attempt, now)
            case "tasks", ReportPhase():
                return self.queue.report_phase(message, now)
            case "tasks", Finish():
                if self.refused_finishes:
                    self.refused_finishes -= 1
                    raise ActorNotFound("tasks")
                return self.queue.finish(message, now)
        raise AssertionError(f"the worker asked {actor} something unexpected: {message!r}")


class WindingDown:
    """A runtime that works until the attempt is cancelled, then takes
    ``wind_down`` (called with the request) before it answers cancelled."""

    name = "winding-down"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=False)
    waits_for = "the winding-down runtime"

    def __init__(self, on_start: Callable[[], None] = lambda: None,
                 wind_down: Callable[[RuntimeRequest], None] = lambda request: None) -> None:
        self.on_start = on_start
        self.wind_down = wind_down

        self.wound_down = False

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        assert request.cancel is not None
        self.on_start()
        request.cancel.wait(60)
        self.wind_down(request)
        self.wound_down = True
        raise RuntimeCancelled(request.cancel.reason)


def claim(queue: TaskQueue, repo: Path, **task_fields: Any) -> Claimed:
    submitted = queue.submit(Submit(request="mark the answer", repo=str(repo), origin="human-cli"), time.time())
    assert isinstance(submitted, Submitted)
    claimed = queue.claim(WORKER, time.time())
    assert isinstance(claimed, Claimed)
    return dataclasses.replace(claimed, task=dataclasses.replace(claimed.task, **task_fields))


def run_attempt(tmp_path: Path, claimed: Claimed, transport: Transport, runtime: WindingDown,
                stopping: CancellationToken, **attempt_options: Any) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = components.load().load_config(home, environ={}, overrides={"tasks.confinement": "off"})
    services = WorkerServices(home=home, settings=settings.typed(TasksSettings),
                              call_timeout_s=settings.typed(config.RuntimeSettings).timeout_s, runtime=runtime,
                              ask=transport)
    TaskAttempt(claimed, worker_id=WORKER, services=services, parent=stopping, fence=CancellationToken(),
                **attempt_options).run()


def task_of(queue: TaskQueue, task_id: int) -> Task:
    found = queue.get(task_id)
    assert isinstance(found, Found)
    return found.task


def kinds(queue: TaskQueue, task_id: int) -> list[EventKind]:
    page = queue.events(task_id, 0, 1000)
    return [item.event.kind for item in getattr(page, "events", ())]


def test_a_graceful_stop_hands_the_task_back_although_the_queue_refused_the_first_finish(
        queue: TaskQueue, tmp_path: Path) -> None:
    # The daemon stopping cancels the attempt; the Finish that says
    # "interrupted" is then asked again, not dropped with the stop.
    claimed = claim(queue, make_repo(tmp_path / "repo"))
    stopping = CancellationToken()
    runtime = WindingDown(on_start=lambda: stopping.cancel(DAEMON_STOPPING))
    run_attempt(tmp_path, claimed, Transport(queue, refused_finishes=1), runtime, stopping)
    handed_back = task_of(queue, claimed.task.id)
    assert (handed_back.state, handed_back.attempt, handed_back.uncounted_attempts) == (TaskState.QUEUED, 2, 1)
    assert kinds(queue, claimed.task.id)[-1] is EventKind.INTERRUPTED


def test_an_attempt_past_its_deadline_keeps_its_lease_while_it_winds_down_and_fails_permanently(
        queue: TaskQueue, tmp_path: Path) -> None:
    # The deadline leaves the workspace step time to finish on a loaded
    # machine: it comes while the runtime runs (asserted below).
    claimed = claim(queue, make_repo(tmp_path / "repo"), deadline_s=3)
    renewed_while_winding_down: list[float] = []

    def wait_for_a_renewal(request: RuntimeRequest) -> None:
        # The lease the attempt held when its deadline came is renewed
        # again while the runtime winds down (a beat comes every second).
        held_until = task_of(queue, claimed.task.id).lease_expires_at
        assert held_until is not None

        def renewed() -> bool:
            renewed_until = task_of(queue, claimed.task.id).lease_expires_at
            if renewed_until is not None and renewed_until > held_until:
                renewed_while_winding_down.append(renewed_until)
            return bool(renewed_while_winding_down)

        wait_for(renewed, timeout=LEASE_TTL_S, what="the lease renewed after the deadline")

    runtime = WindingDown(wind_down=wait_for_a_renewal)
    run_attempt(tmp_path, claimed, Transport(queue), runtime, CancellationToken())
    assert runtime.wound_down and renewed_while_winding_down, "the lease was not renewed after the deadline"
    failed = task_of(queue, claimed.task.id)
    assert (failed.state, failed.failure_class) == (TaskState.FAILED, FailureClass.PERMANENT), failed
    assert "deadline of 3 s exceeded in model" in failed.summary


def test_a_cancelled_attempt_whose_runtime_ignores_the_cancel_stops_renewing_after_the_wind_down_grace(
        queue: TaskQueue, tmp_path: Path) -> None:
    # The owner cancels; the runtime goes on regardless. After the grace the
    # worker renews no more, the lease lapses and the queue ends the task:
    # `task cancel` ends it although its step never stops.
    claimed = claim(queue, make_repo(tmp_path / "repo"))
    task_id = claimed.task.id
    lapsed: list[float] = []

    def outlive_the_lease(request: RuntimeRequest) -> None:
        # The worker says when it renews no more; the queue is then told a
        # time past the lease's end (its sweep takes the time as an
        # argument) instead of the test waiting for it to come.
        wait_for(lambda: "the lease is no longer renewed" in task_log(), timeout=4 * LEASE_TTL_S,
                 what="the worker to stop renewing the lease")
        held_until = task_of(queue, task_id).lease_expires_at
        assert held_until is not None
        lapsed.append(held_until)
        queue.expire_leases(held_until + 0.5)  # the tasks actor's sweep, once the lease has lapsed

    def task_log() -> str:
        path = task_log_path(tmp_path / "home", task_id)
        return path.read_text(encoding="utf-8") if path.exists() else ""

    runtime = WindingDown(on_start=lambda: queue.cancel(task_id, time.time()), wind_down=outlive_the_lease)
    run_attempt(tmp_path, claimed, Transport(queue), runtime, CancellationToken(), wind_down_s=0.5)
    assert runtime.wound_down and lapsed, "the lease was renewed for as long as the runtime ran"
    ended = task_of(queue, task_id)
    assert ended.state is TaskState.CANCELLED, ended
    assert "lease of " in ended.summary and "expired" in ended.summary, ended.summary
    log_text = task_log_path(tmp_path / "home", task_id).read_text(encoding="utf-8")
    assert "the lease is no longer renewed" in log_text


class TimingOut:
    """A runtime whose call runs out of the time it was given: ``on_start``
    first, then ``RuntimeTimeout``, as an adapter raises it at ``timeout_s``."""

    name = "timing-out"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=False)
    waits_for = "the timing-out runtime"

    def __init__(self, on_start: Callable[[RuntimeRequest], None]) -> None:
        self.on_start = on_start

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        self.on_start(request)
        raise RuntimeTimeout(f"no answer within {request.timeout_s:g} s")


@pytest.mark.parametrize(("past_the_deadline", "state"), [(True, TaskState.FAILED), (False, TaskState.QUEUED)])
def test_a_runtime_call_given_the_rest_of_the_tasks_time_that_times_out_is_the_deadline(
        queue: TaskQueue, tmp_path: Path, past_the_deadline: bool, state: TaskState) -> None:
    """The call gets what is left of the deadline, so it may time out before
    the heartbeat sees the deadline: the task still fails for good, past its
    deadline, not as a runtime failure a retry would repeat. A call that
    times out with time still left is the runtime's failure, retried."""
    claimed = claim(queue, make_repo(tmp_path / "repo"), deadline_s=600)
    home = tmp_path / "home"
    home.mkdir()
    settings = components.load().load_config(home, environ={}, overrides={"tasks.confinement": "off"})
    attempts: list[TaskAttempt] = []

    def run_out(request: RuntimeRequest) -> None:
        if past_the_deadline:  # as if the call had run to it: the heartbeat, next due in a second, has not
            attempts[0]._deadline = time.monotonic() - 0.1

    services = WorkerServices(home=home, settings=settings.typed(TasksSettings),
                              call_timeout_s=settings.typed(config.RuntimeSettings).timeout_s,
                              runtime=TimingOut(run_out), ask=Transport(queue))
    attempts.append(TaskAttempt(claimed, worker_id=WORKER, services=services, parent=CancellationToken(),
                                fence=CancellationToken()))
    attempts[0].run()
    ended = task_of(queue, claimed.task.id)
    assert ended.state is state, ended
    if past_the_deadline:
        assert ended.failure_class is FailureClass.PERMANENT and "deadline of 600 s exceeded in model" in ended.summary
