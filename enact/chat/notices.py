"""Notices: messages enact sends the owner unasked (a task's outcome).

A notice is stored as a receipt of its own event, already replied, so it is
delivered, retried, resumed after a restart and logged as a turn exactly
like a reply; its event's identity (channel, conversation, notice id) makes
it once."""

from __future__ import annotations

import dataclasses

from enact.chat.records import Receipt, ReceiptStatus, TurnOutcome, new_receipt
from enact.messages.inbox import NOTICE_MESSAGE_ID, ChatEvent, Notify

NOTE_PROMPT = (
    "Context note for this conversation, from the host (recent context, not a request; do not act on it, "
    "answer only OK):\n"
)


def notice_event(message: Notify) -> ChatEvent:
    return ChatEvent(channel=message.channel, conversation=message.conversation,
                     message_id=f"{NOTICE_MESSAGE_ID}{message.notice_id}", text="")


def notice_receipt(message: Notify, *, generation: int, now: float) -> Receipt:
    receipt = new_receipt(notice_event(message), origin=message.origin, generation=generation, now=now)
    return dataclasses.replace(receipt, status=ReceiptStatus.REPLIED, reply=message.text,
                               outcome=TurnOutcome.REPLIED)
