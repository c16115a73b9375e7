"""How a fact is stored in ``memory.facts``: a compact row, read without the
checked codec, so that the Memory actor loads 100,000 facts in well under a
second.

Form 2 (written now): a JSON array ``[2, id, text, type, scope, subject,
confidence, sensitivity, tags, refs, origin, state, created_at, updated_at]``,
the enums by value. Form 1 (written before): the ``Fact`` dataclass as a
versioned document (``{"id": …, "v": 1}``), still read, through the checked
codec, until the fact is next written. Anything else, or a row that does not
hold what form 2 says, is a ``CorruptRecord`` naming the key: reported,
never skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from enact.memory.facts import Confidence, Fact, FactState, FactType, Scope, Sensitivity
from enact.storage import CorruptRecord, decode_record

FORM = 2
_OLD_FORM = 1
_VERSION_KEY = "v"
_TYPES = {member.value: member for member in FactType}
_SCOPES = {member.value: member for member in Scope}
_CONFIDENCES = {member.value: member for member in Confidence}
_SENSITIVITIES = {member.value: member for member in Sensitivity}
_STATES = {member.value: member for member in FactState}


def encode_fact(fact: Fact) -> bytes:
    return orjson.dumps([
        FORM, fact.id, fact.text, fact.type.value, fact.scope.value, fact.subject, fact.confidence.value,
        fact.sensitivity.value, fact.tags, fact.refs, fact.origin, fact.state.value, fact.created_at,
        fact.updated_at,
    ])


def decode_fact(raw: bytes | memoryview, *, database: str, key: bytes) -> Fact:
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise CorruptRecord(database, key, f"not valid JSON ({error})") from None
    return _fact(row, database=database, key=key)


def decode_facts(rows: Iterable[tuple[bytes | memoryview, bytes | memoryview]], *, database: str) -> list[Fact]:
    """Every row at once: one JSON parse for all of them (the per-row parse
    names the key of a row that does not parse)."""
    keys: list[bytes] = []
    raws: list[bytes | memoryview] = []
    for key, raw in rows:
        keys.append(bytes(key))
        raws.append(raw)
    try:
        parsed = orjson.loads(b"[" + b",".join(raws) + b"]")
    except orjson.JSONDecodeError:
        return [decode_fact(raw, database=database, key=key) for key, raw in zip(keys, raws, strict=True)]
    return [_fact(row, database=database, key=key) for key, row in zip(keys, parsed, strict=True)]


def _fact(row: Any, *, database: str, key: bytes) -> Fact:
    if isinstance(row, list):
        if row and row[0] == FORM:
            try:
                return _from_row(row)
            except (KeyError, TypeError, ValueError) as error:
                raise CorruptRecord(database, key, f"not a fact record of form {FORM} ({error!r})") from None
        form = row[0] if row else None
        raise CorruptRecord(database, key, f"a fact record of form {form!r}; this code reads forms 1 and {FORM}")
    if isinstance(row, dict):
        version = row.pop(_VERSION_KEY, None)
        if version != _OLD_FORM or isinstance(version, bool):
            raise CorruptRecord(database, key, f"a fact document of version {version!r}; this code reads 1")
        record: Fact = decode_record(Fact, row, database=database, key=key)
        return record
    raise CorruptRecord(database, key, "neither a fact row nor a fact document")


def _from_row(row: list[Any]) -> Fact:
    (_, fact_id, text, type_, scope, subject, confidence, sensitivity, tags, refs, origin, state, created_at,
     updated_at) = row
    for value in (fact_id, text, subject, origin, *tags, *refs):
        if not isinstance(value, str):
            raise TypeError(f"{value!r} is not a string")
    if isinstance(created_at, bool) or isinstance(updated_at, bool):
        raise TypeError("a time is not a number")
    return Fact(
        id=fact_id, text=text, type=_TYPES[type_], scope=_SCOPES[scope], subject=subject,
        confidence=_CONFIDENCES[confidence], sensitivity=_SENSITIVITIES[sensitivity], tags=tuple(tags),
        refs=tuple(refs), origin=origin, state=_STATES[state], created_at=float(created_at),
        updated_at=float(updated_at),
    )
