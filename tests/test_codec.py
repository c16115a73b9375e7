"""The wire codec: every registered message round-trips; bad input is a DecodeError.

The round-trip strategy is derived from each dataclass's type hints, so a
message type added later is covered without touching this file; a hint the
strategy builder does not know fails loudly instead of being skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from enact.chat.records import Receipt
from enact.messages import (
    DecodeError,
    Registration,
    Request,
    decode,
    encode,
    from_wire,
    limit,
    registered,
    request,
    to_wire,
)
from enact.messages._codec import MAX_LENGTH, _checked_dataclass, _fields, decode_dataclass
from enact.messages._compiled import decoder
from enact.messages.common import Done
from enact.messages.control import ActorStatus, StatusReport, StorageStatus
from enact.messages.epoch import Current
from enact.messages.inbox import Turn
from enact.messages.outbox import DeliveryRecord

# --- test-only message types -------------------------------------------------
# Registered under the "testing" actor so that the codec's handling of every
# supported hint (and of length limits) is exercised even before real protocols
# use them. They are part of ``registered()`` from here on.


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    name: str
    weight: float = 1.0


@request("testing.Bounded")
@dataclass(frozen=True, slots=True, kw_only=True)
class Bounded(Request["Done"]):
    name: str = field(metadata=limit(8))
    tags: tuple[str, ...] = field(default=(), metadata=limit(3))
    attrs: dict[str, Any] = field(default_factory=dict, metadata=limit(2))
    note: str | None = field(default=None, metadata=limit(4))


@request("testing.Everything")
@dataclass(frozen=True, slots=True, kw_only=True)
class Everything(Request["Done"]):
    flag: bool
    count: int
    ratio: float
    text: str
    maybe_text: str | None
    mode: Literal["fast", "slow"]
    level: Literal[1, 2, 3]
    colour: Colour
    numbered: Level
    numbers: list[int]
    attrs: dict[str, Any]
    scores: dict[str, float]
    inner: Inner
    inners: tuple[Inner, ...]
    maybe_inner: Inner | None = None
    nothing: None = None
    defaulted: int = 7


# --- a strategy for any registered message, from its type hints ------------------

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)  # JSON has no NaN or infinity
_JSON_SCALARS = st.none() | st.booleans() | _INT64 | _FLOATS | st.text(max_size=16)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    _JSON_SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=16,
)
"""Values that survive an orjson round trip unchanged (what ``Any`` fields hold)."""

_DEFAULT_SIZE = 5
_DATACLASS_STRATEGIES: dict[type[Any], st.SearchStrategy[Any]] = {}


def _size(max_length: int | None) -> int:
    return _DEFAULT_SIZE if max_length is None else min(max_length, _DEFAULT_SIZE * 4)


def strategy_for(hint: Any, *, max_length: int | None = None, where: str = "") -> st.SearchStrategy[Any]:
    """A strategy of values the codec must round-trip for ``hint``; raises on an unknown hint."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return JSON_VALUES
    if origin in (Union, types.UnionType):
        return st.one_of(*(strategy_for(a, max_length=max_length, where=where) for a in args))
    if origin is Literal:
        return st.sampled_from(args)
    if hint is type(None):
        return st.none()
    if hint is bool:
        return st.booleans()
    if hint is int:
        return _INT64
    if hint is float:
        return _FLOATS
    if hint is str:
        return st.text(max_size=_size(max_length))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(strategy_for(args[0], where=f"{where}[]"), max_size=_size(max_length)).map(tuple)
    if origin is list and len(args) == 1:
        return st.lists(strategy_for(args[0], where=f"{where}[]"), max_size=_size(max_length))
    if origin is dict and len(args) == 2 and args[0] is str:
        values = strategy_for(args[1], where=f"{where}.*")
        return st.dictionaries(st.text(max_size=8), values, max_size=_size(max_length))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return dataclass_strategy(hint)
    raise TypeError(f"no strategy for the hint {hint!r} of {where or 'a message'}: teach tests/test_codec.py about it")


def dataclass_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    cached = _DATACLASS_STRATEGIES.get(cls)
    if cached is not None:
        return cached
    # Deferred, so a dataclass that (indirectly) contains itself does not recurse here.
    deferred = st.deferred(lambda: _build_dataclass_strategy(cls))
    _DATACLASS_STRATEGIES[cls] = deferred
    return deferred


