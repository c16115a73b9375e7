"""Notices: messages enact sends the owner unasked (a task's outcome).

A notice is stored as a receipt of its own event, already replied, so it is
delivered, retried, resumed after a restart and logged as a turn exactly
like a reply; its event's identity (channel, conversation, notice id) makes
it once. Its ``session_note`` waits in the sessions store for the
conversation's next call (``sessions.AddNote``), which carries it once."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from enact.chat.records import Receipt, ReceiptStatus, TurnOutcome, new_receipt
from enact.messages.inbox import NOTICE_MESSAGE_ID, ChatEvent, Notify

NOTES_HEAD = "Since the last turn of this conversation (from the host, for context; not a request):"
"""Leads the notes (``Notify.session_note``) the next call on the conversation's session carries."""


def notes_text(notes: Sequence[str]) -> str:
    """The notes as the next call's prompt begins with them."""
    return "\n".join((NOTES_HEAD, *(f"- {note}" for note in notes)))


def notice_event(message: Notify) -> ChatEvent:
    return ChatEvent(channel=message.channel, conversation=message.conversation,
                     message_id=f"{NOTICE_MESSAGE_ID}{message.notice_id}", text="")


def notice_receipt(message: Notify, *, generation: int, now: float) -> Receipt:
    receipt = new_receipt(notice_event(message), origin=message.origin, generation=generation, now=now)
    return dataclasses.replace(receipt, status=ReceiptStatus.REPLIED, reply=message.text,
                               outcome=TurnOutcome.REPLIED)
