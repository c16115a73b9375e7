"""What ``claude -p --output-format stream-json`` prints, read: the result
object that ends the stream (the answer, the session, the usage, or the
typed failure it says) and the tool uses before it (the Bash commands the
model ran, the skills it took up with its Skill tool, a line for each other tool).

How Claude Code 2.1.328 ends a failed call, measured, is told in
``enact.runtime.claude``.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import orjson

from enact.runtime import (
    CommandRun,
    RuntimeAuthFailed,
    RuntimeFailure,
    RuntimeMalformedOutput,
    RuntimeRateLimited,
    RuntimeResult,
    RuntimeSessionUnknown,
    RuntimeUnavailable,
    Usage,
)
from enact.runtime._subprocess import CommandOutput

_UNREACHABLE = ("can't reach the api server", "econnrefused", "enotfound", "connection refused")
"""How Claude Code says its API cannot be reached (2.1.328: "API Error: Connection
refused … (ECONNREFUSED)" for a closed port), which is ``unavailable``."""

_MESSAGE_LIMIT = 300


def parse_output(output: CommandOutput, *, resumed: str | None) -> RuntimeResult:
    """The result object Claude Code printed, or the typed failure it says."""
    document = _result_object(output.stdout)
    stderr = clip(output.stderr)
    # With stream-json, an unknown session also ends in an error result whose "errors" say it.
    said = f"{output.stderr} {document.get('errors') if document else ''}".lower()
    if resumed is not None and output.exit_code != 0 and "no conversation found" in said:
        raise RuntimeSessionUnknown(f"claude has no session {resumed}: {stderr}")
    if document is None:
        if output.exit_code != 0:
            raise RuntimeFailure(f"claude exited with {output.exit_code}: {stderr or 'no output'}")
        raise RuntimeMalformedOutput(f"claude printed no result object: {clip(output.stdout) or 'nothing'}")
    usage = _usage(document)
    result = document.get("result")
    if document.get("is_error") or output.exit_code != 0:
        raise classify(document, usage)
    if not isinstance(result, str) or not isinstance(document.get("session_id"), str):
        raise RuntimeMalformedOutput(f"claude's result object lacks result or session_id: {clip(output.stdout)}",
                                     usage=usage)
    duration_ms = document.get("duration_ms")
    uses = tool_uses(output.stdout)
    return RuntimeResult(
        text=result,
        native_session=document["session_id"],
        usage=usage,
        duration_s=duration_ms / 1000 if isinstance(duration_ms, (int, float)) else output.duration_s,
        commands=uses.commands,
        progress=uses.progress,
        skills_used=uses.skills,
    )


_EXIT_CODE = re.compile(r"\AExit code (-?\d+)")
"""How Claude Code 2.1.328 starts a failed Bash result: "Exit code 2\nls: cannot access …"."""
_OUTPUT_TAIL = 500


class ToolUses(NamedTuple):
    commands: tuple[CommandRun, ...]
    progress: tuple[str, ...]
    skills: tuple[str, ...]


def tool_uses(stdout: str) -> ToolUses:
    """The Bash commands the model ran (each with its exit status, from the
    ``tool_result`` that answered its ``tool_use``), the skills its Skill tool
    loaded (2.1.328: ``{"skill": NAME}``, answered "Launching skill: NAME";
    a failed one loaded nothing) and a line for each other tool it used (a
    Skill use too), from the stream's assistant and user messages."""
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    results: dict[str, tuple[bool, str]] = {}
    for line in stdout.splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        message = event.get("message") if isinstance(event, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
                uses[str(block.get("id"))] = (str(block.get("name", "?")), block["input"])
            elif block.get("type") == "tool_result":
                results[str(block.get("tool_use_id"))] = (bool(block.get("is_error")), _text_of(block.get("content")))
    commands: list[CommandRun] = []
    progress: list[str] = []
    skills: list[str] = []
    for use_id, (name, given) in uses.items():
        failed, text = results.get(use_id, (True, "no result"))
        if name == "Skill" and not failed and isinstance(given.get("skill"), str):
            skills.append(given["skill"].removeprefix("/"))
        if name == "Bash":
            found = _EXIT_CODE.match(text)
            code = (int(found.group(1)) if found else None) if failed else 0
            output = text[found.end():] if found else text
            commands.append(CommandRun(command=clip(str(given.get("command", "?"))), exit_code=code,
                                       output=output.strip()[-_OUTPUT_TAIL:] if failed else ""))
        else:
            shown = clip(f"{name} {orjson.dumps(given).decode()}")
            progress.append(f"{shown}: failed: {clip(text)}" if failed else shown)
    return ToolUses(commands=tuple(commands), progress=tuple(progress), skills=tuple(dict.fromkeys(skills)))


def _text_of(content: object) -> str:
    """A tool result's content: a string, or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def classify(document: dict[str, Any], usage: Usage) -> RuntimeFailure:
    """From ``api_error_status`` first, then the words of the result."""
    status = document.get("api_error_status")
    text = document.get("result") if isinstance(document.get("result"), str) else ""
    detail = f"{document.get('subtype')}, {document.get('terminal_reason')}"
    if status is not None:
        detail = f"HTTP {status}, {detail}"
    message = f"claude: {clip(str(text)) or 'failed'} ({detail})"
    lowered = str(text).lower()
    if status in (401, 403) or "not logged in" in lowered or "invalid api key" in lowered:
        return RuntimeAuthFailed(f"{message}; set ANTHROPIC_API_KEY or run `claude auth login`", usage=usage)
    if status == 429:
        return RuntimeRateLimited(message, usage=usage)
    if status is None and any(words in lowered for words in _UNREACHABLE):
        return RuntimeUnavailable(message, usage=usage)
    return RuntimeFailure(message, usage=usage)


def _result_object(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            document = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(document, dict) and document.get("type") == "result":
            return document
    return None


def _usage(document: dict[str, Any]) -> Usage:
    usage = document.get("usage")
    table = usage if isinstance(usage, dict) else {}

    def number(key: str) -> int:
        value = table.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    cost = document.get("total_cost_usd")
    # Anthropic counts cached input apart; enact's input counts all of it, as Codex and OpenAI do.
    cached = number("cache_read_input_tokens")
    return Usage(
        input_tokens=number("input_tokens") + cached + number("cache_creation_input_tokens"),
        cached_input_tokens=cached,
        output_tokens=number("output_tokens"),
        cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
    )


def clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MESSAGE_LIMIT else flat[:_MESSAGE_LIMIT] + "…"