def _build_dataclass_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        strategy = strategy_for(hints[f.name], max_length=f.metadata.get(MAX_LENGTH), where=f"{cls.__name__}.{f.name}")
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        (optional if has_default else required)[f.name] = strategy
    return st.fixed_dictionaries(required, optional=optional).map(lambda kwargs: cls(**kwargs))


def _check_hints(cls: type[Any], seen: set[type[Any]]) -> None:
    """Walk every hint of ``cls`` eagerly so an unsupported one fails now, not at draw time."""
    if cls in seen:
        return
    seen.add(cls)
    hints = typing.get_type_hints(cls)
    pending = [(hints[f.name], f.metadata.get(MAX_LENGTH), f"{cls.__name__}.{f.name}") for f in dataclasses.fields(cls)]
    while pending:
        hint, max_length, where = pending.pop()
        strategy_for(hint, max_length=max_length, where=where)
        for arg in typing.get_args(hint):
            if isinstance(arg, type) and dataclasses.is_dataclass(arg):
                _check_hints(arg, seen)
            elif typing.get_origin(arg) is not None:
                pending.append((arg, None, where))


REGISTRATIONS = registered()


def _by_name(registration: Registration) -> str:
    return registration.name


# --- round trips ---------------------------------------------------------------


def test_the_registry_holds_the_foundation_protocols() -> None:
    names = {r.name for r in REGISTRATIONS}
    foundation = {"epoch.RequireCurrent", "epoch.Current", "control.Status", "control.StatusReport", "common.Refused",
                  "common.NotFound"}
    assert foundation <= names


@pytest.mark.parametrize("registration", REGISTRATIONS, ids=_by_name)
def test_every_registered_type_has_a_strategy(registration: Registration) -> None:
    _check_hints(registration.cls, set())


def test_an_unsupported_hint_fails_loudly() -> None:
    with pytest.raises(TypeError, match="no strategy"):
        strategy_for(set[int], where="X.values")
    with pytest.raises(TypeError, match="no strategy"):
        strategy_for(tuple[int, str], where="X.pair")


