"""Commands run through the step journal, so that a crash never runs an
effect twice: each step is planned, started, run and finished in the
Journal actor's records, and a step found ``running`` after a crash is
reported as interrupted, never run again. The registry
(``enact.commands``) judges and runs a call; this module journals it."""

from __future__ import annotations

import threading

from enact.actors._asks import Asker
from enact.commands import CommandCall, CommandRegistry, unsuccessful
from enact.credentials import redact_json
from enact.messages._registry import Request
from enact.messages.commands import CommandOutcome, Receipt
from enact.messages.common import Refused
from enact.messages.journal import Finish, Plan, Recorded, Start, Step, Steps

JOURNAL = "journal"
"""The actor that journals each step of a request's action loop."""


def interrupted_text(subject: str) -> str:
    return (
        f"{subject} was interrupted before its result was recorded. It may have completed; "
        "check its state before retrying. It was not repeated."
    )


class JournaledCommands:
    """Runs commands through the step journal (Plan → Start → run → Finish),
    so that after a crash a step found ``running`` is reported as
    interrupted and never run again."""

    def __init__(self, registry: CommandRegistry, ask: Asker) -> None:
        self.registry = registry
        self._ask = ask
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def step(self, call: CommandCall, *, request_id: str, index: int) -> Receipt:
        """Journal and run step ``index`` of a request, whatever the command."""
        # The journal keeps the args redacted from the start (a refused
        # credential must not stay in it, not even in LMDB's freed pages);
        # nothing runs a step again from its args, and memory refuses a text
        # carrying the redaction mark.
        self._expect(Plan(request_id=request_id, index=index, command=call.name, args=redact_json(call.args)),
                     "plan", index)
        self._expect(Start(request_id=request_id, index=index), "start", index)
        receipt = self.registry.run(call)
        self._expect(Finish(request_id=request_id, index=index, receipt=receipt.text, ok=receipt.ok), "finish",
                     index)
        return receipt

    def steps(self, request_id: str) -> list[Step]:
        reply = self._ask(JOURNAL, Steps(request_id=request_id))
        return sorted(reply.steps, key=lambda s: s.index)

    def once(self, call: CommandCall, *, request_id: str, subject: str, resumed: bool = True) -> Receipt:
        """A command asked for directly (``/name`` in chat, ``commands.Run``)
        as the one step of its request. A ``read`` command or a refusal is
        not journaled: it changes nothing, so running it again is harmless."""
        command = self.registry.get(call.name)
        if command is None or command.authority.looks or self.registry.refusal(call) is not None:
            return self.registry.run(call)
        with self._lock:
            if request_id in self._running:
                return unsuccessful(call.name, CommandOutcome.FAILED,
                               f"{subject} is still running for this request; it was not started again")
            self._running.add(request_id)
        try:
            earlier = [s for s in self.steps(request_id) if s.index == 0] if resumed else []
            if earlier and earlier[0].state == "running":
                return unsuccessful(call.name, CommandOutcome.FAILED, interrupted_text(subject))
            if earlier and earlier[0].state == "done":
                step = earlier[0]
                if step.command != call.name:
                    return unsuccessful(call.name, CommandOutcome.FAILED,
                                   f"this request already ran {step.command}; use another request id")
                # The journal keeps whether the step succeeded, not why it did not.
                replayed = CommandOutcome.OK if step.ok else CommandOutcome.FAILED
                return Receipt(command=step.command, ok=step.ok, text=step.receipt, outcome=replayed)
            return self.step(call, request_id=request_id, index=0)
        finally:
            with self._lock:
                self._running.discard(request_id)

    def _expect(self, message: Request[Recorded | Refused], verb: str, index: int) -> None:
        reply = self._ask(JOURNAL, message)
        if not isinstance(reply, Recorded):
            raise RuntimeError(f"the journal refused to {verb} step {index}: {reply}")
