"""Compiled encoders: a message as the plain dicts and lists orjson writes
fastest.

orjson writes a dataclass natively, but a slotted one field by field through
its class's field table: about 1,800 instructions a field here (the Status
report, 70-odd records, cost 484k instructions to write; the same document
as plain dicts 74k). So each dataclass gets an encoder made once from its
fields: straight-line code that reads each field into a dict, and calls the
encoder of a field's record class (or each item's, for a tuple or list of
them). Anything else is passed through as it is, so what orjson writes is
the same bytes either way: a value of an unexpected type is left to orjson,
which writes it as it always did.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Union

Encode = Callable[[Any], Any]

_ENCODERS: dict[type[Any], Encode] = {}


def plain(message: object) -> Any:
    """``message`` (a dataclass instance) as plain dicts for orjson."""
    kind = type(message)
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        encoder = _encoder(kind)
    return encoder(message)


def _encoder(cls: type[Any]) -> Encode:
    if cls in _ENCODERS:
        return _ENCODERS[cls]
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        return _identity
    # A placeholder first, so a dataclass that contains itself compiles.
    compiled: Encode | None = None

    def late(value: Any) -> Any:
        return compiled(value) if compiled is not None else value

    _ENCODERS[cls] = late
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # a hint that cannot be resolved: left to orjson
        hints = {}
    scope: dict[str, Any] = {"cls": cls}
    entries = []
    for index, field in enumerate(dataclasses.fields(cls)):
        read = f"value.{field.name}"
        entries.append(f"{field.name!r}: {_converted(read, hints.get(field.name, Any), f'e{index}', scope)}")
    source = "def encode(value):\n    return {" + ", ".join(entries) + "}"
    exec(source, scope)  # the source is made above from field names and hints only
    compiled = typing.cast(Encode, scope["encode"])
    _ENCODERS[cls] = compiled
    return compiled


def _converted(read: str, hint: Any, name: str, scope: dict[str, Any]) -> str:
    """The expression that gives the field ``read`` as orjson writes it
    fastest, with what it calls put in ``scope`` under ``name``."""
    record = _record_class(hint)
    if record is not None:
        scope[name], scope[f"{name}_class"] = _encoder(record), record
        return f"({name}({read}) if type({read}) is {name}_class else {read})"
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        args = typing.get_args(hint)
        item = _record_class(args[0]) if args else None
        if item is not None:
            scope[name], scope[f"{name}_class"] = _encoder(item), item
            return (f"([{name}(x) if type(x) is {name}_class else x for x in {read}] "
                    f"if type({read}) is tuple or type({read}) is list else {read})")
    return read


def _record_class(hint: Any) -> type[Any] | None:
    """The dataclass a hint names (alone or as ``X | None``), or None."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        options = [o for o in typing.get_args(hint) if o is not type(None)]
        if len(options) != 1:
            return None
        hint = options[0]
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    return None


def _identity(value: Any) -> Any:
    return value
