"""A stored candidate holds its draft; one stored flat, before it did, is
read as the same candidate and written back in the new shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from enact.evolution import curator_records
from enact.evolution.candidates import CANDIDATE_FIELDS, Candidate, CandidateState, Draft, candidate_id
from enact.evolution.curator_records import CANDIDATES, CuratorRecords
from enact.storage import Storage, Store

SIGNAL = "sig-000000000001"
FLAT: dict[str, Any] = {
    "source": "feedback", "evidence_ids": [SIGNAL], "title": "Keep replies short", "rationale": "asked twice",
    "proposed_change": "trim the reply template", "expected_benefit": "shorter replies", "risk": "low",
    "test_plan": "a chat test", "state": "active", "brainstorm": False, "theme": "", "task_id": None,
    "review_id": "", "score": 0.4, "created_at": 5.0, "updated_at": 5.0,
}
"""A candidate as the curator stored it before it held its draft (no evidence_at either)."""
CID = candidate_id("feedback", [SIGNAL], "Keep replies short")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state")
    try:
        yield storage.grant("curator", curator_records.DATABASES)
    finally:
        storage.close()


def test_a_candidate_stored_flat_is_read_with_its_draft_and_rewritten_in_the_new_shape(store: Store) -> None:
    store.write(lambda txn: store.table(CANDIDATES).put(txn, CID.encode(), {"id": CID, **FLAT}))
    records = CuratorRecords(store)
    found = records.candidate(CID)
    assert found is not None and found.id == found.draft.id == CID
    assert found.draft == Draft(source="feedback", evidence_ids=(SIGNAL,), title="Keep replies short",
                                rationale="asked twice", proposed_change="trim the reply template",
                                expected_benefit="shorter replies", risk="low", test_plan="a chat test")
    assert (found.state, found.score, found.evidence_at) == (CandidateState.ACTIVE, 0.4, 0.0)
    assert records.all_candidates() == [found] and records.state_counts()[CandidateState.ACTIVE] == 1
    records.put(dataclasses.replace(found, state=CandidateState.REMOVED))
    document = store.read(lambda txn: store.table(CANDIDATES).get(txn, CID.encode()))
    assert document is not None and "title" not in document and document["draft"]["title"] == "Keep replies short"
    assert records.candidate(CID) == dataclasses.replace(found, state=CandidateState.REMOVED)


def test_a_new_candidate_keeps_the_draft_fields_once(store: Store) -> None:
    draft = Draft(source="experience", evidence_ids=(SIGNAL,), title="Retry flaky tests once", rationale="r",
                  proposed_change="c", expected_benefit="b", risk="k", test_plan="t")
    made = Candidate(id=draft.id, draft=draft, state=CandidateState.ACTIVE, created_at=1.0, updated_at=1.0)
    CuratorRecords(store).put(made)
    document = store.read(lambda txn: store.table(CANDIDATES).get(txn, made.id.encode()))
    assert document is not None and set(document["draft"]) == {"source", *CANDIDATE_FIELDS}
    assert not set(document) & set(CANDIDATE_FIELDS)
    assert CuratorRecords(store).candidate(made.id) == made