@pytest.mark.parametrize("registration", REGISTRATIONS, ids=_by_name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_registered_type_round_trips(registration: Registration, data: st.DataObject) -> None:
    message = data.draw(dataclass_strategy(registration.cls), label=registration.name)
    frame = encode(message)
    decoded = decode(frame)
    assert type(decoded) is registration.cls
    assert decoded == message
    assert orjson.loads(frame)["type"] == registration.name
    assert from_wire(to_wire(message)) == message
    # The compiled encoder writes the very bytes orjson writes of the record itself.
    assert frame == orjson.dumps({"type": registration.name, "body": message})


def test_a_frame_is_type_and_body() -> None:
    assert orjson.loads(encode(Current(generation=3))) == {"type": "epoch.Current", "body": {"generation": 3}}


def test_enums_literals_and_tuples_decode_to_their_python_types() -> None:
    message = Everything(
        flag=True, count=1, ratio=2, text="t", maybe_text=None, mode="slow", level=2, colour=Colour.GREEN,
        numbered=Level.HIGH, numbers=[1], attrs={"a": [1, {"b": None}]}, scores={"x": 1.5},
        inner=Inner(name="i"), inners=(Inner(name="j", weight=0.5),),
    )
    decoded = decode(encode(message))
    assert isinstance(decoded, Everything)
    assert decoded.colour is Colour.GREEN and decoded.numbered is Level.HIGH
    assert isinstance(decoded.inners, tuple) and decoded.inners == (Inner(name="j", weight=0.5),)
    assert isinstance(decoded.ratio, float)
    assert decoded.defaulted == 7


# --- bad input: always a DecodeError that says what is wrong ---------------------


def _frame(name: str, body: object) -> bytes:
    return orjson.dumps({"type": name, "body": body})


def _status_report_body() -> dict[str, Any]:
    report = StatusReport(
        version="0", pid=1, home="/h", generation=1, uptime_s=0.5, metrics_addr="127.0.0.1:0", actor_names=("epoch",),
        actors=(ActorStatus(name="epoch", alive=True, mailbox=0, handled=2, restarts=0),),
        storage=StorageStatus(path="/h/state", map_bytes=1, used_bytes=1, databases=1),
    )
    body: dict[str, Any] = to_wire(report)["body"]
    assert decode(_frame("control.StatusReport", body)) == report
    return body


def _everything_body(**changes: object) -> dict[str, Any]:
    body: dict[str, Any] = {
        "flag": False, "count": 0, "ratio": 0.0, "text": "", "maybe_text": None, "mode": "fast", "level": 1,
        "colour": "red", "numbered": 1, "numbers": [], "attrs": {}, "scores": {}, "inner": {"name": "n"},
        "inners": [],
    }
    body.update(changes)
    return body


def test_unknown_type() -> None:
    with pytest.raises(DecodeError, match=r"unknown message type 'nope\.Nope'"):
        decode(_frame("nope.Nope", {}))


def test_missing_field() -> None:
    with pytest.raises(DecodeError, match=r"missing field 'generation'"):
        decode(_frame("epoch.Current", {}))


def test_missing_nested_field_names_its_path() -> None:
    body = _status_report_body()
    del body["actors"][0]["mailbox"]
    with pytest.raises(DecodeError, match=r"missing field 'actors\[0\]\.mailbox'"):
        decode(_frame("control.StatusReport", body))


def test_extra_field() -> None:
    with pytest.raises(DecodeError, match=r"unknown field 'surprise'"):
        decode(_frame("epoch.Current", {"generation": 1, "surprise": 2}))


def test_extra_nested_field_names_its_path() -> None:
    body = _status_report_body()
    body["storage"]["colour"] = "blue"
    with pytest.raises(DecodeError, match=r"unknown field 'storage\.colour'"):
        decode(_frame("control.StatusReport", body))


def test_wrong_type() -> None:
    with pytest.raises(DecodeError, match=r"field 'generation': expected int, got string"):
        decode(_frame("epoch.Current", {"generation": "1"}))


def test_wrong_nested_type_names_the_field_path() -> None:
    body = _status_report_body()
    body["actors"][0]["name"] = 5
    with pytest.raises(DecodeError, match=r"field 'actors\[0\]\.name': expected string, got int"):
        decode(_frame("control.StatusReport", body))


def test_a_nested_object_of_the_wrong_kind() -> None:
    body = _status_report_body()
    body["actors"] = [["not", "an", "object"]]
    with pytest.raises(DecodeError, match=r"actors\[0\]: expected an object, got array"):
        decode(_frame("control.StatusReport", body))
    body["actors"] = {"epoch": {}}
    with pytest.raises(DecodeError, match=r"field 'actors': expected array, got object"):
        decode(_frame("control.StatusReport", body))


@pytest.mark.parametrize("value", [True, False])
def test_bool_is_not_an_int(value: bool) -> None:
    with pytest.raises(DecodeError, match=r"field 'generation': expected int, got bool"):
        decode(_frame("epoch.Current", {"generation": value}))


def test_bool_is_not_a_float() -> None:
    body = _status_report_body()
    body["uptime_s"] = True
    with pytest.raises(DecodeError, match=r"field 'uptime_s': expected float, got bool"):
        decode(_frame("control.StatusReport", body))


def test_int_is_accepted_as_float() -> None:
    body = _status_report_body()
    body["uptime_s"] = 3
    report = decode(_frame("control.StatusReport", body))
    assert isinstance(report, StatusReport)
    assert report.uptime_s == 3.0 and isinstance(report.uptime_s, float)


def test_a_json_number_too_big_for_int_is_refused() -> None:
    with pytest.raises(DecodeError, match=r"field 'generation': expected int, got float"):
        decode(b'{"type": "epoch.Current", "body": {"generation": 1' + b"0" * 30 + b"}}")


@pytest.mark.parametrize(
    ("field_name", "value", "match"),
    [
        ("level", True, r"field 'level': expected one of \[1, 2, 3\], got True"),
        ("level", 1.0, r"field 'level': expected one of \[1, 2, 3\], got 1\.0"),
        ("level", 4, r"field 'level': expected one of \[1, 2, 3\], got 4"),
        ("mode", "medium", r"field 'mode': expected one of \['fast', 'slow'\]"),
        ("numbered", True, r"field 'numbered': expected one of \[1, 2\], got True"),
        ("numbered", 1.0, r"field 'numbered': expected one of \[1, 2\], got 1\.0"),
        ("colour", "blue", r"field 'colour': expected one of \['red', 'green'\], got 'blue'"),
        ("colour", ["red"], r"field 'colour': expected one of \['red', 'green'\]"),
        ("numbers", [1, True], r"field 'numbers\[1\]': expected int, got bool"),
        ("scores", {"a": "x"}, r"field 'scores\.a': expected float, got string"),
        ("inner", {"name": 1}, r"field 'inner\.name': expected string, got int"),
        ("inners", [{"name": "a"}, {"weight": 1}], r"missing field 'inners\[1\]\.name'"),
        ("maybe_inner", {"name": "a", "x": 1}, r"unknown field 'maybe_inner\.x'"),
        ("maybe_text", 3, r"field 'maybe_text': expected string, got int"),
        ("nothing", 0, r"field 'nothing': expected null, got int"),
        ("flag", 1, r"field 'flag': expected bool, got int"),
        ("flag", None, r"field 'flag': expected bool, got null"),
    ],
)
def test_wrong_values_name_their_field(field_name: str, value: object, match: str) -> None:
    body = _everything_body()
    body[field_name] = value
    with pytest.raises(DecodeError, match=match):
        decode(_frame("testing.Everything", body))


def test_a_null_for_an_optional_field_is_none() -> None:
    body = _everything_body(maybe_inner=None, maybe_text=None)
    message = decode(_frame("testing.Everything", body))
    assert isinstance(message, Everything)
    assert message.maybe_inner is None and message.maybe_text is None


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"name": "x" * 9}, r"field 'name' is too long: 9 > 8"),
        ({"name": "ok", "tags": ["a", "b", "c", "d"]}, r"field 'tags' is too long: 4 > 3"),
        ({"name": "ok", "attrs": {"a": 1, "b": 2, "c": 3}}, r"field 'attrs' is too long: 3 > 2"),
        ({"name": "ok", "note": "12345"}, r"field 'note' is too long: 5 > 4"),
    ],
)
def test_oversized_field(body: dict[str, Any], match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode(_frame("testing.Bounded", body))


def test_a_field_at_its_limit_is_accepted() -> None:
    body = {"name": "x" * 8, "tags": ["a", "b", "c"], "attrs": {"a": 1, "b": 2}, "note": "1234"}
    assert decode(_frame("testing.Bounded", body)) == Bounded(
        name="x" * 8, tags=("a", "b", "c"), attrs={"a": 1, "b": 2}, note="1234"
    )


@pytest.mark.parametrize("data", [b"", b"{", b'{"type": "epoch.Current", "body": {}', b"\xff\xfe", b"nul", b"[" * 2000])
def test_invalid_json(data: bytes) -> None:
    with pytest.raises(DecodeError, match="not valid JSON"):
        decode(data)


@pytest.mark.parametrize("data", [b"[]", b"1", b'"epoch.Current"', b"null", b"true", b'[{"type": "epoch.Current"}]'])
def test_top_level_non_object(data: bytes) -> None:
    with pytest.raises(DecodeError, match="must be a JSON object"):
        decode(data)


@pytest.mark.parametrize(
    ("document", "match"),
    [
        ({"body": {}}, "missing its 'type' string"),
        ({"type": 3, "body": {}}, "missing its 'type' string"),
        ({"type": "epoch.Current", "body": {"generation": 1}, "extra": 1}, "unexpected keys: extra"),
        ({"type": "epoch.Current", "body": None}, "Current: expected an object, got null"),
        ({"type": "epoch.Current", "body": [1]}, "Current: expected an object, got array"),
        ({"type": "epoch.Current"}, "missing field 'generation'"),
    ],
)
def test_malformed_frames(document: dict[str, Any], match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode(orjson.dumps(document))


def test_a_body_is_optional_for_a_type_without_fields() -> None:
    from enact.messages.control import Status

    assert decode(b'{"type": "control.Status"}') == Status()


# --- fuzzing: nothing but DecodeError ever escapes ---------------------------------

_NAMES = [r.name for r in REGISTRATIONS]


def _decodes_or_refuses(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    _decodes_or_refuses(data)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_fuzz_arbitrary_json_documents(document: Any) -> None:
    _decodes_or_refuses(orjson.dumps(document))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(_NAMES), body=JSON_VALUES)
def test_fuzz_arbitrary_bodies_for_registered_types(name: str, body: Any) -> None:
    _decodes_or_refuses(_frame(name, body))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), registration=st.sampled_from(REGISTRATIONS))
