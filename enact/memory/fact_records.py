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
_CHUNK = 4096
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
    """The rows a chunk at a time, each chunk one JSON parse (a row that
    does not parse is then found, and named, by parsing each alone)."""
    keys: list[bytes] = []
    raws: list[bytes | memoryview] = []
    for key, raw in rows:
        keys.append(bytes(key))
        raws.append(raw)
    facts: list[Fact] = []
    for start in range(0, len(raws), _CHUNK):
        chunk, chunk_keys = raws[start:start + _CHUNK], keys[start:start + _CHUNK]
        try:
            parsed = orjson.loads(b"[" + b",".join(chunk) + b"]")
        except orjson.JSONDecodeError:
            parsed = None
        if parsed is None or len(parsed) != len(chunk):  # a damaged row: found and named one by one
            facts += [decode_fact(raw, database=database, key=key) for key, raw in zip(chunk_keys, chunk, strict=True)]
        else:
            facts += [_fact(row, database=database, key=key) for key, row in zip(chunk_keys, parsed, strict=True)]
    return facts


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


_ROW_FIELDS = ("id", "text", "type", "scope", "subject", "confidence", "sensitivity", "tags", "refs", "origin",
               "state", "created_at", "updated_at")
if tuple(Fact.__dataclass_fields__) != _ROW_FIELDS:
    raise RuntimeError("enact.memory.fact_records: Fact's fields changed; give the row a new form")
_ROW_LENGTH = 1 + len(_ROW_FIELDS)
# Each field set through its slot: the same object ``Fact(...)`` makes (there
# is no __post_init__), without the frozen __init__'s cost per field, which
# is most of the start of a memory of 100,000 facts.
_SETTERS = tuple(getattr(Fact, name).__set__ for name in _ROW_FIELDS)
_new = object.__new__


def _from_row(row: list[Any]) -> Fact:
    if len(row) != _ROW_LENGTH:
        raise ValueError(f"{len(row)} items, not {_ROW_LENGTH}")
    (_, fact_id, text, type_, scope, subject, confidence, sensitivity, tags, refs, origin, state, created_at,
     updated_at) = row
    if not (type(fact_id) is str and type(text) is str and type(subject) is str and type(origin) is str
            and type(tags) is list and type(refs) is list):
        raise TypeError("a text field is not a string, or tags or refs not a list")
    values = (fact_id, text, _TYPES[type_], _SCOPES[scope], subject, _CONFIDENCES[confidence],
              _SENSITIVITIES[sensitivity], tuple(tags), tuple(refs), origin, _STATES[state], float(created_at),
              float(updated_at))
    fact: Fact = _new(Fact)
    for set_field, value in zip(_SETTERS, values, strict=True):
        set_field(fact, value)
    return fact
