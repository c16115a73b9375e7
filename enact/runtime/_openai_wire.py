"""The chat-completions wire format: a user message's content (text, or
text and images), and what the endpoint answers, read (the completion and
its usage, an error's own words, a Retry-After)."""

from __future__ import annotations

import base64
import mimetypes
import time
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import orjson

from enact.runtime import RuntimeMalformedOutput, Usage

_MESSAGE_LIMIT = 300


def user_content(prompt: str, images: tuple[Path, ...]) -> str | list[dict[str, Any]]:
    """Plain text, or text and images as data URLs (the vision message form)."""
    if not images:
        return prompt
    parts: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for image in images:
        kind = mimetypes.guess_type(image.name)[0] or "image/png"
        data = base64.b64encode(image.read_bytes()).decode()
        parts.append({"type": "image_url", "image_url": {"url": f"data:{kind};base64,{data}"}})
    return parts


def parse_completion(body: bytes) -> tuple[str, Usage]:
    """The answer and usage of a chat-completions reply; raises
    RuntimeMalformedOutput for anything else."""
    try:
        document = orjson.loads(body)
        content = document["choices"][0]["message"]["content"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        raise RuntimeMalformedOutput(f"not a chat completion: {_clip(body)}") from None
    if not isinstance(content, str):
        raise RuntimeMalformedOutput(f"the completion has no text content: {_clip(body)}")
    usage = document.get("usage") if isinstance(document, dict) else None
    return content, _usage(usage if isinstance(usage, dict) else {})


def _usage(usage: dict[str, Any]) -> Usage:
    def number(table: Any, key: str) -> int:
        value = table.get(key) if isinstance(table, dict) else None
        return value if isinstance(value, int) and value >= 0 else 0

    return Usage(
        input_tokens=number(usage, "prompt_tokens"),
        cached_input_tokens=number(usage.get("prompt_tokens_details"), "cached_tokens"),
        output_tokens=number(usage, "completion_tokens"),
        reasoning_tokens=number(usage.get("completion_tokens_details"), "reasoning_tokens"),
    )


def error_message(body: bytes) -> str:
    """The server's own words: OpenAI's ``{"error": {"message": ...}}``,
    Ollama's ``{"error": "..."}``, else the body itself, clipped."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _clip(body)
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return _clip(error["message"].encode())
    if isinstance(error, str):
        return _clip(error.encode())
    return _clip(body)


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _clip(body: bytes) -> str:
    text = " ".join(body.decode("utf-8", "replace").split())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"
