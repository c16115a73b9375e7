"""How facts are stored: the compact row written now, the document form
written before (still read), forms this code does not know (refused,
naming the key), on a real LMDB environment in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from enact.memory.book import DATABASES, FACTS, FactRecords
from enact.memory.fact_records import FORM, decode_fact, decode_facts, encode_fact
from enact.memory.facts import Confidence, Fact, FactState, FactType, Scope, Sensitivity
from enact.messages.memory import Change
from enact.storage import CorruptRecord, Storage, Store, encode_record


def _fact(fact_id: str, text: str = "the owner likes green tea") -> Fact:
    return Fact(id=fact_id, text=text, type=FactType.PREFERENCE, scope=Scope.PROJECT, subject="tea",
                confidence=Confidence.MEDIUM, sensitivity=Sensitivity.PRIVATE, tags=("drinks", "home"),
                refs=("e-1", "e-2"), origin="extension:notes", state=FactState.PENDING, created_at=1.5,
                updated_at=2.25)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state", map_size=1 << 22)
    try:
        yield storage.grant("memory", DATABASES)
    finally:
        storage.close()


def _put_raw(store: Store, key: bytes, value: bytes) -> None:
    store.write(lambda txn: txn.put(key, value, db=store.handle(FACTS)), fenced=False)


def _load(store: Store) -> list[Fact]:
    return store.read(FactRecords(store).load)[0]


def test_a_fact_round_trips_through_the_compact_row() -> None:
    fact = _fact("f-00000001")
    raw = encode_fact(fact)
    assert orjson.loads(raw)[0] == FORM
    assert decode_fact(raw, database=FACTS, key=b"f-00000001") == fact


def test_a_fact_in_the_old_document_form_is_still_read_and_rewritten_compact(store: Store) -> None:
    old, new = _fact("f-00000001", "stored before"), _fact("f-00000002", "stored now")
    _put_raw(store, b"f-00000001", encode_record(old, version=1))
    records = FactRecords(store)
    store.write(lambda txn: records.put(txn, new, Change(at=1.0, change="created", origin="human-cli"), change=1))
    assert _load(store) == [old, new]
    store.write(lambda txn: records.put(txn, old, Change(at=2.0, change="merged", origin="human-cli"), change=2))
    raw = store.read(lambda txn: bytes(txn.get(b"f-00000001", db=store.handle(FACTS))))
    assert orjson.loads(raw)[0] == FORM and _load(store) == [old, new]


@pytest.mark.parametrize(("raw", "says"), [
    (b'[3,"f-00000001"]', "form 3; this code reads forms 1 and 2"),
    (b'{"id":"f-00000001","v":2}', "version 2; this code reads 1"),
    (b'"just text"', "neither a fact row nor a fact document"),
    (b'[2,"f-00000001","text"]', "not a fact record of form 2"),
    (encode_fact(_fact("f-00000001")).replace(b'"preference"', b'"hobby"'), "not a fact record of form 2"),
    (encode_fact(_fact("f-00000001")).replace(b'["drinks","home"]', b'"drinks"'), "not a fact record of form 2"),
    (b'[2,"f-00000001"],[2,"f-00000002"]', "not valid JSON"),
    (b"[2,", "not valid JSON"),
])
def test_a_record_this_code_cannot_read_is_refused_naming_its_key(store: Store, raw: bytes, says: str) -> None:
    _put_raw(store, b"f-00000000", encode_fact(_fact("f-00000000")))
    _put_raw(store, b"f-00000001", raw)
    with pytest.raises(CorruptRecord) as refused:
        _load(store)
    assert says in str(refused.value) and "b'f-00000001'" in str(refused.value)


def test_many_rows_decode_as_each_would_alone() -> None:
    facts = [_fact(f"f-{n:08x}", f"fact number {n}") for n in range(50)]
    rows = [(fact.id.encode(), encode_fact(fact)) for fact in facts]
    assert decode_facts(rows, database=FACTS) == facts


def test_history_entries_follow_each_other_per_fact(store: Store) -> None:
    records = FactRecords(store)
    for change, (fact_id, what) in enumerate(
            [("f-1", "created"), ("f-10", "created"), ("f-1", "merged"), ("f-1", "confirmed"), ("f-10", "merged")]):
        entry = Change(at=float(change), change=what, origin="human-cli")
        store.write(lambda txn, i=fact_id, e=entry, c=change: records.put(txn, _fact(i), e, change=c + 1))
    assert [e.change for e in store.read(lambda txn: records.history_of(txn, "f-1"))] == [
        "created", "merged", "confirmed"]
    assert [e.change for e in store.read(lambda txn: records.history_of(txn, "f-10"))] == ["created", "merged"]