def test_fuzz_one_field_replaced_in_a_valid_message(data: st.DataObject, registration: Registration) -> None:
    """A valid message with one field (possibly nested) swapped for any JSON value."""
    message = data.draw(dataclass_strategy(registration.cls))
    body = to_wire(message)["body"]
    target: Any = body
    while isinstance(target, dict) and target:
        key = data.draw(st.sampled_from(sorted(target)))
        child = target[key]
        if isinstance(child, dict) and child and data.draw(st.booleans()):
            target = child
            continue
        if isinstance(child, list) and child and isinstance(child[0], dict) and data.draw(st.booleans()):
            target = child[0]
            continue
        target[key] = data.draw(JSON_VALUES)
        break
    try:
        decoded = decode(_frame(registration.name, body))
    except DecodeError:
        return
    assert type(decoded) is registration.cls


# --- the compiled fast path agrees with the checked decoder ----------------------------


def _checked_outcome(cls: type[Any], body: Any) -> tuple[str, Any]:
    try:
        return "decoded", _checked_dataclass(cls, body, path="")
    except DecodeError as error:
        return "refused", str(error)


def _full_outcome(cls: type[Any], body: Any) -> tuple[str, Any]:
    try:
        return "decoded", decode_dataclass(cls, body, path="")
    except DecodeError as error:
        return "refused", str(error)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cls=st.sampled_from([*(r.cls for r in REGISTRATIONS), Receipt, Turn, DeliveryRecord]))
