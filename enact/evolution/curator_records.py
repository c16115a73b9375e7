"""What the curator stores: candidates, proposals and the audit history.

``evolution.candidates`` (key: the candidate id), ``evolution.proposals``
(an append log: proposal ``prop-<n>`` at sequence n, its state updated in
place) and ``evolution.audit`` (an append log of events, never changed;
``evolution.audit_index`` keys each candidate's events by candidate id and
sequence, so one candidate's history is read without the whole log);
``evolution.settings`` is the evolve mode's (``enact.evolution.mode_store``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import lmdb

from enact.evolution.candidates import Candidate, CandidateState, lifted
from enact.evolution.curation import Curation
from enact.messages.curator import AuditEvent, Proposal, ProposalState, RemovalSuggestion
from enact.storage import AppendLog, RecordTable, Store, Table, decode_record

CANDIDATES = "evolution.candidates"
PROPOSALS = "evolution.proposals"
AUDIT = "evolution.audit"
SETTINGS = "evolution.settings"
AUDIT_INDEX = "evolution.audit_index"
DATABASES = (CANDIDATES, PROPOSALS, AUDIT, SETTINGS, AUDIT_INDEX)
_INDEXED = b"\xff"
"""Present once every audit event written before the index existed is in it."""
PROPOSAL_PREFIX = "prop-"

T = TypeVar("T")


MAX_UNINDEXED = 10_000
"""Audit events searched for one candidate while the index is not built."""


def _index_key(candidate_id: str, sequence: int) -> bytes:
    return candidate_id.encode() + b"\x00" + AppendLog.key(sequence)


def audit_event(kind: str, candidate_id: str = "", proposal_id: str = "", *, at: float, detail: str = "") -> AuditEvent:
    return AuditEvent(at=at, kind=kind, candidate_id=candidate_id, proposal_id=proposal_id,
                      detail=detail[:1000])


def proposal_sequence(proposal_id: str) -> int | None:
    number = proposal_id.removeprefix(PROPOSAL_PREFIX)
    return int(number) if proposal_id.startswith(PROPOSAL_PREFIX) and number.isdigit() else None


class CandidateTable(RecordTable[Candidate]):
    """``evolution.candidates``, reading candidates stored flat, before they
    held their draft, as well (``candidates.lifted``)."""

    def __init__(self, table: Table) -> None:
        super().__init__(table, Candidate)

    def _decode(self, key: bytes, document: dict[str, Any]) -> Candidate:
        return super()._decode(key, lifted(document))


class CuratorRecords:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.candidates = CandidateTable(store.table(CANDIDATES))
        self.proposal_log = store.log(PROPOSALS)
        self.proposals = RecordTable(self.proposal_log, Proposal)
        self.audit_log = store.log(AUDIT)
        self._audit_index = store.handle(AUDIT_INDEX)
        self.settings = store.table(SETTINGS)

    # -- candidates -------------------------------------------------------

    def all_candidates(self) -> list[Candidate]:
        return self.store.read(lambda txn: [candidate for _, candidate in self.candidates.items(txn)])

    def candidate(self, candidate_id: str) -> Candidate | None:
        if not candidate_id or len(candidate_id) > 64:
            return None
        return self.store.read(lambda txn: self.candidates.get(txn, candidate_id.encode()))

    def state_counts(self) -> dict[CandidateState, int]:
        counts = dict.fromkeys(CandidateState, 0)
        for candidate in self.all_candidates():
            counts[candidate.state] += 1
        return counts

    def write(self, fn: Callable[[lmdb.Transaction], T], *events: AuditEvent) -> T:
        """``fn`` and the audit events in one commit."""

        def write(txn: lmdb.Transaction) -> T:
            result = fn(txn)
            for event in events:
                self.append_event(txn, event)
            return result

        return self.store.write(write)

    def put(self, candidate: Candidate, *events: AuditEvent) -> Candidate:
        self.write(lambda txn: self.candidates.put(txn, candidate.id.encode(), candidate), *events)
        return candidate

    def note(self, *events: AuditEvent) -> None:
        self.write(lambda txn: None, *events)

    # -- proposals and history ----------------------------------------------

    def _proposals_newest_first(self, txn: lmdb.Transaction) -> Any:
        for sequence, document in self.proposal_log.iterate_backwards(txn):
            yield sequence, decode_record(Proposal, document, database=PROPOSALS, key=AppendLog.key(sequence))

    def open_proposal(self) -> Proposal | None:
        def read(txn: lmdb.Transaction) -> Proposal | None:
            return next((p for _, p in self._proposals_newest_first(txn) if p.state is ProposalState.OPEN), None)

        return self.store.read(read)

    def proposal(self, proposal_id: str) -> Proposal | None:
        sequence = proposal_sequence(proposal_id)
        if sequence is None:
            return None
        return self.store.read(lambda txn: self.proposals.get(txn, AppendLog.key(sequence)))

    def newest_proposals(self, limit: int) -> list[Proposal]:
        def read(txn: lmdb.Transaction) -> list[Proposal]:
            found: list[Proposal] = []
            for _, proposal in self._proposals_newest_first(txn):
                if len(found) >= limit:
                    break
                found.append(proposal)
            return found

        return self.store.read(read)

    def events(self, limit: int) -> list[AuditEvent]:
        def read(txn: lmdb.Transaction) -> list[AuditEvent]:
            found: list[AuditEvent] = []
            for sequence, document in self.audit_log.iterate_backwards(txn):
                if len(found) >= limit:
                    break
                found.append(decode_record(AuditEvent, document, database=AUDIT, key=AppendLog.key(sequence)))
            return found

        return self.store.read(read)

    def append_event(self, txn: lmdb.Transaction, event: AuditEvent) -> None:
        """Append ``event`` to the audit, indexed by its candidate."""
        sequence = self.audit_log.append(txn, dataclasses.asdict(event))
        if event.candidate_id:
            txn.put(_index_key(event.candidate_id, sequence), b"", db=self._audit_index)

    def index_audit(self) -> None:
        """Index the events written before the index existed (once)."""

        def write(txn: lmdb.Transaction) -> None:
            if txn.get(_INDEXED, db=self._audit_index) is not None:
                return
            for sequence, document in self.audit_log.iterate_from(txn, 0):
                if document.get("candidate_id"):
                    txn.put(_index_key(str(document["candidate_id"]), sequence), b"", db=self._audit_index)
            txn.put(_INDEXED, b"", db=self._audit_index)

        if self.store.read(lambda txn: txn.get(_INDEXED, db=self._audit_index)) is None:
            self.store.write(write)

    def candidate_events(self, candidate_id: str) -> list[AuditEvent]:
        """``candidate_id``'s audit events, newest first, read by the index."""
        prefix = candidate_id.encode() + b"\x00"

        def read(txn: lmdb.Transaction) -> list[AuditEvent]:
            if txn.get(_INDEXED, db=self._audit_index) is None:  # not indexed yet (a fenced start)
                return [event for event in self.events(MAX_UNINDEXED) if event.candidate_id == candidate_id]
            position = txn.cursor(db=self._audit_index)
            sequences: list[int] = []
            if position.set_range(prefix):
                for raw in position.iternext(values=False):
                    key = bytes(raw)
                    if not key.startswith(prefix):
                        break
                    sequences.append(int.from_bytes(key[len(prefix):], "big"))
            found = []
            for sequence in reversed(sequences):
                document = self.audit_log.get_at(txn, sequence)
                if document is not None:
                    found.append(decode_record(AuditEvent, document, database=AUDIT, key=AppendLog.key(sequence)))
            return found

        return self.store.read(read)

    def record_proposal(self, verdict: Curation, shown: Sequence[Candidate], now: float) -> Proposal:
        """The new open proposal; an earlier open one is superseded in the same commit."""

        def write(txn: lmdb.Transaction) -> Proposal:
            for sequence, earlier in list(self._proposals_newest_first(txn)):
                if earlier.state is ProposalState.OPEN:
                    self.proposals.put(txn, AppendLog.key(sequence),
                                       dataclasses.replace(earlier, state=ProposalState.SUPERSEDED))
                    self.append_event(txn, audit_event("superseded", proposal_id=earlier.id, at=now))
            sequence = self.proposal_log.last_cursor(txn) + 1
            proposal_id = f"{PROPOSAL_PREFIX}{sequence}"
            suggestions = tuple(
                RemovalSuggestion(id=f"{proposal_id}-r{number}", candidate_id=item.candidate_id,
                                  removal_class=item.removal_class, reason=item.reason, refs=item.refs)
                for number, item in enumerate(verdict.removals, start=1))
            proposal = Proposal(id=proposal_id, candidate_id=verdict.recommended, reason=verdict.reason,
                                guidance=verdict.guidance, fallback=verdict.fallback,
                                removal_suggestions=suggestions, state=ProposalState.OPEN, created_at=now,
                                candidates=tuple(candidate.id for candidate in shown))
            self.proposals.put(txn, AppendLog.key(sequence), proposal)
            detail = ("fallback: " if verdict.fallback else "") + verdict.reason
            self.append_event(txn, audit_event("proposed", verdict.recommended or "", proposal_id, at=now,
                                               detail=detail))
            return proposal

        return self.store.write(write)

    def offer(self, candidate: Candidate, event: AuditEvent) -> None:
        """A new candidate another component assessed, with its audit event."""

        def write(txn: lmdb.Transaction) -> None:
            self.candidates.put(txn, candidate.id.encode(), candidate)
            self.append_event(txn, event)

        self.store.write(write)

    def decide(self, candidate: Candidate, event: AuditEvent) -> None:
        """The owner's decision on ``candidate`` (approved, removed); the open
        proposal recommending it follows it: approved, or closed."""
        proposal = self.open_proposal()
        follows = {CandidateState.APPROVED: ProposalState.APPROVED, CandidateState.REMOVED: ProposalState.CLOSED}

        def write(txn: lmdb.Transaction) -> None:
            self.candidates.put(txn, candidate.id.encode(), candidate)
            sequence = proposal_sequence(proposal.id) if proposal is not None else None
            state = follows.get(candidate.state)
            if proposal is not None and sequence is not None and state and proposal.candidate_id == candidate.id:
                self.proposals.put(txn, AppendLog.key(sequence), dataclasses.replace(proposal, state=state))

        self.write(write, event)
