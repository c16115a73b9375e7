"""The group committer: write batches flushed at once share one durable
commit, on a real LMDB environment in a temporary directory."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

from enact.actors._batching import WriteBatch
from enact.storage import Storage, Store
from enact.storage._committer import GroupCommitter, GroupInterrupted, WriteOutcome

from conftest import wait_for

Write = Callable[[lmdb.Transaction], Any]


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    opened = Storage(tmp_path / "state", map_size=1 << 20)
    try:
        yield opened
    finally:
        opened.close()


def _committer(storage: Storage) -> GroupCommitter:
    committer = storage.committer
    assert committer is not None, "group commit is on by default"
    return committer


class _Held:
    """A leader held inside its transaction until the others have queued."""

    def __init__(self, storage: Storage, store: Store) -> None:
        self.storage = storage
        self.inside = threading.Event()
        self.release = threading.Event()
        self.outcomes: dict[str, list[WriteOutcome] | BaseException] = {}
        self._threads: list[threading.Thread] = []
        table = store.table("things")

        def hold(txn: lmdb.Transaction) -> str:
            table.put(txn, b"leader", {"n": 0})
            self.inside.set()
            self.release.wait(5)
            return "leader"

        self.submit("leader", store, [hold])
        self.inside.wait(5)

    def submit(self, name: str, store: Store, fns: list[Write]) -> None:
        def run() -> None:
            try:
                self.outcomes[name] = store.write_each(fns)
            except BaseException as error:
                self.outcomes[name] = error

        thread = threading.Thread(target=run, name=name)
        self._threads.append(thread)
        thread.start()

    def finish(self, queued: int) -> None:
        assert _committer(self.storage).until_waiting(queued, timeout=5), f"{queued} batches did not queue"
        self.release.set()
        for thread in self._threads:
            thread.join(5)


def _put(store: Store, key: bytes, result: object = None) -> Write:
    table = store.table(store.owner)

    def write(txn: lmdb.Transaction) -> object:
        table.put(txn, key, {"by": store.owner})
        return result if result is not None else key.decode()

    return write


def _stored(store: Store, key: bytes) -> object:
    table = store.table(store.owner)
    return store.read(lambda txn: table.get(txn, key))


def test_batches_flushed_meanwhile_by_other_actors_share_the_next_commit(storage: Storage) -> None:
    leader = storage.grant("things", ["things"])
    inbox, sessions = storage.grant("inbox", ["inbox"]), storage.grant("sessions", ["sessions"])
    held = _Held(storage, leader)
    held.submit("inbox", inbox, [_put(inbox, b"a"), _put(inbox, b"b")])
    held.submit("sessions", sessions, [_put(sessions, b"c")])
    held.finish(queued=2)

    committer = _committer(storage)
    assert (committer.commits, committer.batches) == (2, 3)  # the leader's, then one for both others
    assert held.outcomes["inbox"] == [WriteOutcome(ok=True, value="a"), WriteOutcome(ok=True, value="b")]
    assert held.outcomes["sessions"] == [WriteOutcome(ok=True, value="c")]
    assert _stored(inbox, b"b") == {"by": "inbox"}
    assert _stored(sessions, b"c") == {"by": "sessions"}


def test_a_write_that_raises_in_a_shared_commit_fails_only_its_own_caller(storage: Storage) -> None:
    leader = storage.grant("things", ["things"])
    inbox, sessions = storage.grant("inbox", ["inbox"]), storage.grant("sessions", ["sessions"])
    table = inbox.table("inbox")

    def half_then_raise(txn: lmdb.Transaction) -> None:
        table.put(txn, b"half", {"by": "inbox"})
        raise ValueError("a defect in one write")

    held = _Held(storage, leader)
    held.submit("inbox", inbox, [_put(inbox, b"before"), half_then_raise, _put(inbox, b"after")])
    held.submit("sessions", sessions, [_put(sessions, b"c")])
    held.finish(queued=2)

    outcomes = held.outcomes["inbox"]
    assert isinstance(outcomes, list)
    assert [outcome.ok for outcome in outcomes] == [True, False, True]
    assert isinstance(outcomes[1].value, ValueError)
    assert _stored(inbox, b"half") is None  # rolled back alone
    assert _stored(inbox, b"before") == _stored(inbox, b"after") == {"by": "inbox"}
    assert held.outcomes["sessions"] == [WriteOutcome(ok=True, value="c")]


class Superseded(Exception):
    pass


def test_the_fence_is_checked_in_the_shared_transaction_and_a_fenced_commit_lands_nothing(
    storage: Storage,
) -> None:
    leader = storage.grant("things", ["things"])
    inbox, sessions = storage.grant("inbox", ["inbox"]), storage.grant("sessions", ["sessions"])
    generation = {"current": 1}
    guarded: list[bool] = []

    def guard(txn: lmdb.Transaction) -> None:
        # What the guard sees is the transaction the writes land in: the
        # leader's record is there once its own commit is done.
        guarded.append(leader.table("things").get(txn, b"leader") is not None)
        if generation["current"] != 1:
            raise Superseded("generation 1 was superseded")

    storage.set_write_guard(guard)
    held = _Held(storage, leader)
    held.submit("inbox", inbox, [_put(inbox, b"a")])
    held.submit("sessions", sessions, [_put(sessions, b"c")])
    generation["current"] = 2  # a newer daemon took the home while the leader committed
    held.finish(queued=2)

    assert guarded == [False, True]  # once per shared transaction, before any write
    assert held.outcomes["leader"] == [WriteOutcome(ok=True, value="leader")]
    for name in ("inbox", "sessions"):
        assert isinstance(held.outcomes[name], Superseded)
    assert _stored(inbox, b"a") is None
    assert _stored(sessions, b"c") is None


def test_an_interrupt_in_one_write_is_raised_to_its_caller_and_fails_the_others_plainly(
    storage: Storage,
) -> None:
    leader = storage.grant("things", ["things"])
    inbox = storage.grant("inbox", ["inbox"])

    def interrupt(txn: lmdb.Transaction) -> None:
        raise KeyboardInterrupt

    held = _Held(storage, leader)
    held.submit("inbox", inbox, [_put(inbox, b"a")])
    held.submit("interrupted", leader, [interrupt])
    held.finish(queued=2)

    assert isinstance(held.outcomes["interrupted"], KeyboardInterrupt | GroupInterrupted)
    assert isinstance(held.outcomes["inbox"], GroupInterrupted | KeyboardInterrupt)
    assert {type(held.outcomes["interrupted"]), type(held.outcomes["inbox"])} == {KeyboardInterrupt,
                                                                                  GroupInterrupted}
    assert _stored(inbox, b"a") is None
    # The committer goes on: the next batch commits.
    assert inbox.write_each([_put(inbox, b"later")]) == [WriteOutcome(ok=True, value="later")]


def test_a_full_map_during_a_shared_commit_grows_and_every_batch_lands(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "state", map_size=1 << 20)
    try:
        stores = [storage.grant(f"actor{n}", [f"actor{n}"]) for n in range(4)]
        blob = "x" * 200_000

        def big(store: Store, n: int) -> Write:
            table = store.table(store.owner)
            return lambda txn: table.put(txn, b"%d" % n, {"blob": blob})

        errors: list[BaseException] = []

        def writer(store: Store) -> None:
            try:
                for n in range(4):
                    outcomes = store.write_each([big(store, n)])
                    if not all(outcome.ok for outcome in outcomes):
                        errors.append(RuntimeError(repr(outcomes)))
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=writer, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        assert storage.stats().map_bytes > 1 << 20
        for store in stores:
            assert store.read(lambda txn, store=store: store.table(store.owner).count(txn)) == 4
    finally:
        storage.close()


def test_without_group_commit_each_batch_commits_on_its_own(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "state", map_size=1 << 20, group_commit=False)
    try:
        assert storage.committer is None
        store = storage.grant("inbox", ["inbox"])
        table = store.table("inbox")

        def fails(txn: lmdb.Transaction) -> None:
            table.put(txn, b"half", {})
            raise ValueError("a defect")

        outcomes = store.write_each([_put(store, b"a"), fails])
        assert [outcome.ok for outcome in outcomes] == [True, False]
        assert _stored(store, b"a") == {"by": "inbox"}
        assert _stored(store, b"half") is None
    finally:
        storage.close()


def test_a_batchs_callbacks_run_in_its_own_thread_once_its_shared_commit_is_visible(storage: Storage) -> None:
    leader = storage.grant("things", ["things"])
    inbox, sessions = storage.grant("inbox", ["inbox"]), storage.grant("sessions", ["sessions"])
    held = _Held(storage, leader)
    seen: dict[str, tuple[str, object, object]] = {}
    threads = []
    for store in (inbox, sessions):
        batch = WriteBatch(store, owner=store.owner)

        def after(_: object, store: Store = store) -> None:
            # A new read transaction sees both writes: the commit they shared is done.
            seen[store.owner] = (threading.current_thread().name, _stored(inbox, b"k"), _stored(sessions, b"k"))

        batch.stage(_put(store, b"k"), after)
        thread = threading.Thread(target=batch.flush, name=f"{store.owner}-thread")
        threads.append(thread)
        thread.start()
    held.finish(queued=2)
    for thread in threads:
        thread.join(5)

    assert _committer(storage).commits == 2
    assert seen == {
        "inbox": ("inbox-thread", {"by": "inbox"}, {"by": "sessions"}),
        "sessions": ("sessions-thread", {"by": "inbox"}, {"by": "sessions"}),
    }


# -- writes nobody waits for: offered to the next commit --------------------------------


def test_told_writes_are_offered_and_ride_the_next_commit_another_actor_leads(storage: Storage) -> None:
    leader = storage.grant("things", ["things"])
    inbox, sessions = storage.grant("inbox", ["inbox"]), storage.grant("sessions", ["sessions"])
    held = _Held(storage, leader)  # no commit can carry the offer while this one is open
    batch = WriteBatch(sessions, owner="sessions")
    ran: list[tuple[object, str]] = []
    batch.stage(_put(sessions, b"mapping"), lambda value: ran.append((value, threading.current_thread().name)),
                told=True)

    batch.flush_idle()
    assert not batch.pending and batch.busy and ran == []  # offered: nothing waited for it
    held.submit("inbox", inbox, [_put(inbox, b"receipt")])
    held.finish(queued=1)

    committer = _committer(storage)
    assert (committer.commits, committer.batches) == (2, 3)  # the held one, then one for the offer and the inbox
    assert held.outcomes["inbox"] == [WriteOutcome(ok=True, value="receipt")]
    assert not batch.busy and _stored(sessions, b"mapping") == {"by": "sessions"}
    batch.settle()  # the callbacks run in the owner's thread, at its next message
    assert ran == [("mapping", threading.current_thread().name)]


def test_an_offered_write_no_other_commit_carries_is_committed_by_the_committers_thread(storage: Storage) -> None:
    sessions = storage.grant("sessions", ["sessions"])
    offered = sessions.offer([_put(sessions, b"mapping")])
    assert offered is not None
    wait_for(lambda: offered.done, timeout=10, what="the offered write's commit")
    assert offered.result() == [WriteOutcome(ok=True, value="mapping")]
    assert _stored(sessions, b"mapping") == {"by": "sessions"}
    assert _committer(storage).commits == 1


def test_a_batch_with_a_write_someone_waits_for_commits_now_and_flush_waits_for_what_was_offered(
        storage: Storage) -> None:
    sessions = storage.grant("sessions", ["sessions"])
    batch = WriteBatch(sessions, owner="sessions")
    ran: list[object] = []
    batch.stage(_put(sessions, b"told"), ran.append, told=True)
    batch.stage(_put(sessions, b"asked"), ran.append)
    batch.flush_idle()
    assert batch.offered == [] and not batch.busy and ran == ["told", "asked"]  # committed now, in order

    batch.stage(_put(sessions, b"later"), ran.append, told=True)
    batch.flush_idle()
    batch.flush()  # before a read: whatever was offered is durable, its callbacks run
    assert not batch.busy and ran == ["told", "asked", "later"]
    assert _stored(sessions, b"later") == {"by": "sessions"}


def test_closing_the_storage_commits_what_is_still_offered(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "state", map_size=1 << 20)
    sessions = storage.grant("sessions", ["sessions"])
    assert sessions.offer([_put(sessions, b"mapping")]) is not None
    storage.close()

    reopened = Storage(tmp_path / "state", map_size=1 << 20)
    try:
        again = reopened.grant("sessions", ["sessions"])
        assert _stored(again, b"mapping") == {"by": "sessions"}
    finally:
        reopened.close()
