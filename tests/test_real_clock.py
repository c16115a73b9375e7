"""The real clock's timers: one thread for the whole process serves them,
in due order, skipping the cancelled, outliving an action that raises, and
waking for a sooner timer added while it sleeps towards a later one. Each
test waits on the events its timers set (the delays are milliseconds)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import cast

import pytest

from enact.clock import REAL_CLOCK, RealClock, Timer, _Pending

WAIT_S = 10.0
"""How long a test waits for a timer that must fire (it fires in milliseconds)."""


def recorder(ran: list[str], name: str, done: threading.Event | None = None) -> Callable[[], None]:
    def action() -> None:
        ran.append(name)
        if done is not None:
            done.set()
    return action


def due_of(timer: Timer) -> float:
    return cast(_Pending, timer).due


def clock_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "enact-clock"]


def test_timers_fire_in_due_order_whatever_order_they_were_set_in() -> None:
    ran: list[str] = []
    done = [threading.Event() for _ in range(4)]
    timers = {name: REAL_CLOCK.call_later(delay, recorder(ran, name, event))
              for (name, delay), event in zip({"c": 0.03, "a": 0.0, "d": 0.04, "b": 0.01}.items(), done, strict=True)}
    assert all(event.wait(WAIT_S) for event in done)
    # By the due time each got when set (a pause between two sets can move
    # one's turn; the order of the due times never changes).
    assert ran == sorted(timers, key=lambda name: due_of(timers[name]))


def test_a_cancelled_timer_never_runs() -> None:
    ran: list[str] = []
    later = threading.Event()
    REAL_CLOCK.call_later(0.01, recorder(ran, "cancelled")).cancel()
    REAL_CLOCK.call_later(0.02, recorder(ran, "later", later))  # due after the cancelled one: it had its turn
    assert later.wait(WAIT_S)
    assert ran == ["later"]


def test_a_sooner_timer_set_while_the_thread_sleeps_towards_a_later_one_fires_first() -> None:
    ran: list[str] = []
    serving, sooner = threading.Event(), threading.Event()
    far = REAL_CLOCK.call_later(3600, recorder(ran, "far"))
    REAL_CLOCK.call_later(0, recorder(ran, "serving", serving))
    assert serving.wait(WAIT_S)  # the thread now sleeps towards the far one, an hour away
    REAL_CLOCK.call_later(0.001, recorder(ran, "sooner", sooner))
    try:
        assert sooner.wait(WAIT_S)
        assert ran == ["serving", "sooner"]
    finally:
        far.cancel()


def test_an_action_that_raises_is_logged_and_later_timers_still_fire(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise RuntimeError("the action broke")

    ran: list[str] = []
    after = threading.Event()
    with caplog.at_level(logging.ERROR, logger="enact.clock"):
        REAL_CLOCK.call_later(0, broken)
        REAL_CLOCK.call_later(0.01, recorder(ran, "after", after))
        assert after.wait(WAIT_S)
    assert ran == ["after"]
    assert any(record.exc_info is not None and "the action broke" in str(record.exc_info[1])
               for record in caplog.records if record.getMessage().startswith("a timer's action <function"))


def test_one_thread_serves_every_timer_of_every_real_clock() -> None:
    threads: list[threading.Thread] = []
    done = [threading.Event() for _ in range(6)]

    def on(event: threading.Event) -> Callable[[], None]:
        def action() -> None:
            threads.append(threading.current_thread())
            event.set()
        return action

    for index, event in enumerate(done):
        clock = REAL_CLOCK if index % 2 else RealClock()
        clock.call_later(index * 0.002, on(event))
    assert all(event.wait(WAIT_S) for event in done)
    [serving] = clock_threads()
    assert set(threads) == {serving} and serving.daemon


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_a_timer_thread_of_its_own() -> None:
    ready = threading.Event()
    REAL_CLOCK.call_later(0, ready.set)
    assert ready.wait(WAIT_S)  # the parent's thread runs: the child inherits none of it
    pid = os.fork()
    if pid == 0:  # the child: only os._exit leaves it, whatever happens
        code = 1
        try:
            fired = threading.Event()
            REAL_CLOCK.call_later(0, fired.set)
            code = 0 if fired.wait(WAIT_S) and len(clock_threads()) == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
