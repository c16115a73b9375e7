"""The step journal: before an action runs its step is committed ``planned``,
then ``running``, then ``done`` with its receipt. After a crash, ``done``
steps are replayed from their receipts and a ``running`` step is reported as
uncertain; no step is ever executed twice.

Each step's write is staged in the actor's group commit (``WriteBatch``),
so the journal's commits share one durable transaction with the other
actors' (``enact.storage._committer``); its reply (``Recorded`` or
``Refused``) is a ``Deferred``, answered only once that write is durable,
with the fence checked inside the transaction."""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from collections.abc import Callable
from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred, WriteBatch
from enact.messages.common import RefusalCode, Refused
from enact.messages.journal import Finish, Plan, Recorded, Start, Step, StepList, Steps, StepState
from enact.storage import RecordTable

DATABASE = "journal.steps"
_INDEX = struct.Struct(">H")


def _prefix(request_id: str) -> bytes:
    return hashlib.sha256(request_id.encode()).digest()


def _key(request_id: str, index: int) -> bytes:
    return _prefix(request_id) + _INDEX.pack(index)


class JournalActor(EnactActor):
    """Owns ``journal.steps``: key = SHA-256 of the request id, then the step
    index (2 bytes, big-endian), so one request's steps are adjacent."""

    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self.batch = self._batch = WriteBatch(self._store, owner=context.name)
        # A step is stored as the Step the journal answers with.
        self._steps = RecordTable(self._store.table(DATABASE), Step)

    def handle(self, message: Any) -> Any:
        match message:
            case Plan():
                return self._plan(message)
            case Start():
                return self._advance(message.request_id, message.index, "planned", "running", None)
            case Finish():
                return self._advance(message.request_id, message.index, "running", "done", message)
            case Steps():
                return self._list(message.request_id)
        return super().handle(message)

    def _staged(self, write: Callable[[lmdb.Transaction], Recorded | Refused]) -> Deferred:
        """``write`` in the next group commit; the reply is its result, once durable."""
        reply = Deferred()
        self._batch.stage(write, reply.resolve, failed=reply.fail)
        return reply

    def _plan(self, message: Plan) -> Recorded | Refused | Deferred:
        if not 0 <= message.index <= 0xFFFF:
            return Refused(reason=f"step index {message.index} is out of range", code=RefusalCode.INVALID)
        key = _key(message.request_id, message.index)

        def write(txn: lmdb.Transaction) -> Recorded | Refused:
            existing = self._steps.get(txn, key)
            # A step that was planned but never started did not run: it may be
            # planned again (the model may now ask for something else).
            if existing is not None and existing.state != "planned":
                return Refused(reason=f"step {message.index} of this request is already {existing.state}",
                                code=RefusalCode.WRONG_STATE)
            step = Step(request_id=message.request_id, index=message.index, command=message.command,
                        args=message.args, state="planned", receipt="", ok=False, updated_at=self.context.clock.time())
            self._steps.put(txn, key, step)
            return Recorded(step=step)

        return self._staged(write)

    def _advance(
        self, request_id: str, index: int, expected: StepState, state: StepState, finish: Finish | None
    ) -> Deferred:
        key = _key(request_id, index)

        def write(txn: lmdb.Transaction) -> Recorded | Refused:
            step = self._steps.get(txn, key)
            if step is None:
                return Refused(reason=f"step {index} of this request was never planned", code=RefusalCode.WRONG_STATE)
            if step.state != expected:
                return Refused(reason=f"step {index} is {step.state}, not {expected}", code=RefusalCode.WRONG_STATE)
            step = dataclasses.replace(step, state=state, updated_at=self.context.clock.time())
            if finish is not None:
                step = dataclasses.replace(step, receipt=finish.receipt, ok=finish.ok)
            self._steps.put(txn, key, step)
            return Recorded(step=step)

        return self._staged(write)

    def _list(self, request_id: str) -> StepList:
        self._batch.flush()  # the steps are read from LMDB: what is staged is committed first
        prefix = _prefix(request_id)
        steps = self._store.read(lambda txn: [step for _, step in self._steps.items(txn, prefix=prefix)])
        return StepList(steps=tuple(steps))
