"""Telegram's "typing" indicator while a turn runs, on a thread of its own.

An event's indicator is shown from ``after_s`` after the event went to the
inbox, and again every few seconds (Telegram shows it for 5 s, or until the
bot's next message), until its first message is sent or it finishes. A reply
must never be followed by the indicator it ended: ``before_reply`` takes the
event's indicator away and then waits for a ``sendChatAction`` already under
way for it, which the loop picks and marks under the same lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from enact.channels.telegram_api import BotApi, BotApiError

log = logging.getLogger(__name__)

TYPING_AFTER_S = 2.0
_TYPING_EVERY_S = 4.5
"""Telegram shows "typing" for 5 s, or until the bot's next message."""
_TYPING_CALL_S = 10.0


@dataclass(slots=True)
class _Typing:
    chat: int | str
    thread_id: str
    since: float
    sent_at: float = 0.0


class TypingIndicators:
    def __init__(self, api: BotApi, *, after_s: float = TYPING_AFTER_S) -> None:
        self._api = api
        self._after_s = after_s
        self._lock = threading.Condition()
        self._shown: dict[str, _Typing] = {}
        """Event id → its indicator, from before the event goes to the inbox
        until its first message is sent or it finishes."""
        self._sending: set[str] = set()
        """Events whose ``sendChatAction`` is under way: their reply waits for
        it, so that no "typing" reaches the chat after the reply."""

    def start(self, event_id: str, *, chat: int | str, thread_id: str) -> None:
        with self._lock:
            self._shown[event_id] = _Typing(chat=chat, thread_id=thread_id, since=time.monotonic())

    def drop(self, event_id: str) -> None:
        """The event finished (or was let go): no indicator for it any more."""
        with self._lock:
            self._shown.pop(event_id, None)

    def before_reply(self, event_id: str) -> None:
        """No indicator for the event from now on, and none still on its way."""
        with self._lock:
            self._shown.pop(event_id, None)
            self._lock.wait_for(lambda: event_id not in self._sending, timeout=_TYPING_CALL_S)

    def run(self, stopping: threading.Event) -> None:
        """Every indicator due is picked under the lock and marked as being
        sent; ``before_reply`` takes the event's indicator away under the same
        lock and then waits for such a send to end, so "typing" never
        reaches a chat after the reply it announced."""
        while not stopping.wait(0.25):
            now = time.monotonic()
            with self._lock:
                due = {event_id: t for event_id, t in self._shown.items()
                       if now - t.since >= self._after_s and now - t.sent_at >= _TYPING_EVERY_S}
                for typing in due.values():
                    typing.sent_at = now
                self._sending.update(due)
            for event_id, typing in due.items():
                with self._lock:
                    if event_id not in self._shown:  # replied meanwhile: no indicator now
                        self._sending.discard(event_id)
                        self._lock.notify_all()
                        continue
                params: dict[str, Any] = {"chat_id": typing.chat, "action": "typing"}
                if typing.thread_id.isdigit():
                    params["message_thread_id"] = int(typing.thread_id)
                try:
                    self._api.call("sendChatAction", params, timeout_s=_TYPING_CALL_S)
                except BotApiError as error:
                    log.debug("telegram: typing indicator not shown: %s", error)
                finally:
                    with self._lock:
                        self._sending.discard(event_id)
                        self._lock.notify_all()
