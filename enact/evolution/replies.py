"""Checking a model's JSON reply, shared by the scan, synthesis and
brainstorm: each says what it expects, these say in one line what is wrong.
Every function raises the caller's own error type, so a refusal names the
step that refused."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson


def json_array(text: str, *, most: int, items: str, error: type[Exception]) -> list[object]:
    """The reply as one JSON array of at most ``most`` items: nothing
    around it, no code fence."""
    try:
        data = orjson.loads(text.strip() or b"\0")
    except orjson.JSONDecodeError:
        raise error("the reply is not a JSON array (prose, a code fence or malformed JSON around it?)") from None
    if not isinstance(data, list):
        raise error(f"the reply is a JSON {type(data).__name__}, not a JSON array")
    if len(data) > most:
        raise error(f"the reply has {len(data)} {items}; at most {most} are allowed")
    return data


def json_object(text: str, *, error: type[Exception]) -> dict[str, Any]:
    """The reply as exactly one JSON object: nothing around it."""
    try:
        data = orjson.loads(text.strip() or b"\0")
    except orjson.JSONDecodeError:
        raise error("the reply is not one JSON object (prose, a code fence or malformed JSON around it?)") from None
    if not isinstance(data, dict):
        raise error(f"the reply is a JSON {type(data).__name__}, not a JSON object")
    return data


def exact_keys(item: object, keys: Collection[str], *, where: str, error: type[Exception]) -> dict[str, Any]:
    """``item`` as an object with exactly ``keys`` (its values still JSON, unchecked)."""
    if not isinstance(item, dict):
        raise error(f"{where} is not a JSON object")
    missing = [key for key in keys if key not in item]
    if missing:
        raise error(f"{where} lacks {', '.join(missing)}")
    extra = sorted(key for key in item if key not in keys)
    if extra:
        raise error(f"{where} has keys that are not allowed: {', '.join(extra)}")
    return item


def text_field(item: dict[str, Any], key: str, *, most: int, where: str, error: type[Exception]) -> str:
    """``item[key]`` as non-empty text of at most ``most`` characters."""
    value = item[key]
    if not isinstance(value, str) or not value.strip():
        raise error(f"{where}: {key} must be a non-empty string")
    if len(value) > most:
        raise error(f"{where}: {key} has {len(value)} characters; at most {most} are allowed")
    return value
