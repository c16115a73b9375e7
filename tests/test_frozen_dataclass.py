"""enact's ``dataclass`` for frozen classes (``enact.frozen_dataclass``)
makes classes that behave as the standard library's would, in every respect
a caller sees."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from enact.frozen_dataclass import dataclass as message_dataclass
from enact.messages._registry import protocols

NAN = float("nan")


def _classes(make: Any) -> dict[str, type[Any]]:
    """The same declarations, made by ``make``."""

    @make(frozen=True, slots=True, kw_only=True)
    class Mixed:
        number: int
        ratio: float = 0.0
        note: str = dataclasses.field(default="", repr=False, compare=False)
        tags: tuple[str, ...] = dataclasses.field(default=(), hash=False)

    @make(frozen=True, slots=True, kw_only=True)
    class One:
        value: float

    @make(frozen=True, slots=True, kw_only=True)
    class Empty:
        pass

    @make(frozen=True, slots=True, kw_only=True)
    class OwnEq:
        value: int

        def __eq__(self, other: object) -> bool:
            return True

    @make(frozen=True, slots=True, kw_only=True)
    class OwnHash:
        value: int

        def __hash__(self) -> int:
            return 7

    @make(frozen=True, slots=True, kw_only=True)
    class OwnRepr:
        value: int

        def __repr__(self) -> str:
            return "mine"

    @make(frozen=True, slots=True)
    class Positional:
        first: int
        second: str = "b"

    @make(slots=True)
    class Mutable:
        value: int

    return {cls.__name__: cls for cls in (Mixed, One, Empty, OwnEq, OwnHash, OwnRepr, Positional, Mutable)}


def _observed(classes: dict[str, type[Any]]) -> list[object]:
    """What a caller can see of those classes and their instances."""
    mixed = classes["Mixed"]
    one = classes["One"]
    nan_one = one(value=NAN)
    seen: list[object] = [
        repr(mixed(number=1, ratio=2.0, note="x", tags=("a",))),
        mixed(number=1, note="x") == mixed(number=1, note="y"),
        mixed(number=1) == mixed(number=2),
        mixed(number=1).__eq__(1),
        hash(mixed(number=1, tags=("a",))) == hash(mixed(number=1, tags=("b",))),
        hash(mixed(number=1, ratio=2.0)) == hash((1, 2.0)),
        nan_one == nan_one,
        one(value=NAN) == one(value=NAN),
        hash(one(value=3.0)) == hash((3.0,)),
        repr(classes["Empty"]()), classes["Empty"]() == classes["Empty"](), hash(classes["Empty"]()) == hash(()),
        classes["OwnEq"](value=1) == classes["OwnEq"](value=2), hash(classes["OwnEq"](value=1)) == hash((1,)),
        hash(classes["OwnHash"](value=1)), repr(classes["OwnRepr"](value=1)),
        repr(classes["Positional"](1)), classes["Positional"](1) == classes["Positional"](1, "b"),
        classes["Mutable"](value=1) == classes["Mutable"](value=1), classes["Mutable"].__hash__ is None,
    ]
    for cls in classes.values():
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        seen += [cls.__doc__, cls.__match_args__, cls.__slots__, repr(params),
                 [field.name for field in dataclasses.fields(cls)],
                 getattr(cls.__eq__, "__qualname__", ""), getattr(cls.__repr__, "__qualname__", "")]
    with pytest.raises(dataclasses.FrozenInstanceError) as refused:
        mixed(number=1).number = 2
    seen.append(str(refused.value))
    seen.append(repr(dataclasses.replace(mixed(number=1), ratio=5.0)))
    return seen


def test_classes_made_by_the_message_dataclass_behave_as_the_standard_librarys() -> None:
    assert _observed(_classes(message_dataclass)) == _observed(_classes(dataclasses.dataclass))


def test_a_message_that_holds_itself_shows_as_an_ellipsis_as_the_standard_librarys_does() -> None:
    shown = []
    for make in (message_dataclass, dataclasses.dataclass):
        @make(frozen=True, slots=True, kw_only=True)
        class Box:
            items: list[object]

        box = Box(items=[])
        box.items.append(box)
        shown.append(repr(box))
    assert shown[0] == shown[1]
    assert shown[0].endswith("Box(items=[...])")


def test_every_message_class_declares_the_standard_parameters_of_a_frozen_dataclass() -> None:
    for prefix in protocols():
        module = importlib.import_module(f"enact.messages.{prefix}")
        for cls in vars(module).values():
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__:
                params = cls.__dataclass_params__  # type: ignore[attr-defined]
                assert (params.eq, params.repr, params.frozen) == (True, True, True), cls
                assert cls.__hash__ is not None, cls