def test_the_compiled_decoder_accepts_and_refuses_exactly_what_the_checked_one_does(
    data: st.DataObject, cls: type[Any]
) -> None:
    """A valid value, or one with a field swapped for any JSON value: both
    paths decode it to equal objects, or both refuse it with the same words."""
    body = to_wire(data.draw(dataclass_strategy(cls)))["body"] if cls in _REGISTERED else _plain_body(data, cls)
    if data.draw(st.booleans()) and isinstance(body, dict) and body:
        body[data.draw(st.sampled_from(sorted(body)))] = data.draw(JSON_VALUES)
    assert _full_outcome(cls, body) == _checked_outcome(cls, body)


_REGISTERED = {r.cls for r in REGISTRATIONS}


def _plain_body(data: st.DataObject, cls: type[Any]) -> Any:
    return orjson.loads(orjson.dumps(data.draw(dataclass_strategy(cls))))


def test_the_inbox_receipt_takes_the_compiled_path() -> None:
    compiled = decoder(Receipt, _fields)
    assert compiled is not None, "the inbox's receipts must take the compiled path"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Checked:
    """Not a wire type: a record whose ``__post_init__`` refuses and normalises."""

    name: str
    count: int = 0

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError("count must not be negative")
        object.__setattr__(self, "name", self.name.strip())


def test_a_record_with_post_init_is_still_built_by_its_init() -> None:
    assert decode_dataclass(_Checked, {"name": " x ", "count": 1}, path="") == _Checked(name="x", count=1)
    with pytest.raises(DecodeError, match="count must not be negative"):
        decode_dataclass(_Checked, {"name": "x", "count": -1}, path="")


def test_a_record_built_without_its_init_is_the_frozen_record_itself() -> None:
    """The compiled path fills the slots without calling ``__init__``: what
    it makes is of the class, equal, hashable and as frozen as one built."""
    built = StatusReport(version="1", pid=1, home="/h", generation=2, uptime_s=1.5, metrics_addr="", actor_names=("a",),
                         actors=(ActorStatus(name="a", alive=True, mailbox=0, handled=3, restarts=0),),
                         storage=StorageStatus(path="/h/state", map_bytes=1, used_bytes=1, databases=1))
    decoded = decode(encode(built))
    assert type(decoded) is StatusReport and type(decoded.actors[0]) is ActorStatus
    assert decoded == built and hash(decoded.actors[0]) == hash(built.actors[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.actors[0].alive = False  # type: ignore[misc]


def test_a_list_of_scalars_is_checked_item_by_item_on_the_compiled_path_too() -> None:
    """A list of str, int or bool is checked in one pass, not per item: an
    item of another type (True among ints, a number among names) is still
    refused, naming the item."""
    body = _status_report_body()
    body["actor_names"] = ["epoch", 5]
    with pytest.raises(DecodeError, match=r"field 'actor_names\[1\]': expected string, got int"):
        decode(_frame("control.StatusReport", body))
    with pytest.raises(DecodeError, match=r"field 'numbers\[1\]': expected int, got bool"):
        decode_dataclass(Everything, _everything_body(numbers=[1, True]), path="")
    assert decode_dataclass(Everything, _everything_body(numbers=[1, 2]), path="").numbers == [1, 2]
