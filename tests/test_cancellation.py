"""Cancellation tokens: a cancelled parent cancels every child, callbacks run once."""

from __future__ import annotations

import threading

import pytest

from enact.cancellation import CancellationToken, Cancelled


def test_cancel_reaches_children_made_before_and_after() -> None:
    root = CancellationToken()
    before = root.child()
    grandchild = before.child()
    assert not (root.cancelled or before.cancelled or grandchild.cancelled)
    root.cancel("shutting down")
    after = root.child()
    late_grandchild = before.child()
    for token in (root, before, grandchild, after, late_grandchild):
        assert token.cancelled
        assert token.reason == "shutting down"
        assert token.wait(0) is True
        with pytest.raises(Cancelled, match="shutting down"):
            token.raise_if_cancelled()


def test_cancelling_a_child_leaves_its_parent_and_siblings_alone() -> None:
    root = CancellationToken()
    one, two = root.child(), root.child()
    one.cancel("timed out")
    assert one.cancelled and not root.cancelled and not two.cancelled
    assert two.wait(0) is False
    two.raise_if_cancelled()


def test_the_first_reason_is_kept() -> None:
    root = CancellationToken()
    child = root.child()
    child.cancel("the call timed out")
    root.cancel("fenced by generation 2")
    root.cancel("shutting down")
    assert root.reason == "fenced by generation 2"
    assert child.reason == "the call timed out"


def test_callbacks_run_once_with_the_reason() -> None:
    token = CancellationToken()
    calls: list[str] = []
    token.on_cancel(lambda reason: calls.append(f"early:{reason}"))
    token.cancel("stop")
    token.cancel("again")
    token.on_cancel(lambda reason: calls.append(f"late:{reason}"))  # runs at once
    assert calls == ["early:stop", "late:stop"]


def test_callbacks_of_children_run_when_the_parent_is_cancelled() -> None:
    root = CancellationToken()
    calls: list[str] = []
    child = root.child()
    child.on_cancel(lambda reason: calls.append(f"child:{reason}"))
    root.on_cancel(lambda reason: calls.append(f"root:{reason}"))
    root.cancel("bye")
    child.cancel("ignored")
    assert sorted(calls) == ["child:bye", "root:bye"]


def test_a_failing_callback_does_not_stop_the_others_or_the_siblings() -> None:
    root = CancellationToken()
    first, second = root.child(), root.child()
    calls: list[str] = []

    def broken(reason: str) -> None:
        raise ProcessLookupError("the process had already exited")

    first.on_cancel(broken)
    first.on_cancel(lambda reason: calls.append("first"))
    second.on_cancel(lambda reason: calls.append("second"))
    root.on_cancel(lambda reason: calls.append("root"))
    root.cancel("shutting down")
    assert first.cancelled and second.cancelled
    assert sorted(calls) == ["first", "root", "second"]


def test_wait_wakes_when_cancelled_from_another_thread() -> None:
    token = CancellationToken().child()
    started = threading.Event()
    woke: list[bool] = []

    def wait() -> None:
        started.set()
        woke.append(token.wait(10))

    thread = threading.Thread(target=wait)
    thread.start()
    assert started.wait(5)
    token.cancel("now")
    thread.join(5)
    assert woke == [True]
    assert token.wait(0.01) is True


def test_wait_times_out_when_not_cancelled() -> None:
    assert CancellationToken().wait(0.01) is False


def test_children_created_while_cancelling_are_all_cancelled() -> None:
    root = CancellationToken()
    children: list[CancellationToken] = []
    stop = threading.Event()

    def spawn() -> None:
        while not stop.is_set():
            children.append(root.child())

    threads = [threading.Thread(target=spawn) for _ in range(3)]
    for thread in threads:
        thread.start()
    root.cancel("race")
    stop.set()
    for thread in threads:
        thread.join(5)
    assert children
    assert all(child.cancelled and child.reason == "race" for child in children)


def test_a_finished_child_is_not_kept_alive_by_its_parent() -> None:
    import gc
    import weakref

    root = CancellationToken()
    child = root.child()
    ref = weakref.ref(child)
    del child
    gc.collect()
    assert ref() is None
    root.cancel("fine")
