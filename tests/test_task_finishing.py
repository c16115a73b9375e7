"""An attempt's Finish survives the queue restarting: asked again with
back-off within the lease; a LeaseLost answer ends the asking."""

from __future__ import annotations

from enact.actors._asks import ActorNotFound
from enact.messages.common import Done
from enact.messages.tasks import Finish, LeaseLost
from enact.retry import Backoff
from enact.tasks.finishing import finish_with_retries
from enact.tasks.records import Outcome

FINISH = Finish(task_id=7, worker_id="worker:0@g1", attempt=1, outcome=Outcome.SUCCEEDED, summary="done")
POLICY = Backoff(first_s=0.5, factor=2.0, max_s=4.0, attempts=100)


class Queue:
    """Answers ``replies`` in turn; an exception in it is raised, as an
    unavailable actor's ask raises."""

    def __init__(self, *replies: Done | LeaseLost | Exception) -> None:
        self.replies = list(replies)
        self.asked: list[tuple[str, Finish]] = []

    def __call__(self, actor: str, message: Finish) -> Done | LeaseLost:
        self.asked.append((actor, message))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False


def test_a_finish_the_restarting_queue_refused_twice_is_recorded_on_the_third_try() -> None:
    queue, clock = Queue(ActorNotFound("tasks"), ActorNotFound("tasks"), Done()), Clock()
    reply = finish_with_retries(queue, FINISH, until=clock.now + 60, wait=clock.wait, clock=clock, policy=POLICY)
    assert reply == Done()
    assert queue.asked == [("tasks", FINISH)] * 3
    assert clock.waits == [0.5, 1.0]


def test_lease_lost_ends_the_retries() -> None:
    lost = LeaseLost(task_id=7, reason="task 7 is no longer this worker's")
    queue, clock = Queue(ActorNotFound("tasks"), lost, Done()), Clock()
    assert finish_with_retries(queue, FINISH, until=clock.now + 60, wait=clock.wait, clock=clock,
                               policy=POLICY) == lost
    assert len(queue.asked) == 2


def test_retries_stop_before_the_lease_lapses() -> None:
    queue, clock = Queue(*[ActorNotFound("tasks")] * 10), Clock()
    # 0.5 + 1 + 2 = 3.5 s of waiting fit in 5 s; the next 4 s would not.
    assert finish_with_retries(queue, FINISH, until=clock.now + 5, wait=clock.wait, clock=clock,
                               policy=POLICY) is None
    assert clock.waits == [0.5, 1.0, 2.0] and len(queue.asked) == 4


def test_a_fenced_daemon_ends_the_retries() -> None:
    queue = Queue(ActorNotFound("tasks"), Done())
    assert finish_with_retries(queue, FINISH, until=1e12, wait=lambda seconds: True, policy=POLICY) is None
    assert len(queue.asked) == 1
