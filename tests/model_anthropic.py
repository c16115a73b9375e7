"""Anthropic's Messages API for the scripted model server (what Claude Code
calls): ``POST /v1/messages?beta=true`` answered with its streaming events
(message_start, content_block_start/_delta/_stop, message_delta, message_stop),
or with one JSON message when the request did not ask to stream."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    """An answer in words."""

    text: str
    input_tokens: int = 11
    cache_read_input_tokens: int = 0
    output_tokens: int = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUse:
    """The model asks Claude Code to run one of its tools (``Write``, ``Bash`` …)."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    input_tokens: int = 13
    output_tokens: int = 5


def message_events(answer: Text | ToolUse, *, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of one streamed message."""
    message_id = f"msg_scripted_{next(_ids)}"
    usage = {
        "input_tokens": answer.input_tokens,
        "cache_read_input_tokens": answer.cache_read_input_tokens if isinstance(answer, Text) else 0,
        "cache_creation_input_tokens": 0,
        "output_tokens": 1,
    }
    yield "message_start", {
        "type": "message_start",
        "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage,
        },
    }
    if isinstance(answer, Text):
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": answer.text}}
        stop_reason = "end_turn"
    else:
        block = {"type": "tool_use", "id": f"toolu_scripted_{next(_ids)}", "name": answer.name, "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "input_json_delta",
                                                "partial_json": orjson.dumps(answer.input).decode()}}
        stop_reason = "tool_use"
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                            "usage": {"output_tokens": answer.output_tokens}}
    yield "message_stop", {"type": "message_stop"}


def sse(events: Iterator[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(f"event: {name}\n".encode() + b"data: " + orjson.dumps(data) + b"\n\n" for name, data in events)


def whole_message(answer: Text | ToolUse, *, model: str) -> dict[str, Any]:
    """The same message unstreamed, for a request without ``stream: true``."""
    if isinstance(answer, Text):
        content: list[dict[str, Any]] = [{"type": "text", "text": answer.text}]
        stop_reason = "end_turn"
    else:
        content = [{"type": "tool_use", "id": f"toolu_scripted_{next(_ids)}", "name": answer.name,
                    "input": answer.input}]
        stop_reason = "tool_use"
    return {
        "id": f"msg_scripted_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens,
                  "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
    }


def error_body(status: int, message: str) -> bytes:
    kinds = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error",
             500: "api_error", 529: "overloaded_error"}
    return orjson.dumps({"type": "error", "error": {"type": kinds.get(status, "invalid_request_error"),
                                                     "message": message}})
