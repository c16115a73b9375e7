"""Handing the queue an attempt's Finish: the one step of an attempt that
must reach the queue, so it is asked again while the queue restarts."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from enact.actors._asks import ActorUnavailable
from enact.messages.common import Done
from enact.messages.tasks import Finish, LeaseLost
from enact.retry import Backoff

log = logging.getLogger(__name__)

FINISH_RETRIES = Backoff(first_s=0.1, factor=2.0, max_s=2.0, attempts=100)
"""A Finish the queue could not take (it is restarting) is asked again; the
lease bounds how long, the attempt limit only guards against a clock that
does not move."""


def finish_with_retries(ask: Callable[[str, Finish], Done | LeaseLost], finish: Finish, *, until: float,
                        wait: Callable[[float], bool], clock: Callable[[], float] = time.monotonic,
                        policy: Backoff = FINISH_RETRIES) -> Done | LeaseLost | None:
    """Hand the queue an attempt's Finish, asking again with back-off while
    the queue is unavailable, until ``until`` (on ``clock``): past it the
    lease has lapsed and the task is another attempt's. ``wait(seconds)``
    sleeps and says whether to give up (the daemon fenced; a graceful stop
    goes on asking, its Finish is what hands the task back). None: the
    queue never took it; the lease's expiry runs the task again."""
    attempt = 1
    while True:
        try:
            return ask("tasks", finish)
        except ActorUnavailable as error:
            delay = policy.delay(attempt)
            if policy.exhausted(attempt) or clock() + delay > until:
                log.warning("task %d: finish not recorded after %d tries, giving up within the lease: %s",
                            finish.task_id, attempt, error)
                return None
            log.info("task %d: finish failed (try %d), asking again in %.2f s: %s", finish.task_id, attempt,
                     delay, error)
            if wait(delay):
                return None
            attempt += 1
