"""Reading the turn log: the oldest turns after a cursor, or the newest.

A page holds at most ``PAGE_BYTES`` of turns, so that the reply fits the
control socket's frame however large the turns are: a page cut short says
so (``Turns.cut_short``), and a single turn larger than a page on its own
is clipped, with a note in each clipped text.
"""

from __future__ import annotations

import dataclasses

import lmdb
import orjson

from enact.chat.inbox_records import TurnLog
from enact.messages._framing import PAGE_BYTES
from enact.messages.inbox import ActionRecord, ReadTurns, Turn, Turns, conversation_key

MAX_TURNS_PER_READ = 1000
CLIPPED_TEXT_CHARS = 32_000
CLIPPED_RECEIPT_CHARS = 2_000


def read_turns(txn: lmdb.Transaction, turns: TurnLog, message: ReadTurns) -> Turns:
    """``message.conversation`` matches a conversation key (``channel:id``) or
    a conversation id; "" matches every turn."""
    wanted = message.conversation

    def matches(turn: Turn) -> bool:
        return not wanted or wanted in (conversation_key(turn.channel, turn.conversation), turn.conversation)

    page = _Page()
    if message.last > 0:
        count = min(message.last, MAX_TURNS_PER_READ)
        for _, turn in turns.iterate(turns.log.iterate_backwards(txn, down_to=message.since)):
            if len(page.turns) >= count:
                break
            if matches(turn) and not page.add(turn):
                break  # the older ones are left out: the note says so
        # Everything up to the log's end has been looked at: read on from there.
        end = max(message.since, turns.log.last_cursor(txn))
        return Turns(turns=tuple(reversed(page.turns)), next_cursor=end, cut_short=page.full)
    limit = max(0, min(message.limit, MAX_TURNS_PER_READ))
    cursor = message.since
    for sequence, turn in turns.iterate(turns.log.iterate_from(txn, message.since)):
        if len(page.turns) >= limit:
            break
        if matches(turn) and not page.add(turn):
            break  # read on from the cursor before it
        cursor = sequence
    return Turns(turns=tuple(page.turns), next_cursor=cursor, cut_short=page.full)


class _Page:
    """Turns up to PAGE_BYTES; the first one always goes in, clipped if it must."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.size = 0
        self.full = False

    def add(self, turn: Turn) -> bool:
        size = len(orjson.dumps(turn))
        if self.turns and self.size + size > PAGE_BYTES:
            self.full = True
            return False
        if size > PAGE_BYTES:
            turn = _clipped(turn)
        self.turns.append(turn)
        self.size += size
        return True


def _clipped(turn: Turn) -> Turn:
    return dataclasses.replace(
        turn,
        message=_clip(turn.message, CLIPPED_TEXT_CHARS),
        reply=_clip(turn.reply, CLIPPED_TEXT_CHARS),
        error=_clip(turn.error, CLIPPED_RECEIPT_CHARS),
        actions=tuple(_clipped_action(action) for action in turn.actions),
    )


def _clipped_action(action: ActionRecord) -> ActionRecord:
    args = action.args
    if len(orjson.dumps(args)) > CLIPPED_RECEIPT_CHARS:
        args = {"clipped": f"{len(orjson.dumps(args))} bytes of arguments left out"}
    return dataclasses.replace(action, args=args, receipt=_clip(action.receipt, CLIPPED_RECEIPT_CHARS))


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [clipped: {len(text) - limit} more characters]"
