"""The Telegram channel: long polling with ``getUpdates``, replies with
``sendMessage``.

The cursor is Telegram's ``update_id``. The offset sent to Telegram (which
confirms every update below it, for good) is the cursor the inbox
acknowledged plus one, stepped only over updates this channel itself knows
finished (dropped as unsupported, refused by the lock, or a redelivery of a
finished event); so it never passes an update still processed or retried,
and after a crash Telegram sends the unfinished ones again, which the
inbox's receipts make harmless. While an update is unfinished, Telegram
keeps sending it back at once; the poller then waits for an
acknowledgement before it polls again, rather than spin: 0.5 s after the
first such poll, doubling up to ``REPOLL_WHILE_UNFINISHED.max_s`` (which
bounds how late a new message is seen while a long turn runs), and an
acknowledgement ends the wait at once and starts the doubling afresh.

``sendMessage`` is not idempotent, so the channel does not claim idempotent
delivery: a reply whose outcome a crash left unknown is reported, not sent
twice. Within a running daemon, a send that failed before its request was
written whole is retried as usual (Telegram cannot have acted on half a
request); one whose request went out whole but whose answer was lost is
reported ``unsure``, and the outbox sends it once more, which this channel
marks with ``REPEAT_MARK`` as a possible repeat (Telegram cannot say what a
bot sent, and a lost reply is worse for the owner than a marked duplicate);
a second unsure send is given up (``enact.chat.deliveries``). Parts are cut
to Telegram's full limit (the outbox cuts a stored reply again at each
attempt, so the limit must stay what it was when the reply was stored): the
mark heads the repeated message where it fits, else goes just before it as
a message of its own.

A reply over 4,096 characters reaches ``deliver`` as numbered parts, one
call each, from the outbox, which journals every part. A 429 asking to wait
up to a minute is waited out here; a longer one is handed to the outbox's
retries with its ``retry_after``. Poll errors never stop the daemon: the
poller backs off (1 s doubling to 60 s) and keeps trying; a fenced daemon
stops polling at once.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from enact.channels import DeliveryReport, InboxInlet, OutgoingReply
from enact.channels.telegram_api import (
    BAD_REQUEST,
    BAD_RESPONSE,
    RATE_LIMITED,
    BotApi,
    BotApiError,
)
from enact.channels.telegram_component import NAME
from enact.channels.telegram_text import MAX_MESSAGE, valid_html
from enact.channels.telegram_typing import TYPING_AFTER_S, TypingIndicators
from enact.channels.telegram_updates import UpdateReader
from enact.chat.parts import units
from enact.messages.channel import DOWN, STARTING, STOPPED, UP, ChannelState
from enact.messages.inbox import Accepted, Ignored, Outcome
from enact.retry import Backoff

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message",)
_POLL_BACKOFF = Backoff(first_s=1.0, factor=2.0, max_s=60.0)
REPOLL_WHILE_UNFINISHED = Backoff(first_s=0.5, factor=2.0, max_s=4.0)
_MAX_RETRY_AFTER_S = 60.0
"""A 429 asking to wait longer than this is handed to the outbox's retries."""
_RATE_LIMIT_WAITS = 3


_EMPTY_REPLY = "(the reply has no text)"
REPEAT_MARK = "(sent again: the connection broke before Telegram confirmed it, so it may show twice)\n\n"
"""Heads a message sent again after a send whose answer was lost."""


def chat_id(conversation: str) -> int | str:
    """Telegram chat ids are integers; a ``@channelname`` stays text."""
    try:
        return int(conversation)
    except ValueError:
        return conversation


