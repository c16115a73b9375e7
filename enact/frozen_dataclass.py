"""``dataclass`` for enact's frozen classes (messages, records, settings),
cheaper to apply than the standard library's and the same in every respect a
caller can see.

Python 3.11's ``dataclasses`` compiles each method it adds from source text
(``exec``), six per frozen class, and compiling is most of what a class costs
to make: the daemon makes some 450 at start (a frozen class about 0.6 ms),
every CLI command the few it needs. Three of the six (``__eq__``,
``__hash__``, ``__repr__``) need no code of their own: here they are closures
over the class's field names, which the standard library is told not to
generate; it still makes ``__init__`` and the frozen ``__setattr__`` and
``__delattr__``, whose speed or form depends on the fields. What each method
returns, which fields it uses, the methods a class defines itself (left as
they are) and ``__dataclass_params__`` are as the standard library's. Any
other use (``order``, ``unsafe_hash``, ``eq=False``, not ``frozen``) is the
standard library's own.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of those attributes, as the generated methods build it
    (a tuple even of one: its hash and comparison are the tuple's)."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        (name,) = names
        return lambda instance: (getattr(instance, name),)
    return lambda instance: ()


def _methods(cls: type[Any], fields: tuple[dataclasses.Field[Any], ...]) -> dict[str, Callable[..., Any]]:
    compared = _values_of(tuple(f.name for f in fields if f.compare))
    hashed = _values_of(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    shown = tuple(f.name for f in fields if f.repr)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in shown)})"

    methods: dict[str, Callable[..., Any]] = {"__eq__": __eq__, "__hash__": __hash__, "__repr__": __repr__}
    for name, method in methods.items():
        method.__qualname__ = f"{cls.__qualname__}.{name}"
    return methods


def _frozen(cls: type[Any], options: dict[str, Any]) -> type[Any]:
    own = cls.__dict__
    # What the standard library would do with a __hash__ of the class's own
    # (frozen and eq: keep it; none, or one set to None beside an __eq__: add one).
    own_hash = own.get("__hash__", dataclasses.MISSING)
    keeps_hash = not (own_hash is dataclasses.MISSING or (own_hash is None and "__eq__" in own))
    keeps = {name for name in ("__eq__", "__repr__") if name in own} | ({"__hash__"} if keeps_hash else set())
    made: type[Any] = dataclasses.dataclass(cls, **options, eq=False, repr=False)
    for name, method in _methods(made, dataclasses.fields(made)).items():
        if name not in keeps:
            setattr(made, name, method)
    params = made.__dataclass_params__
    made.__dataclass_params__ = type(params)(
        params.init, True, True, params.order, params.unsafe_hash, params.frozen)
    return made


def _dataclass(cls: type[Any] | None = None, /, **options: Any) -> Any:
    fast = (options.get("frozen") is True and options.get("eq", True) is True and options.get("repr", True) is True
            and not options.get("order") and not options.get("unsafe_hash"))
    if not fast:
        return dataclasses.dataclass(cls, **options) if cls is not None else dataclasses.dataclass(**options)
    options = {name: value for name, value in options.items() if name not in ("eq", "repr")}

    def wrap(cls: type[Any]) -> type[Any]:
        return _frozen(cls, options)

    return wrap if cls is None else wrap(cls)


if TYPE_CHECKING:  # the type checker knows the standard one's meaning; this one has it
    from dataclasses import dataclass as dataclass
else:
    dataclass = _dataclass
