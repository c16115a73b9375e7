"""OpenAI's chat completions on the scripted model server (what the
``openai`` runtime calls): ``POST /v1/chat/completions``, one JSON body.
A ``ToolCall`` becomes a ``tool_calls`` message without text, which the
``openai`` runtime cannot use. ``GET /v1/models`` lists the server's models."""

from __future__ import annotations

from typing import Any

import orjson
from model_server import ModelServer, RecordedRequest, Rendered, Reply, ToolCall, listing, route


@route("/v1/chat/completions")
def chat_completions(answer: Reply | ToolCall, request: RecordedRequest, server: ModelServer) -> Rendered:
    number = server.next_id()
    if isinstance(answer, Reply):
        message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{number}", "type": "function",
            "function": {"name": "exec_command", "arguments": orjson.dumps({"cmd": answer.command}).decode()}}]}
    tokens = answer.tokens
    return "application/json", orjson.dumps({
        "id": f"chatcmpl-{number}", "object": "chat.completion", "model": request.json().get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": tokens.input, "completion_tokens": tokens.output,
            "total_tokens": tokens.input + tokens.output,
            "prompt_tokens_details": {"cached_tokens": tokens.cached_input},
            "completion_tokens_details": {"reasoning_tokens": tokens.reasoning},
        },
    })


@listing("/v1/models")
def models(server: ModelServer) -> Rendered:
    return "application/json", orjson.dumps({"object": "list", "data": [
        {"id": name, "object": "model", "owned_by": "scripted"} for name in server.models]})
