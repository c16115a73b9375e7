"""Anthropic's Messages API on the scripted model server, as Claude Code
calls it: ``POST /v1/messages?beta=true``, answered with the streaming events
(message_start, content_block_start/_delta/_stop, message_delta,
message_stop), or with one JSON message when the request does not stream.
A ``ToolCall`` becomes a call of Claude Code's ``Bash`` tool (or its ``Read``
tool on a file, or its ``Skill`` tool on a skill's name)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from model_server import ModelServer, RecordedRequest, Rendered, Reply, ToolCall, route, sse


def _block(answer: Reply | ToolCall, number: int) -> dict[str, Any]:
    if isinstance(answer, Reply):
        return {"type": "text", "text": answer.text}
    if answer.tool == "Read":
        return {"type": "tool_use", "id": f"toolu_{number}", "name": "Read", "input": {"file_path": answer.command}}
    if answer.tool == "Skill":
        return {"type": "tool_use", "id": f"toolu_{number}", "name": "Skill", "input": {"skill": answer.command}}
    return {"type": "tool_use", "id": f"toolu_{number}", "name": "Bash",
            "input": {"command": answer.command, "description": "scripted command"}}


def _usage(answer: Reply | ToolCall) -> dict[str, int]:
    return {"input_tokens": answer.tokens.input, "cache_read_input_tokens": answer.tokens.cached_input,
            "cache_creation_input_tokens": 0, "output_tokens": answer.tokens.output}


def _events(answer: Reply | ToolCall, model: str, number: int) -> Iterator[tuple[str, dict[str, Any]]]:
    block = _block(answer, number)
    stop_reason = "end_turn" if isinstance(answer, Reply) else "tool_use"
    yield "message_start", {"type": "message_start", "message": {
        "id": f"msg_{number}", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {**_usage(answer), "output_tokens": 1}}}
    if block["type"] == "text":
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {**block, "input": {}}}
        delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                            "usage": {"output_tokens": answer.tokens.output}}
    yield "message_stop", {"type": "message_stop"}


@route("/v1/messages")
def anthropic_messages(answer: Reply | ToolCall, request: RecordedRequest, server: ModelServer) -> Rendered:
    body = request.json()
    model = body.get("model", "claude-scripted")
    number = server.next_id()
    if body.get("stream"):
        return "text/event-stream", sse(_events(answer, model, number))
    message = {
        "id": f"msg_{number}", "type": "message", "role": "assistant", "model": model,
        "content": [_block(answer, number)], "stop_reason": "end_turn" if isinstance(answer, Reply) else "tool_use",
        "stop_sequence": None, "usage": _usage(answer),
    }
    return "application/json", orjson.dumps(message)
