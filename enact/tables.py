"""Files of ``[[name]]`` tables (``scripted.toml``, ``commands.toml``): read
once, with one-line errors that name the file and the table."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any


def table_list(
    text: str, *, source: str, name: str, keys: frozenset[str], error: type[ValueError]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, table)`` for each ``[[name]]`` table; ``where`` is the
    prefix for any further error about that table. Raises ``error``."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as problem:
        raise error(f"{source} is not valid TOML: {problem}") from None
    unknown = set(document) - {name}
    if unknown:
        raise error(f"{source}: unknown key {sorted(unknown)[0]!r} (expected [[{name}]] tables)")
    tables = document.get(name, [])
    if not isinstance(tables, list):
        raise error(f"{source}: {name!r} must be a list of [[{name}]] tables")
    for index, table in enumerate(tables):
        where = f"{source}: {name} #{index + 1}"
        extra = set(table) - keys
        if extra:
            raise error(f"{where}: unknown key {sorted(extra)[0]!r}")
        yield where, table
