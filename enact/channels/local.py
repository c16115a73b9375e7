"""The local channel: ``enact send`` hands an event over the control socket
and waits for its outcome.

A reply is delivered to the waiting ``enact send``; when
``chat.local_deliver_command`` is set, the reply is also handed to that
program on standard input (a desktop notifier, say). A non-zero exit is a
failed delivery and is retried; since such a program may have acted before
it failed, the channel then no longer claims idempotent delivery.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from enact.channels import DeliveryReport, OutgoingReply, Submit
from enact.messages._registry import Request
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import Accepted, ChatEvent, GetOutcome, Ignored, Outcome, Receive, Send

NAME = "local"
IN_PROGRESS = "in_progress"
"""The status of a sent event that has no outcome yet when the wait ends."""
INTERRUPTED = "interrupted"
"""The status of a sent event whose daemon stopped while ``enact send`` waited;
the event's receipt is durable, so the next daemon finishes it."""

AskInbox = Callable[[Request[Any]], object]
_DELIVER_TIMEOUT_S = 30.0


class LocalChannel:
    name = NAME

    def __init__(self, ask_inbox: AskInbox, *, deliver_command: str = "", wait_timeout_s: float = 120.0) -> None:
        self._ask_inbox = ask_inbox
        self._deliver_argv = shlex.split(deliver_command) if deliver_command else []
        self.idempotent_delivery = not self._deliver_argv
        self._wait_timeout_s = wait_timeout_s
        self._waiters: dict[str, list[Future[Outcome]]] = {}
        self._lock = threading.Lock()

    # -- the Channel interface ---------------------------------------------

    def start(self, submit: Submit) -> None:
        """Local events arrive through ``send``, not through a loop."""

    def stop(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, {}
        for futures in waiters.values():
            for future in futures:
                future.cancel()

    def deliver(self, reply: OutgoingReply) -> DeliveryReport:
        if not self._deliver_argv:
            return DeliveryReport(ok=True)
        env = dict(os.environ)
        env.update(
            {
                "ENACT_EVENT_ID": reply.event_id,
                "ENACT_CONVERSATION": reply.conversation,
                "ENACT_MESSAGE_ID": reply.message_id,
                "ENACT_DELIVERY_ATTEMPT": str(reply.attempt),
            }
        )
        try:
            result = subprocess.run(
                self._deliver_argv,
                input=reply.text.encode(),
                capture_output=True,
                timeout=_DELIVER_TIMEOUT_S,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return DeliveryReport(ok=False, retryable=True, error="the deliver command timed out")
        except OSError as error:
            return DeliveryReport(ok=False, retryable=False, error=f"cannot run the deliver command: {error}")
        if result.returncode != 0:
            detail = result.stderr.decode(errors="replace").strip()[:500]
            return DeliveryReport(ok=False, retryable=True, error=f"exit status {result.returncode}: {detail}")
        return DeliveryReport(ok=True)

    def acknowledge(self, cursor: int) -> None:
        """Local events carry no cursor; nothing to acknowledge."""

    def finished(self, outcome: Outcome) -> None:
        with self._lock:
            futures = self._waiters.pop(outcome.event_id, [])
        for future in futures:
            if not future.done():
                future.set_result(outcome)

    # -- enact send ----------------------------------------------------------

    def send(self, message: Send) -> Outcome | Ignored:
        """Serve ``inbox.Send`` in the control connection's thread."""
        event = ChatEvent(
            channel=NAME,
            conversation=message.conversation or "cli",
            message_id=message.message_id or uuid.uuid4().hex,
            text=message.text,
            sender=HUMAN_CLI,
            reply_to=message.reply_to,
        )
        future: Future[Outcome] = Future()
        event_id = event.event_id
        with self._lock:
            self._waiters.setdefault(event_id, []).append(future)
        try:
            # The owner typed this at a shell: the origin is the owner's CLI.
            accepted = self._ask_inbox(Receive(event=event, origin=HUMAN_CLI))
            if isinstance(accepted, Ignored):
                return accepted
            if not isinstance(accepted, Accepted):
                raise UnexpectedInboxReply(accepted, "inbox.Receive")
            if accepted.duplicate and not accepted.in_flight:
                outcome = self._ask_inbox(GetOutcome(event_id=event_id))
                if not isinstance(outcome, Outcome):
                    raise UnexpectedInboxReply(outcome, "inbox.GetOutcome")
            else:
                try:
                    outcome = future.result(timeout=self._wait_timeout_s)
                except FutureTimeout:
                    # Accepted and still being worked on: say so rather than fail.
                    return _unfinished(event_id, IN_PROGRESS, duplicate=accepted.duplicate)
                except CancelledError:
                    # The daemon is stopping (``stop``): answer before it goes.
                    return _unfinished(event_id, INTERRUPTED, duplicate=accepted.duplicate)
        finally:
            with self._lock:
                futures = self._waiters.get(event_id, [])
                if future in futures:
                    futures.remove(future)
                if not futures:
                    self._waiters.pop(event_id, None)
        return dataclasses.replace(outcome, duplicate=accepted.duplicate)


class UnexpectedInboxReply(RuntimeError):
    def __init__(self, reply: object, request: str) -> None:
        super().__init__(f"unexpected reply {type(reply).__qualname__} to {request}")


def _unfinished(event_id: str, status: str, *, duplicate: bool) -> Outcome:
    return Outcome(event_id=event_id, status=status, duplicate=duplicate, reply="", actions=(), attempts=0)
