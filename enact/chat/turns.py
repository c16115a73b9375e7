"""Reading the turn log: the oldest turns after a cursor, or the newest."""

from __future__ import annotations

import lmdb

from enact.chat.inbox_records import RecordLog
from enact.chat.records import LoggedTurn
from enact.messages.inbox import ReadTurns, Turn, Turns, conversation_key

MAX_TURNS_PER_READ = 1000


def read_turns(txn: lmdb.Transaction, turns: RecordLog[LoggedTurn], message: ReadTurns) -> Turns:
    """``message.conversation`` matches a conversation key (``channel:id``) or
    a conversation id; "" matches every turn."""
    wanted = message.conversation

    def matches(turn: LoggedTurn) -> bool:
        return not wanted or wanted in (conversation_key(turn.channel, turn.conversation), turn.conversation)

    if message.last > 0:
        count = min(message.last, MAX_TURNS_PER_READ)
        newest: list[Turn] = []
        for sequence, turn in turns.iterate(turns.log.iterate_backwards(txn, down_to=message.since)):
            if len(newest) >= count:
                break
            if matches(turn):
                newest.append(turn.at(sequence))
        # Everything up to the log's end has been looked at: read on from there.
        end = max(message.since, turns.log.last_cursor(txn))
        return Turns(turns=tuple(reversed(newest)), next_cursor=end)
    limit = max(0, min(message.limit, MAX_TURNS_PER_READ))
    oldest: list[Turn] = []
    cursor = message.since
    for sequence, turn in turns.iterate(turns.log.iterate_from(txn, message.since)):
        if len(oldest) >= limit:
            break
        cursor = sequence
        if matches(turn):
            oldest.append(turn.at(sequence))
    return Turns(turns=tuple(oldest), next_cursor=cursor)
