"""One root for enact's exceptions, and one pair of replies for its expected
failures: every exception class enact defines derives from ``EnactError``;
no protocol declares a refusal or a not-found reply of its own."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import enact
from enact.errors import EnactError
from enact.messages._registry import Kind, registered, reply_types
from enact.messages.common import NotFound, Refused


def _modules() -> list[str]:
    return sorted(found.name for found in pkgutil.walk_packages(enact.__path__, "enact.")
                  if not found.name.endswith("__main__"))  # runs the CLI when imported


def test_every_exception_class_of_enact_derives_from_enact_error() -> None:
    strays: list[str] = []
    checked = 0
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                checked += 1
                if not issubclass(value, EnactError):
                    strays.append(f"{name}.{value.__qualname__}")
    assert strays == []
    assert checked > 50  # the walk found them (the actors', the storage's, the CLI client's, ...)


def test_no_protocol_declares_a_refusal_or_a_not_found_reply_of_its_own() -> None:
    words = ("Refused", "Rejected", "NotFound", "Unknown", "NoSuch", "NoTask", "NoSession")
    own = [r.name for r in registered()
           if r.kind is Kind.REPLY and r.cls not in (Refused, NotFound) and r.name.split(".")[1].startswith(words)]
    assert own == []
    answered = {cls for r in registered() if r.kind is not Kind.REPLY and hasattr(r.cls, "__orig_bases__")
                for cls in reply_types(r.cls)}
    assert {Refused, NotFound} <= answered