class TelegramChannel:
    name = NAME
    idempotent_delivery = False
    max_message_length = MAX_MESSAGE

    def __init__(self, api: BotApi, *, attachments: Path, poll_timeout_s: int, max_photo_bytes: int,
                 parse_mode: str = "plain", typing_after_s: float = TYPING_AFTER_S,
                 repoll: Backoff = REPOLL_WHILE_UNFINISHED) -> None:
        self._api = api
        self._repoll = repoll
        self._typing = TypingIndicators(api, after_s=typing_after_s)
        self._reader = UpdateReader(api, attachments=attachments, max_photo_bytes=max_photo_bytes)
        self._poll_timeout_s = poll_timeout_s
        self._parse_mode = parse_mode
        self._inbox: InboxInlet | None = None
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._acknowledged = 0
        self._locally_done: set[int] = set()
        """Updates above the acknowledged cursor that the inbox will never
        acknowledge, though they are finished (see the module's text)."""
        self._in_flight: dict[str, int] = {}
        """Event id → update id of the events this daemon handed to the inbox, unfinished."""
        self._state = STARTING
        self._last_error = ""
        self._last_error_at: float | None = None
        self._delivery_failures = 0
        self._threads: list[threading.Thread] = []
        self._latest_ids: list[int] = []
        """The update ids of the latest ``getUpdates`` answer."""
        self._polled_from = 0
        """The acknowledged cursor when the latest poll was sent."""

    # -- the Channel interface ---------------------------------------------

    def start(self, inbox: InboxInlet) -> None:
        self._inbox = inbox
        self._acknowledged = inbox.cursor()
        if inbox.fence is not None:
            inbox.fence.token.on_cancel(lambda _: self._halt())
        for target, name in ((self._poll_loop, "poll"), (lambda: self._typing.run(self._stopping), "typing")):
            thread = threading.Thread(target=target, name=f"enact-telegram-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("telegram: polling from update %d", self._acknowledged + 1)

    def stop(self) -> None:
        self._halt()
        for thread in self._threads:
            thread.join(timeout=2.0)

    def _halt(self) -> None:
        self._stopping.set()
        self._api.abort()
        with self._lock:
            self._set_state(STOPPED)
            self._lock.notify_all()

    def acknowledge(self, cursor: int) -> None:
        with self._lock:
            if cursor > self._acknowledged:
                self._acknowledged = cursor
                self._locally_done = {u for u in self._locally_done if u > cursor}
            self._lock.notify_all()

    def finished(self, outcome: Outcome) -> None:
        self._let_go(outcome.event_id)

    def state(self) -> ChannelState:
        with self._lock:
            return ChannelState(name=NAME, state=self._state, cursor=self._acknowledged,
                                last_error=self._last_error, last_error_at=self._last_error_at,
                                delivery_failures=self._delivery_failures)

    # -- polling ------------------------------------------------------------

    def _halted(self) -> bool:
        inbox = self._inbox
        fenced = inbox is not None and inbox.fence is not None and not inbox.fence.is_current()
        return self._stopping.is_set() or fenced

    def _poll_loop(self) -> None:
        failures = 0
        waits = 0  # polls in a row that brought only updates in hand, the cursor unmoved
        while not self._halted():
            try:
                waiting_only = self._poll_once()
            except Exception as problem:  # whatever fails, the poller backs off and goes on
                if self._halted():
                    break
                error = problem if isinstance(problem, BotApiError) else BotApiError(
                    BAD_RESPONSE, self._api.redact(f"{type(problem).__name__}: {problem}"))
                if not isinstance(problem, BotApiError):
                    log.error("telegram: an update could not be read: %s", error)
                failures += 1
                delay = _POLL_BACKOFF.delay(failures)
                if error.reason == RATE_LIMITED and error.retry_after_s is not None:
                    delay = max(delay, error.retry_after_s)
                self._poll_failed(error.reason, str(error), delay)
                self._stopping.wait(delay)
                continue
            failures = 0
            waits = waits + 1 if waiting_only else 0
            if waiting_only and self._wait_for_acknowledgement(self._repoll.delay(waits)):
                waits = 0
        log.info("telegram: polling stopped")

    def _wait_for_acknowledgement(self, timeout_s: float) -> bool:
        """Until the cursor moves on from where the latest poll started (it
        may have moved already), or ``timeout_s``; True if it moved."""
        with self._lock:
            before = self._polled_from
            return self._lock.wait_for(lambda: self._acknowledged != before or self._stopping.is_set(),
                                       timeout=timeout_s)

    def _poll_once(self) -> bool:
        """One ``getUpdates`` and its updates handed over; True if it brought
        only updates already in hand (so polling again at once would spin)."""
        params: dict[str, Any] = {"timeout": self._poll_timeout_s, "allowed_updates": list(ALLOWED_UPDATES)}
        offset = self._offset()
        if offset:
            params["offset"] = offset
        updates = self._api.poll(params, timeout_s=self._poll_timeout_s + 10.0)
        if self._halted():
            return False  # a fenced daemon hands nothing more to its inbox
        if not isinstance(updates, list):
            raise BotApiError(BAD_RESPONSE, "getUpdates: the result is not a list")
        self._up()
        taken = False
        for update in sorted((u for u in updates if isinstance(u, dict)), key=lambda u: int(u.get("update_id", 0))):
            taken = self._take(update) or taken
        self._latest_ids = [int(u.get("update_id", 0)) for u in updates if isinstance(u, dict)]
        return bool(updates) and not taken

    def _offset(self) -> int:
        """The acknowledged cursor plus one, stepped over the updates of the
        latest answer that are finished here."""
        with self._lock:
            self._polled_from = self._acknowledged
            offset = self._acknowledged + 1 if self._acknowledged else 0
            for update_id in sorted(self._latest_ids):
                if update_id < offset:
                    continue
                if update_id not in self._locally_done:
                    break
                offset = update_id + 1
            return offset

    def _take(self, update: dict[str, Any]) -> bool:
        """Hand one update to the inbox; False if it is already in hand."""
        update_id = int(update.get("update_id", 0))
        with self._lock:
            # At or below the acknowledged cursor, every update is finished (a
            # poll sent before the acknowledgement brings such ones back).
            if update_id <= self._acknowledged or update_id in self._in_flight.values() \
                    or update_id in self._locally_done:
                return False
        event = self._reader.event_of(update_id, update)
        if event is None:
            with self._lock:
                self._locally_done.add(update_id)
            return True
        inbox = self._inbox
        if inbox is None:
            raise BotApiError("inbox", "the channel is not started")
        # In hand before the inbox hears of it: its turn may be replied and
        # finished before ``submit`` returns, and what ``deliver`` and
        # ``finished`` remove then must not be added back after them (an
        # indicator would outlive its turn, shown every few seconds for good).
        with self._lock:
            self._in_flight[event.event_id] = update_id
        self._typing.start(event.event_id, chat=chat_id(event.conversation), thread_id=event.thread_id)
        try:
            answer = inbox.submit(event)
        except Exception as error:  # the inbox is restarting or busy: poll this batch again later
            self._let_go(event.event_id)
            raise BotApiError("inbox", f"the inbox did not take update {update_id}: {type(error).__name__}") from None
        if isinstance(answer, Ignored) or (isinstance(answer, Accepted) and not answer.in_flight):
            self._let_go(event.event_id)
            with self._lock:
                self._locally_done.add(update_id)
        return True

    def _let_go(self, event_id: str) -> None:
        with self._lock:
            self._in_flight.pop(event_id, None)
        self._typing.drop(event_id)

    # -- delivery -----------------------------------------------------------

    def deliver(self, reply: OutgoingReply) -> DeliveryReport:
        """One ``sendMessage``: the reply, or one of its parts."""
        self._typing.before_reply(reply.event_id)
        # Telegram refuses an empty message; a reply with nothing visible says so.
        text = reply.text if reply.text.strip() else _EMPTY_REPLY
        if reply.repeat:
            text = self._marked_as_repeat(reply, text)
        try:
            sent = self._send_part(reply, text, first=reply.part == 0)
        except BotApiError as error:
            self._delivery_failed(reply, error)
            return DeliveryReport(ok=False, retryable=not error.terminal, error=str(error),
                                  retry_after_s=error.retry_after_s or 0.0, unsure=error.written)
        if reply.parts > 1:
            log.info("telegram: reply of %s, part %d of %d sent as message %s", reply.event_id, reply.part + 1,
                     reply.parts, sent)
        return DeliveryReport(ok=True)

    def _marked_as_repeat(self, reply: OutgoingReply, text: str) -> str:
        """The text headed by ``REPEAT_MARK`` if both fit one message; else
        the text as it is, the mark sent just before it on its own (on a
        best-effort basis: a mark that fails to go out holds no reply up)."""
        if units(REPEAT_MARK + text) <= MAX_MESSAGE:
            return REPEAT_MARK + text
        try:
            self._send_part(reply, REPEAT_MARK.rstrip(), first=False)
        except BotApiError as error:
            log.warning("telegram: the repeat mark before %s was not sent: %s", reply.event_id, error)
        return text

    def _send_part(self, reply: OutgoingReply, text: str, *, first: bool) -> object:
        params: dict[str, Any] = {"chat_id": chat_id(reply.conversation), "text": text}
        if first and reply.message_id.isdigit():
            params["reply_to_message_id"] = int(reply.message_id)
            params["allow_sending_without_reply"] = True
        if self._parse_mode == "HTML" and valid_html(text):
            params["parse_mode"] = "HTML"
        waits = 0
        while True:
            try:
                answer = self._api.call("sendMessage", params)
                return answer.get("message_id") if isinstance(answer, dict) else None
            except BotApiError as error:
                if "parse_mode" in params and error.reason == BAD_REQUEST and "parse" in str(error):
                    params.pop("parse_mode")  # Telegram disagreed with the check: plain text then
                    continue
                retry_after = error.retry_after_s
                if error.reason != RATE_LIMITED or retry_after is None or retry_after > _MAX_RETRY_AFTER_S \
                        or waits >= _RATE_LIMIT_WAITS:
                    raise
                waits += 1
                self._count_delivery_error(error.reason)
                log.info("telegram: rate limited; sending again in %g s as asked", retry_after)
                if self._stopping.wait(retry_after):
                    raise
                continue

    def _delivery_failed(self, reply: OutgoingReply, error: BotApiError) -> None:
        self._count_delivery_error(error.reason)
        with self._lock:
            if error.terminal:
                self._delivery_failures += 1
            self._record_error(f"delivery to chat {reply.conversation}: {error}")
        log.warning("telegram: delivery of %s failed (%s): %s", reply.event_id,
                    "terminal" if error.terminal else "will retry", error)

    # -- state and metrics ----------------------------------------------------

    def _set_state(self, state: str) -> None:
        """Called with the lock held."""
        self._state = state
        inbox = self._inbox
        if inbox is not None and inbox.metrics is not None:
            inbox.metrics.channel_up.labels(channel=NAME).set(1 if state == UP else 0)

    def _record_error(self, text: str) -> None:
        """Called with the lock held; the text is redacted already."""
        self._last_error = text
        self._last_error_at = time.time()

    def _up(self) -> None:
        with self._lock:
            if self._state != UP and not self._stopping.is_set():
                if self._state == DOWN:
                    log.info("telegram: polling works again")
                self._set_state(UP)

    def _poll_failed(self, reason: str, text: str, delay: float) -> None:
        inbox = self._inbox
        if inbox is not None and inbox.metrics is not None:
            inbox.metrics.channel_poll_errors.labels(channel=NAME, reason=reason).inc()
        with self._lock:
            self._set_state(DOWN)
            self._record_error(f"poll: {text}")
        log.warning("telegram: poll failed (%s): %s; trying again in %g s", reason, text, delay)

    def _count_delivery_error(self, reason: str) -> None:
        inbox = self._inbox
        if inbox is not None and inbox.metrics is not None:
            inbox.metrics.channel_delivery_errors.labels(channel=NAME, reason=reason).inc()
