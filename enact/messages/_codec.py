"""The wire codec: registered messages to orjson and back.

A frame body is ``{"type": "<actor>.<Type>", "body": {<fields>}}``. Decoding
checks every field against the dataclass's type hints, so a bad frame is
refused with a message that names the field instead of reaching an actor.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, Literal, Union

import orjson

from enact.errors import EnactError
from enact.messages._compiled import Mismatch, decoder
from enact.messages._encoders import plain
from enact.messages._registry import lookup, type_name

MAX_LENGTH = "max_length"
"""Field metadata key: the longest str, list or dict a field accepts."""


class DecodeError(EnactError, ValueError):
    """A frame or a field that does not match its registered type."""


def limit(max_length: int) -> dict[str, int]:
    """Metadata for ``dataclasses.field`` that bounds a field's length."""
    return {MAX_LENGTH: max_length}


def to_wire(message: object) -> dict[str, Any]:
    return {"type": type_name(message), "body": _plain(message)}


def encode(message: object) -> bytes:
    # orjson writes tuples and enums natively, as _plain does; records are
    # made plain dicts first, which it writes several times faster.
    return orjson.dumps({"type": type_name(message), "body": plain(message)})


def _plain(value: object) -> Any:
    """Dataclasses to dicts, tuples to lists, enums to values: orjson-ready."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def decode(data: bytes) -> object:
    """Decode one frame body; raises DecodeError, never anything else."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise DecodeError(f"frame is not valid JSON: {error}") from None
    return from_wire(document)


_FRAME_KEYS = frozenset(("type", "body"))


def from_wire(document: object) -> object:
    if not isinstance(document, dict):
        raise DecodeError("frame must be a JSON object with 'type' and 'body'")
    if not document.keys() <= _FRAME_KEYS:  # compared in C; the set of the others made only to name them
        extra = set(document) - _FRAME_KEYS
        raise DecodeError(f"frame has unexpected keys: {', '.join(sorted(extra))}")
    name = document.get("type")
    if not isinstance(name, str):
        raise DecodeError("frame is missing its 'type' string")
    registration = lookup(name)
    if registration is None:
        raise DecodeError(f"unknown message type {name!r}")
    body = document.get("body", {})
    return decode_dataclass(registration.cls, body, path="")


def decode_dataclass(cls: type[Any], value: object, *, path: str) -> Any:
    """``value`` as dataclass ``cls``, every field checked against its hint;
    raises DecodeError naming the first field that does not match."""
    compiled = decoder(cls, _fields)
    if compiled is not None:
        try:
            return compiled(value)
        except Mismatch:
            pass  # decoded again below, to say which field and why
    return _checked_dataclass(cls, value, path=path)


def _checked_dataclass(cls: type[Any], value: object, *, path: str) -> Any:
    where = path or cls.__name__
    if not isinstance(value, dict):
        raise DecodeError(f"{where}: expected an object, got {_kind(value)}")
    fields = _fields(cls)
    if not fields.keys() >= value.keys():
        unknown = set(value) - set(fields)
        names = ", ".join(repr(_join(path, n)) for n in sorted(unknown))
        raise DecodeError(f"unknown field {names} for {cls.__name__}")
    arguments: dict[str, Any] = {}
    for name, (hint, required, max_length) in fields.items():
        if name not in value:
            if required:
                raise DecodeError(f"missing field {_join(path, name)!r}")
            continue
        arguments[name] = _decode_value(hint, value[name], f"{path}.{name}" if path else name, max_length)
    try:
        return cls(**arguments)
    except (TypeError, ValueError) as error:
        raise DecodeError(f"{where}: {error}") from None


_FIELDS: dict[type[Any], dict[str, tuple[Any, bool, int | None]]] = {}


def _fields(cls: type[Any]) -> dict[str, tuple[Any, bool, int | None]]:
    """Each field's type hint, whether it is required, and its length limit."""
    cached = _FIELDS.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    result: dict[str, tuple[Any, bool, int | None]] = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        result[f.name] = (hints[f.name], required, f.metadata.get(MAX_LENGTH))
    _FIELDS[cls] = result
    return result


def _decode_value(hint: Any, value: object, path: str, max_length: int | None = None) -> Any:
    # The common scalars first, before the (slower) look at generic types.
    if hint is str:
        if type(value) is not str:
            raise DecodeError(f"field {path!r}: expected string, got {_kind(value)}")
        _check_length(value, path, max_length)
        return value
    if hint is int and type(value) is int:
        return value
    if hint is bool and type(value) is bool:
        return value
    if hint is Any:
        return value
    origin = _origin(hint)
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode_value(option, value, path, max_length)
            except DecodeError as error:
                errors.append(str(error))
        raise DecodeError(errors[0] if len(errors) == 1 else f"field {path!r}: matches none of {hint}")
    if origin is Literal:
        allowed = typing.get_args(hint)
        # Compare types too: True == 1 and 1.0 == 1, but neither is the literal 1.
        if not any(type(option) is type(value) and option == value for option in allowed):
            raise DecodeError(f"field {path!r}: expected one of {list(allowed)}, got {value!r}")
        return value
    if hint is type(None):
        if value is not None:
            raise DecodeError(f"field {path!r}: expected null, got {_kind(value)}")
        return None
    if hint is bool:
        return _expect(value, bool, path)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise DecodeError(f"field {path!r}: expected int, got {_kind(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(f"field {path!r}: expected float, got {_kind(value)}")
        return float(value)
    if hint is str:
        text = _expect(value, str, path)
        _check_length(text, path, max_length)
        return text
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        # Not hint(value): that accepts True for a member whose value is 1.
        for member in hint:
            if type(member.value) is type(value) and member.value == value:
                return member
        members = [member.value for member in hint]
        raise DecodeError(f"field {path!r}: expected one of {members}, got {value!r}")
    if origin in (list, tuple):
        items = _expect(value, list, path)
        _check_length(items, path, max_length)
        args = typing.get_args(hint)
        item_hint = args[0] if args else Any
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            raise TypeError(f"only tuple[X, ...] is supported on the wire, not {hint}")
        elements = [_decode_value(item_hint, item, f"{path}[{i}]") for i, item in enumerate(items)]
        return tuple(elements) if origin is tuple else elements
    if origin is dict:
        mapping = _expect(value, dict, path)
        _check_length(mapping, path, max_length)
        key_hint, value_hint = typing.get_args(hint) or (str, Any)
        if key_hint is not str:
            raise TypeError(f"only dict[str, X] is supported on the wire, not {hint}")
        return {k: _decode_value(value_hint, v, f"{path}.{k}") for k, v in mapping.items()}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _checked_dataclass(hint, value, path=path)
    raise TypeError(f"field {path!r}: type {hint!r} is not supported on the wire")


def _expect(value: object, expected: type[Any], path: str) -> Any:
    if not isinstance(value, expected):
        raise DecodeError(f"field {path!r}: expected {_NAMES[expected]}, got {_kind(value)}")
    return value


def _check_length(value: str | list[Any] | dict[str, Any], path: str, max_length: int | None) -> None:
    if max_length is not None and len(value) > max_length:
        raise DecodeError(f"field {path!r} is too long: {len(value)} > {max_length}")


_ORIGINS: dict[Any, Any] = {}


def _origin(hint: Any) -> Any:
    try:
        return _ORIGINS[hint]
    except KeyError:
        origin = _ORIGINS[hint] = typing.get_origin(hint)
        return origin


_NAMES: dict[type[Any], str] = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


def _kind(value: object) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
