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
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout

from enact.channels import DeliveryReport, InboxInlet, OutgoingReply
from enact.errors import EnactError
from enact.messages.channel import STOPPED, UP, ChannelState
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import ChatEvent, Ignored, Outcome
from enact.messages.local import IN_PROGRESS, INTERRUPTED, NAME, TAKEN_OVER, Send
from enact.one_cpu import unpinned

_DELIVER_TIMEOUT_S = 30.0
_RUNNING = ChannelState(name=NAME, state=UP)
_STOPPED = ChannelState(name=NAME, state=STOPPED)


class LocalChannel:
    name = NAME
    max_message_length = 0

    def __init__(self, *, deliver_command: str = "", wait_timeout_s: float = 120.0) -> None:
        self._inbox: InboxInlet | None = None
        self._deliver_argv = shlex.split(deliver_command) if deliver_command else []
        self.idempotent_delivery = not self._deliver_argv
        # Without a command a reply is delivered by answering the waiting
        # ``send``, after the inbox logs the turn (``finished``): nothing blocks.
        self.delivers_at_once = not self._deliver_argv
        self._wait_timeout_s = wait_timeout_s
        self._waiters: dict[str, list[Future[Outcome]]] = {}
        self._lock = threading.Lock()

    # -- the Channel interface ---------------------------------------------

    def start(self, inbox: InboxInlet) -> None:
        """Local events arrive through ``send``, not through a loop."""
        self._inbox = inbox

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
            with unpinned():
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

    def state(self) -> ChannelState:
        """Always up while the daemon runs: it has nothing to poll."""
        return _RUNNING if self._inbox is not None else _STOPPED  # made once: status asks on every request

    def finished(self, outcome: Outcome) -> None:
        with self._lock:
            futures = self._waiters.pop(outcome.event_id, [])
        for future in futures:
            if not future.done():
                future.set_result(outcome)

    # -- enact send ----------------------------------------------------------

    def send(self, message: Send) -> Outcome | Ignored:
        """Serve ``local.Send`` in the control connection's thread."""
        inbox = self._inbox
        if inbox is None:
            raise ChannelNotStarted("the local channel is not started")
        event = ChatEvent(
            channel=NAME,
            conversation=message.conversation or "cli",
            message_id=message.message_id or uuid.uuid4().hex,
            text=message.text,
            sender=HUMAN_CLI,
            reply_to=message.reply_to,
        )
        if not message.text.strip():  # `enact send` refuses it first; a raw frame may not
            return Ignored(event_id=event.event_id, reason="there is no text to send")
        future: Future[Outcome] = Future()
        event_id = event.event_id
        with self._lock:
            self._waiters.setdefault(event_id, []).append(future)
        try:
            accepted = inbox.submit(event)
            if isinstance(accepted, Ignored):
                return accepted
            if accepted.duplicate and not accepted.in_flight:
                outcome = inbox.outcome(event_id)
            else:
                try:
                    outcome = future.result(timeout=self._wait_timeout_s)
                except FutureTimeout:
                    # Accepted and still being worked on: say so rather than fail.
                    return _unfinished(event_id, IN_PROGRESS, duplicate=accepted.duplicate)
                except CancelledError:
                    # The daemon is stopping (``stop``): answer before it goes,
                    # saying whether it was taken over or just stopped.
                    taken_over = inbox.fence is not None and inbox.fence.superseded
                    return _unfinished(event_id, INTERRUPTED, duplicate=accepted.duplicate,
                                       error=TAKEN_OVER if taken_over else "")
        finally:
            with self._lock:
                futures = self._waiters.get(event_id, [])
                if future in futures:
                    futures.remove(future)
                if not futures:
                    self._waiters.pop(event_id, None)
        return dataclasses.replace(outcome, duplicate=accepted.duplicate)


class ChannelNotStarted(EnactError, RuntimeError):
    """A request reached the channel before the daemon started it."""


def _unfinished(event_id: str, status: str, *, duplicate: bool, error: str = "") -> Outcome:
    return Outcome(event_id=event_id, status=status, duplicate=duplicate, reply="", actions=(), attempts=0,
                   error=error)
