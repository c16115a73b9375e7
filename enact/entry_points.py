"""The installed entry points of one group, read without importlib.metadata.

Every CLI command reads the ``enact.extensions`` group to know its commands,
and importing ``importlib.metadata`` (email, zipfile, csv: about 13 ms) would
cost a fifth of what a command may take before it talks to the daemon. What
enact needs of it is small: the ``*.dist-info`` and ``*.egg-info``
directories on ``sys.path`` (installed packages, editable installs and a
``--target`` directory alike), the first of each distribution name winning
as with importlib.metadata, and the group's section of their
``entry_points.txt``. Zipped distributions and custom path finders are not
read: an extension is an installed directory.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable

from enact.frozen_dataclass import dataclass

_SUFFIXES = (".dist-info", ".egg-info")
_NAME_END = re.compile(r"-\d")
"""Where a distribution directory's version begins (``enact-0.1.0.dist-info``,
``enact_hello-0.1-py3.11.egg-info``); a bare ``enact.egg-info`` has none."""


@dataclass(frozen=True, slots=True)
class EntryPoint:
    name: str
    value: str
    """``module:attribute``."""
    distribution: str
    """The distribution's name, as its directory spells it."""

    def load(self) -> object:
        """What ``value`` names; raises whatever importing its module raises."""
        module, _, attribute = self.value.partition(":")
        loaded: object = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            loaded = getattr(loaded, part)
        return loaded


def entry_points(group: str, path: Iterable[str] | None = None) -> list[EntryPoint]:
    """The group's entry points of every distribution found on ``path``
    (``sys.path``), in path order."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for directory in sys.path if path is None else path:
        try:
            names = sorted(os.listdir(directory or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith(_SUFFIXES):
                continue
            stem = name.rsplit(".", 1)[0]
            distribution = _NAME_END.split(stem, maxsplit=1)[0]
            key = re.sub(r"[-_.]+", "_", distribution).lower()
            if key in seen:
                continue
            seen.add(key)
            try:
                with open(os.path.join(directory or ".", name, "entry_points.txt"), encoding="utf-8") as file:
                    text = file.read()
            except OSError:
                continue
            found.extend(EntryPoint(entry, value, distribution) for entry, value in _section(text, group))
    return found


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """``name = value`` lines of ``[group]`` in an entry_points.txt."""
    entries: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            entries.append((name.strip(), value.strip()))
    return entries
