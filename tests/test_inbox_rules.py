"""The inbox's rules (enact.chat.inbox) on real LMDB, without threads or
actors: each message is a method call with a plain ``now``, each commit
returns the effects the actor would carry out, and a second ``Inbox`` on the
same store is the daemon that starts after a kill -9."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from enact.actors._batching import Deferred
from enact.channels import OutgoingReply
from enact.chat.inbox import OUTBOX, Inbox
from enact.chat.inbox_effects import (
    Acknowledge,
    ConversationDone,
    Count,
    CountDelivery,
    Effect,
    Finished,
    Later,
    Publish,
    Tell,
    ToConversation,
)
from enact.chat.inbox_records import DATABASES, IDS_SETTLED_AT, RECENT_KEPT, SETTLE_AT_MOST, SETTLE_EVERY
from enact.messages.common import HUMAN_CLI, NotFound
from enact.messages.inbox import (
    Accepted,
    ChatEvent,
    Delivered,
    HandleEvent,
    Ignored,
    NoticeTaken,
    Notify,
    ReadTurns,
    Receive,
    Retry,
    TurnFailed,
    TurnFinished,
    TurnLogged,
)
from enact.messages.outbox import Deliver, DeliveryOutcome
from enact.messages.sessions import AddNote
from enact.ownership import ConversationLock
from enact.retry import Backoff
from enact.storage import Storage, Store

NOW = 1_700_000_000.0
ORIGINS = {"local": HUMAN_CLI, "telegram": "chat:telegram"}


class Daemon:
    """One daemon's inbox rules and the conversation pool's bookkeeping: the
    effects are carried out here as the actor carries them out."""

    def __init__(self, store: Store, *, generation: int, allowed: tuple[str, ...] = (),
                 deliver_at_once: Callable[[OutgoingReply], bool] | None = None) -> None:
        self.running: set[str] = set()
        self.inbox = Inbox(store, name="inbox", generation=generation, channels=ORIGINS.keys(),
                           lock=ConversationLock(allowed, ORIGINS),
                           attempts=Backoff(first_s=0.2, factor=2.0, attempts=3), running=self.running.__contains__,
                           deliver_at_once=deliver_at_once)

    def commit(self) -> list[Effect]:
        effects = self.inbox.commit()
        for effect in effects:
            match effect:
                case ToConversation(work=work, message=HandleEvent()):
                    self.running.add(work)
                case ConversationDone(work=work):
                    self.running.discard(work)
        return effects


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state")
    yield storage.grant("inbox", DATABASES)
    storage.close()


def event(message_id: str = "m1", *, channel: str = "local", conversation: str = "cli",
          cursor: int | None = None) -> ChatEvent:
    return ChatEvent(channel=channel, conversation=conversation, message_id=message_id, text="hello", cursor=cursor)


def answered(reply: object) -> object:
    assert isinstance(reply, Deferred) and reply.done
    return reply.wait(0)


def handed(effects: list[Effect]) -> list[HandleEvent]:
    return [e.message for e in effects if isinstance(e, ToConversation) and isinstance(e.message, HandleEvent)]


def deliveries(effects: list[Effect]) -> list[Deliver]:
    return [e.message for e in effects if isinstance(e, Tell) and e.actor == OUTBOX and isinstance(e.message, Deliver)]


def test_an_event_is_committed_then_handed_to_its_conversation_once_even_when_redelivered_meanwhile(
        store: Store) -> None:
    daemon = Daemon(store, generation=1)
    first = daemon.inbox.receive(Receive(event=event(), origin=HUMAN_CLI), NOW)
    again = daemon.inbox.receive(Receive(event=event(), origin=HUMAN_CLI), NOW)
    assert isinstance(first, Deferred) and not first.done  # nothing is answered before its commit

    effects = daemon.commit()

    eid = event().event_id
    assert answered(first) == Accepted(event_id=eid, duplicate=False, in_flight=True)
    assert answered(again) == Accepted(event_id=eid, duplicate=True, in_flight=True)
    assert [(h.event_id, h.attempt, h.origin) for h in handed(effects)] == [(eid, 1, HUMAN_CLI)]
    assert [e for e in effects if isinstance(e, Count)] == [Count("local", "accepted"), Count("local", "duplicate")]


def test_a_reply_is_delivered_then_logged_as_the_turn_the_protocol_sends_and_the_cursor_acknowledged(
        store: Store) -> None:
    daemon = Daemon(store, generation=1)
    daemon.inbox.receive(Receive(event=event(cursor=5), origin=HUMAN_CLI), NOW)
    daemon.commit()
    eid = event().event_id

    daemon.inbox.turn_finished(TurnFinished(event_id=eid, reply="hi there", actions=()), NOW)
    stored = daemon.commit()
    assert ConversationDone(eid) in stored
    (deliver,) = deliveries(stored)
    assert (deliver.text, deliver.first, deliver.reply_to, deliver.replied_by) == ("hi there", True, "inbox", 1)

    daemon.inbox.delivered(Delivered(event_id=eid, outcome=DeliveryOutcome.DELIVERED, error=""), NOW + 1)
    done = daemon.commit()
    outcome = daemon.inbox.outcome(eid)
    assert done == [Acknowledge("local", 5), Count("local", "replied"), Finished("local", outcome),
                    Publish(TurnLogged(event_id=eid, cursor=1, outcome="replied", conversation_key="local:cli"))]
    (turn,) = daemon.inbox.turns(ReadTurns()).turns
    assert (turn.cursor, turn.reply, turn.time, turn.outcome) == (1, "hi there", NOW + 1, "replied")
    assert daemon.inbox.cursor("local").cursor == 5
    # The outbox's answer told again changes nothing.
    daemon.inbox.delivered(Delivered(event_id=eid, outcome=DeliveryOutcome.DELIVERED, error=""), NOW + 2)
    assert daemon.commit() == []


@pytest.mark.parametrize("taken", [True, False])
def test_a_reply_its_channel_takes_at_once_is_stored_and_its_turn_logged_in_one_commit(store: Store,
                                                                                     taken: bool) -> None:
    offered: list[OutgoingReply] = []

    def deliver_at_once(reply: OutgoingReply) -> bool:
        offered.append(reply)
        return taken

    daemon = Daemon(store, generation=1, deliver_at_once=deliver_at_once)
    daemon.inbox.receive(Receive(event=event(cursor=5), origin=HUMAN_CLI), NOW)
    daemon.commit()
    eid = event().event_id

    daemon.inbox.turn_finished(TurnFinished(event_id=eid, reply="hi there", actions=()), NOW + 1)
    effects = daemon.commit()

    assert [(r.event_id, r.channel, r.message_id, r.text, r.attempt) for r in offered] == [
        (eid, "local", "m1", "hi there", 1)]
    outcome = daemon.inbox.outcome(eid)
    if not taken:  # the outbox delivers it, as any reply
        assert outcome.status == "replied" and [d.text for d in deliveries(effects)] == ["hi there"]
        assert daemon.inbox.turns(ReadTurns()).turns == ()
        return
    assert effects == [ConversationDone(eid), CountDelivery("local"), Acknowledge("local", 5),
                       Count("local", "replied"), Finished("local", outcome),
                       Publish(TurnLogged(event_id=eid, cursor=1, outcome="replied", conversation_key="local:cli"))]
    (turn,) = daemon.inbox.turns(ReadTurns()).turns
    assert (turn.reply, turn.time, turn.outcome) == ("hi there", NOW + 1, "replied")
    # Told again (a conversation's answer repeated), nothing is offered, stored or logged twice.
    daemon.inbox.turn_finished(TurnFinished(event_id=eid, reply="hi there", actions=()), NOW + 2)
    assert [e for e in daemon.commit() if not isinstance(e, ConversationDone)] == [] and len(offered) == 1


def _recent_and_older(store: Store, daemon: Daemon) -> dict[str, tuple[int, int]]:
    records = daemon.inbox.records
    tables = {"receipts": records.receipts.table, "turns": records.turns.table, "ids": records.ids}
    return store.read(lambda txn: {name: (table.recent_count(txn), table.count(txn) - table.recent_count(txn))
                                   for name, table in tables.items()})


def test_old_receipts_and_turns_move_to_the_older_trees_and_every_event_and_turn_is_still_found(
        store: Store) -> None:
    daemon = Daemon(store, generation=1, deliver_at_once=lambda reply: True)
    events = [event(f"m{n}") for n in range(RECENT_KEPT + 3 * SETTLE_EVERY)]
    for sent in events:
        daemon.inbox.receive(Receive(event=sent, origin=HUMAN_CLI), NOW)
    daemon.commit()
    # A settle every SETTLE_EVERY receipts, each leaving the newest RECENT_KEPT; no turn is logged yet.
    assert _recent_and_older(store, daemon) == {"receipts": (RECENT_KEPT, 3 * SETTLE_EVERY), "turns": (0, 0),
                                                "ids": (len(events), 0)}
    for n, sent in enumerate(events):
        daemon.inbox.turn_finished(TurnFinished(event_id=sent.event_id, reply=f"reply {n}", actions=()), NOW + n)
    daemon.commit()
    before = daemon.inbox.turns(ReadTurns(limit=1000)).turns

    restarted = Daemon(store, generation=2, deliver_at_once=lambda reply: True)
    restarted.inbox.recover()  # which settles what the last daemon left
    assert not handed(restarted.commit())
    assert _recent_and_older(store, restarted)["turns"] == (RECENT_KEPT, 3 * SETTLE_EVERY)
    assert restarted.inbox.turns(ReadTurns(limit=1000)).turns == before
    assert [t.reply for t in restarted.inbox.turns(ReadTurns(last=2)).turns] == [
        f"reply {len(events) - 2}", f"reply {len(events) - 1}"]
    assert [t.cursor for t in restarted.inbox.turns(ReadTurns(since=3, limit=2)).turns] == [4, 5]
    # The oldest event, its receipt in the older tree, is still answered once: told again, a duplicate.
    oldest = events[0]
    again = restarted.inbox.receive(Receive(event=oldest, origin=HUMAN_CLI), NOW)
    assert not handed(restarted.commit())
    assert answered(again) == Accepted(event_id=oldest.event_id, duplicate=True, in_flight=False)
    assert restarted.inbox.outcome(oldest.event_id).reply == "reply 0"


def test_the_ids_of_settled_receipts_move_many_at_once_and_a_home_of_one_tree_catches_up_a_batch_a_settle(
        store: Store) -> None:
    """A home written before the trees were two has every record in the recent ones."""
    daemon = Daemon(store, generation=1)
    records = daemon.inbox.records
    count = SETTLE_AT_MOST + IDS_SETTLED_AT
    sent = [event(f"m{n}") for n in range(count)]
    store.write(lambda txn: [daemon.inbox.rules.receive(txn, e, origin=HUMAN_CLI, generation=1, now=NOW) for e in sent])

    assert store.write(records.settle) is True  # SETTLE_AT_MOST moved: more are left
    assert _recent_and_older(store, daemon) == {
        "receipts": (count - SETTLE_AT_MOST, SETTLE_AT_MOST), "turns": (0, 0),
        "ids": (count - SETTLE_AT_MOST, SETTLE_AT_MOST)}
    assert store.write(records.settle) is False
    kept = RECENT_KEPT
    assert _recent_and_older(store, daemon) == {"receipts": (kept, count - kept), "turns": (0, 0),
                                                "ids": (kept, count - kept)}
    found = store.read(lambda txn: [records.find(txn, e.event_id) for e in sent])
    assert [receipt.event_id for _, receipt in found] == [e.event_id for e in sent]
    # Under IDS_SETTLED_AT recent ids, the ids wait for a larger batch.
    assert store.write(records.settle) is False
    assert _recent_and_older(store, daemon)["ids"] == (kept, count - kept)


def test_a_failed_turn_is_retried_later_then_given_up_with_one_diagnostic_reply(store: Store) -> None:
    daemon = Daemon(store, generation=1)
    daemon.inbox.receive(Receive(event=event(), origin=HUMAN_CLI), NOW)
    daemon.commit()
    eid = event().event_id

    for attempt in (1, 2):
        daemon.inbox.turn_failed(TurnFailed(event_id=eid, error_class="RuntimeTimeout", error="slow"))
        effects = daemon.commit()
        assert Later(0.2 * 2 ** (attempt - 1), Retry(event_id=eid)) in effects
        daemon.inbox.retry(eid)
        assert [h.attempt for h in handed(daemon.commit())] == [attempt + 1]

    daemon.inbox.turn_failed(TurnFailed(event_id=eid, error_class="RuntimeTimeout", error="slow"))
    given_up = daemon.commit()
    (diagnostic,) = deliveries(given_up)
    assert "after 3 attempts; failure class: RuntimeTimeout" in diagnostic.text
    assert not any(isinstance(e, Later) for e in given_up)


def test_a_retry_of_an_event_still_running_hands_nothing_over(store: Store) -> None:
    daemon = Daemon(store, generation=1)
    daemon.inbox.receive(Receive(event=event(), origin=HUMAN_CLI), NOW)
    daemon.commit()
    daemon.inbox.retry(event().event_id)
    assert handed(daemon.commit()) == []


def test_after_a_kill_the_next_daemon_resumes_the_unfinished_turn_and_delivers_the_stored_reply_again(
        store: Store) -> None:
    before = Daemon(store, generation=1)
    for message_id in ("running", "replied"):
        before.inbox.receive(Receive(event=event(message_id), origin=HUMAN_CLI), NOW)
    before.commit()
    before.inbox.turn_finished(TurnFinished(event_id=event("replied").event_id, reply="kept", actions=()), NOW)
    before.commit()
    # kill -9 here: the delivery of "kept" never reported back, "running" never answered.

    after = Daemon(store, generation=2)
    after.inbox.recover()
    effects = after.commit()

    assert [(h.event_id, h.attempt) for h in handed(effects)] == [(event("running").event_id, 2)]
    (again,) = deliveries(effects)
    assert (again.text, again.first, again.replied_by) == ("kept", False, 1)
    # A redelivery of the resumed event is a duplicate: not handed over twice.
    duplicate = after.inbox.receive(Receive(event=event("running"), origin=HUMAN_CLI), NOW)
    assert handed(after.commit()) == []
    assert answered(duplicate) == Accepted(event_id=event("running").event_id, duplicate=True, in_flight=True)


def test_a_stranger_outside_the_lock_is_ignored_and_its_cursor_passed(store: Store) -> None:
    daemon = Daemon(store, generation=1, allowed=("telegram:owner",))
    stranger = event(channel="telegram", conversation="someone", cursor=9)

    reply = daemon.inbox.receive(Receive(event=stranger, origin="chat:telegram"), NOW)

    assert isinstance(reply, Ignored)
    assert daemon.commit() == [Count("telegram", "not_allowed"), Acknowledge("telegram", 9)]
    assert daemon.inbox.outcome(stranger.event_id) == NotFound(kind="event", id=stranger.event_id)


def test_an_event_of_a_channel_this_daemon_lacks_is_not_found(store: Store) -> None:
    daemon = Daemon(store, generation=1)
    reply = daemon.inbox.receive(Receive(event=event(channel="irc"), origin=HUMAN_CLI), NOW)
    assert reply == NotFound(kind="channel", id="irc")
    assert daemon.commit() == []


def test_a_notice_is_delivered_once_and_its_note_is_kept_for_the_sessions_next_call(store: Store) -> None:
    daemon = Daemon(store, generation=1)
    notice = Notify(channel="local", conversation="cli", notice_id="task:1:1:succeeded", text="Task 1 succeeded",
                    session_note="task 1 is done", origin=HUMAN_CLI, acknowledge_to="tasks")

    daemon.inbox.notify(notice, NOW)
    effects = daemon.commit()

    # The sessions store keeps the note for the conversation's next call,
    # and acknowledges the notice once it holds it.
    noted = Tell("sessions", AddNote(key="local:cli", note_id=notice.notice_id, text="task 1 is done",
                                     acknowledge_to="tasks"))
    (deliver,) = deliveries(effects)
    assert deliver.text == "Task 1 succeeded" and effects[0] == noted
    assert not [e for e in effects if isinstance(e, ToConversation)]  # no model call for the note
    daemon.inbox.notify(notice, NOW + 1)
    assert daemon.commit() == [noted]  # told again: the note is handed on again (the store adds it once)


def test_a_notice_without_a_session_note_is_acknowledged_by_the_inbox(store: Store) -> None:
    daemon = Daemon(store, generation=1)
    notice = Notify(channel="local", conversation="cli", notice_id="update:1", text="Updated", session_note="",
                    origin=HUMAN_CLI, acknowledge_to="tasks")
    daemon.inbox.notify(notice, NOW)
    effects = daemon.commit()
    assert effects[0] == Tell("tasks", NoticeTaken(notice_id="update:1")) and len(deliveries(effects)) == 1
