"""Compiled decoders: the codec's fast path for values that are valid.

``decode_dataclass`` checks every field against its type hint and names the
field that does not match. That costs a path string per field and a look at
each hint per value (about 65 µs for an inbox receipt), paid on every record
read. So each dataclass gets a decoder compiled once from its hints: plain
closures that accept exactly what the checked decoder accepts and build no
path. Any mismatch raises ``Mismatch``, and the caller decodes the value again
the checked way, which finds the same mismatch and says where it is. A hint
the compiler does not know makes the class uncompilable (``None``): it is
always decoded the checked way.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

from enact.errors import EnactError

Convert = Callable[[Any], Any]


class Mismatch(EnactError):
    """The value does not match; decode it the checked way for the reason."""


class _Unsupported(EnactError):
    pass


_DECODERS: dict[type[Any], Convert | None] = {}


def decoder(cls: type[Any], fields: Callable[[type[Any]], dict[str, tuple[Any, bool, int | None]]]) -> Convert | None:
    """The compiled decoder of dataclass ``cls`` (``fields`` gives each field's
    hint, whether it is required and its length limit), or None."""
    if cls in _DECODERS:
        return _DECODERS[cls]
    # A placeholder first, so a dataclass that contains itself compiles.
    compiled: Convert | None = None

    def late(value: Any) -> Any:
        if compiled is None:
            raise Mismatch
        return compiled(value)

    _DECODERS[cls] = late
    try:
        compiled = _dataclass(cls, fields)
    except _Unsupported:
        _DECODERS[cls] = None
        return None
    _DECODERS[cls] = compiled
    return compiled


def _dataclass(cls: type[Any], fields: Callable[[type[Any]], dict[str, tuple[Any, bool, int | None]]]) -> Convert:
    declared = fields(cls)
    plan = [(name, _compile(hint, limit, fields), required) for name, (hint, required, limit) in declared.items()]
    names = frozenset(name for name, _, _ in plan)

    def every_field_or_some(value: Any) -> Any:
        if not isinstance(value, dict) or not names >= value.keys():
            raise Mismatch
        arguments = {}
        for name, field_convert, required in plan:
            if name in value:
                arguments[name] = field_convert(value[name])
            elif required:
                raise Mismatch
        try:
            return cls(**arguments)
        except (TypeError, ValueError):
            raise Mismatch from None

    return _generated(cls, declared, {name: convert for name, convert, _ in plan}, every_field_or_some)


_SCALARS = {str: "str", int: "int", bool: "bool"}


def _generated(cls: type[Any], declared: dict[str, tuple[Any, bool, int | None]], converts: dict[str, Convert],
               otherwise: Convert) -> Convert:
    """The decoder of ``cls`` as straight-line code, written for its fields:
    a value that holds every field (as every encoded message does) is
    checked without a call per field, and built with one call. Any other
    value (fields left to their defaults) goes to ``otherwise``. Accepts
    and refuses exactly what the per-field converters do."""
    names = list(declared)
    scope: dict[str, Any] = {"cls": cls, "Mismatch": Mismatch, "otherwise": otherwise, "float": float}
    body = [
        "def convert(value):",
        f"    if not isinstance(value, dict) or len(value) != {len(names)}:",
        "        if isinstance(value, dict):",
        "            return otherwise(value)",
        "        raise Mismatch",
    ]
    if names:
        body += ["    try:", *(f"        v{i} = value[{name!r}]" for i, name in enumerate(names)),
                 "    except KeyError:", "        return otherwise(value)"]
    for i, name in enumerate(names):
        hint, _, limit = declared[name]
        body += _check(f"v{i}", hint, limit, converts[name], scope)
    twin = _settable_twin(cls, names)
    if twin is not None:
        scope["twin"], scope["new"] = twin, object.__new__
        body += ["    made = new(twin)", *(f"    made.{name} = v{i}" for i, name in enumerate(names)),
                 "    made.__class__ = cls", "    return made"]
    else:
        arguments = ", ".join(f"{name}=v{i}" for i, name in enumerate(names))
        body += ["    try:", f"        return cls({arguments})", "    except (TypeError, ValueError):",
                 "        raise Mismatch from None"]
    exec("\n".join(body), scope)  # the source is made above from field names and hints only
    return typing.cast(Convert, scope["convert"])


def _settable_twin(cls: type[Any], names: list[str]) -> Any:
    """A plain class with the slots of ``cls``, or None when one cannot stand
    in for it. A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__`` (a call and a descriptor look-up per field, about
    1,500 instructions each here, ~11,600 for a five-field record). When that
    ``__init__`` is the one ``dataclasses`` wrote (nothing but those
    assignments: no ``__post_init__``, every field an argument), the same
    object is made by filling the slots of a twin class with plain attribute
    stores and giving the object its real class (~2,700). None: no twin. CPython allows the
    ``__class__`` assignment only between classes of the same memory layout
    (the same slots), and checks it; it is tried once here."""
    kind: Any = cls  # looked at as any object: mypy types __new__ and __setattr__ too narrowly to compare
    init: Any = cls.__dict__.get("__init__")
    slots = cls.__dict__.get("__slots__")
    written_by_dataclasses = getattr(getattr(init, "__code__", None), "co_filename", "") == "<string>"
    if (not written_by_dataclasses or hasattr(cls, "__post_init__") or kind.__new__ is not object.__new__
            or not isinstance(slots, tuple) or any(name.startswith("__") for name in names)
            or any(not f.init for f in dataclasses.fields(cls))
            or sorted(list(inspect.signature(init).parameters)[1:]) != sorted(names)):
        return None
    try:  # on the same bases (a request's Request[...]), which must let the stores through
        twin: Any = type(f"_{cls.__name__}Twin", cls.__bases__, {"__slots__": slots})
        if twin.__setattr__ is not object.__setattr__:
            return None
        probe: Any = object.__new__(twin)
        probe.__class__ = cls
    except TypeError:  # another layout: built by its __init__
        return None
    return twin


def _check(variable: str, hint: Any, limit: int | None, convert: Convert, scope: dict[str, Any]) -> list[str]:
    """The lines that check (or convert) one field held in ``variable``."""
    too_long = f" or len({variable}) > {limit}" if limit is not None else ""
    if hint is Any:
        return []
    if hint in _SCALARS:
        return [f"    if type({variable}) is not {_SCALARS[hint]}{too_long if hint is str else ''}:",
                "        raise Mismatch"]
    if hint is float:
        return [f"    if type({variable}) is int:", f"        {variable} = float({variable})",
                f"    elif type({variable}) is not float:", "        raise Mismatch"]
    scope[f"convert_{variable}"] = convert
    called = [f"    {variable} = convert_{variable}({variable})"]
    origin = typing.get_origin(hint)
    options = typing.get_args(hint) if origin in (Union, types.UnionType) else ()
    if len(options) == 2 and type(None) in options:
        (other,) = (o for o in options if o is not type(None))
        if other in _SCALARS:
            length = too_long if other is str else ""
            return [f"    if {variable} is not None and (type({variable}) is not {_SCALARS[other]}{length}):",
                    "        raise Mismatch"]
        if other is float:
            return [f"    if {variable} is not None and type({variable}) is not float:",
                    f"        if type({variable}) is not int:", "            raise Mismatch",
                    f"        {variable} = float({variable})"]
        # None, most often (a record left out): no call for it
        return [f"    if {variable} is not None:", "    " + called[0]]
    # An empty list or object (most of them in a reply) made without a call; a
    # fresh one either way, as orjson made it.
    if origin in (list, tuple):
        empty = "()" if origin is tuple else variable
        return [f"    if type({variable}) is list and not {variable}:", f"        {variable} = {empty}",
                "    else:", "    " + called[0]]
    if origin is dict:
        return [f"    if type({variable}) is not dict or {variable}:", "    " + called[0]]
    return called


def _compile(hint: Any, limit: int | None, fields: Callable[[type[Any]], dict[str, tuple[Any, bool, int | None]]]
             ) -> Convert:
    if hint is Any:
        return _identity
    if hint is str:
        return _exact(str, limit)
    if hint is int:
        return _exact(int, None)
    if hint is bool:
        return _exact(bool, None)
    if hint is float:
        return _float
    if hint is type(None):
        return _none
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return _union([_compile(o, limit, fields) for o in typing.get_args(hint) if o is not type(None)],
                      optional=type(None) in typing.get_args(hint))
    if origin is Literal:
        allowed = typing.get_args(hint)
        return _one_of({(type(option), option): option for option in allowed})
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _one_of({(type(member.value), member.value): member for member in hint})
    if origin in (list, tuple):
        args = typing.get_args(hint)
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            raise _Unsupported
        item_hint = args[0] if args else Any
        if item_hint in _SCALARS:
            return _scalars(item_hint, limit, as_tuple=origin is tuple)
        return _sequence(_compile(item_hint, None, fields), limit, as_tuple=origin is tuple)
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint) or (str, Any)
        if key_hint is not str:
            raise _Unsupported
        return _mapping(_compile(value_hint, None, fields), limit)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        nested = decoder(hint, fields)
        if nested is None:
            raise _Unsupported
        return nested
    raise _Unsupported


def _identity(value: Any) -> Any:
    return value


def _exact(kind: type[Any], limit: int | None) -> Convert:
    def convert(value: Any) -> Any:
        if type(value) is not kind or (limit is not None and len(value) > limit):
            raise Mismatch
        return value

    return convert


def _float(value: Any) -> float:
    kind = type(value)
    if kind is float:
        return typing.cast(float, value)
    if kind is int:
        return float(value)
    raise Mismatch


def _none(value: Any) -> None:
    if value is not None:
        raise Mismatch


def _union(options: list[Convert], *, optional: bool) -> Convert:
    def convert(value: Any) -> Any:
        if value is None and optional:
            return None
        for option in options:
            try:
                return option(value)
            except Mismatch:
                continue
        raise Mismatch

    return convert


def _one_of(allowed: dict[tuple[type[Any], Any], Any]) -> Convert:
    """A Literal or an enum: the value and its exact type (True is not 1)."""

    def convert(value: Any) -> Any:
        try:
            return allowed[type(value), value]
        except (KeyError, TypeError):  # TypeError: an unhashable value
            raise Mismatch from None

    return convert


def _sequence(item: Convert, limit: int | None, *, as_tuple: bool) -> Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, list) or (limit is not None and len(value) > limit):
            raise Mismatch
        if not value:  # most lists in a reply are empty
            return () if as_tuple else []
        items = [item(element) for element in value]
        return tuple(items) if as_tuple else items

    return convert


def _scalars(kind: type[Any], limit: int | None, *, as_tuple: bool) -> Convert:
    """A list of exact ``kind`` (str, int or bool; no length limit on the
    items themselves: none is declared for them): checked in one pass in C,
    without a call per item (a status's 23 actor names: a tenth of it)."""

    def convert(value: Any) -> Any:
        if not isinstance(value, list) or (limit is not None and len(value) > limit):
            raise Mismatch
        if value and set(map(type, value)) != {kind}:  # exact: True is not an int
            raise Mismatch
        return tuple(value) if as_tuple else list(value)

    return convert


def _mapping(item: Convert, limit: int | None) -> Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, dict) or (limit is not None and len(value) > limit):
            raise Mismatch
        if not value:
            return {}
        return {key: item(element) for key, element in value.items()}

    return convert
