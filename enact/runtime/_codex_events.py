"""What ``codex exec --json`` prints, read: one JSON event a line (Codex
0.169: ``thread.started``, ``turn.started``/``completed``/``failed``,
``error`` for its retries, ``item.started``/``completed`` for messages,
command executions and errors); and what a call's output means, its result
or the typed failure it ended in (``interpret``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from enact.runtime import (
    CommandRun,
    RuntimeAuthFailed,
    RuntimeFailure,
    RuntimeMalformedOutput,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeResult,
    RuntimeSessionUnknown,
    Usage,
)
from enact.runtime._subprocess import CommandOutput

_PROGRESS_LIMIT = 300
_OUTPUT_TAIL = 500
"""How much of a failed command's output its record keeps (the end, where the error is)."""

@dataclass(slots=True)
class CodexTurn:
    """What the JSON lines of one ``codex exec`` said."""

    thread_id: str | None = None
    completed: bool = False
    failure: str | None = None
    usage: Usage = field(default_factory=Usage)
    answer: str | None = None
    diagnostics: list[str] = field(default_factory=list)
    progress: list[str] = field(default_factory=list)
    commands: list[CommandRun] = field(default_factory=list)
    unreadable_lines: int = 0


def parse_events(stdout: str) -> CodexTurn:
    """Read the events; unknown event types are ignored, so a newer Codex
    that adds some still works."""
    turn = CodexTurn()
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            turn.unreadable_lines += 1
            continue
        if isinstance(event, dict):
            _apply(turn, event)
    return turn


def _apply(turn: CodexTurn, event: dict[str, Any]) -> None:
    match event.get("type"):
        case "thread.started":
            turn.thread_id = str(event.get("thread_id") or "") or turn.thread_id
        case "turn.completed":
            turn.completed, turn.failure = True, None
            turn.usage = usage_of(event.get("usage"))
        case "turn.failed":
            error = event.get("error")
            turn.failure = str(error.get("message") if isinstance(error, dict) else error or "the turn failed")
        case "error":
            # The CLI reports its retries ("Reconnecting... 2/5") this way and may still complete.
            turn.diagnostics.append(str(event.get("message", "")))
        case "item.completed":
            item = event.get("item")
            if isinstance(item, dict):
                _item(turn, item)


def _item(turn: CodexTurn, item: dict[str, Any]) -> None:
    kind = item.get("type")
    if kind == "agent_message":
        turn.answer = str(item.get("text", ""))
    elif kind == "error":
        turn.diagnostics.append(str(item.get("message", "")))
    elif kind == "command_execution":
        code = item.get("exit_code")
        output = str(item.get("aggregated_output") or "")
        turn.commands.append(CommandRun(command=short(str(item.get("command", "?"))),
                                        exit_code=code if isinstance(code, int) else None,
                                        output=output[-_OUTPUT_TAIL:]))
    else:
        detail = item.get("text") or {k: v for k, v in item.items() if k not in ("id", "type")}
        turn.progress.append(short(f"{kind}: {detail}"))


def usage_of(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage()

    def count(name: str) -> int:
        value = raw.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    return Usage(
        input_tokens=count("input_tokens"),
        cached_input_tokens=count("cached_input_tokens"),
        output_tokens=count("output_tokens"),
        reasoning_tokens=count("reasoning_output_tokens"),
    )


def total(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        cached_input_tokens=a.cached_input_tokens + b.cached_input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        reasoning_tokens=a.reasoning_tokens + b.reasoning_tokens,
    )


def short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _PROGRESS_LIMIT else text[: _PROGRESS_LIMIT - 1] + "…"


def minus(after: Usage, before: Usage) -> Usage:
    """What one turn spent, from the thread's totals after and before it."""
    return Usage(
        input_tokens=max(0, after.input_tokens - before.input_tokens),
        cached_input_tokens=max(0, after.cached_input_tokens - before.cached_input_tokens),
        output_tokens=max(0, after.output_tokens - before.output_tokens),
        reasoning_tokens=max(0, after.reasoning_tokens - before.reasoning_tokens),
    )


def warnings_of(stderr: str) -> list[str]:
    """The warnings Codex printed on stderr (``WARNING: proceeding, even
    though we could not create PATH aliases: …`` when its sandbox helper is
    missing, after which every shell call fails), for the task log."""
    return [short(f"codex warned: {line.strip()}") for line in stderr.splitlines()
            if line.strip().upper().startswith("WARNING")]


_AUTH = re.compile(r"\b40[13]\b|unauthori[sz]ed|forbidden|not logged in|invalid[ _]api[ _]key|codex login", re.I)
_RATE = re.compile(r"\b429\b|rate[ _-]?limit|quota|too many requests", re.I)
_UNKNOWN_SESSION = re.compile(r"no rollout found|no saved session|session .* not found", re.I)
_NOTHING = Usage()


def classify(evidence: str, *, message: str, usage: Usage) -> RuntimeFailure:
    """The failure ``evidence`` (what the CLI said) describes: auth,
    rate-limited, else failed; ``message`` is what it says to the owner."""
    if _AUTH.search(evidence):
        return RuntimeAuthFailed(message, usage=usage)
    if _RATE.search(evidence):
        return RuntimeRateLimited(message, usage=usage)
    return RuntimeFailure(message, usage=usage)


_SKILL_READ = re.compile(r"\.(?:agents|codex)/skills/([a-z0-9][a-z0-9-]*)/SKILL\.md")
"""How Codex takes up a skill it lists (0.169 has no skill tool for a local
skill: its instructions say to open the ``SKILL.md`` the listing names)."""


def skills_read(commands: list[CommandRun]) -> tuple[str, ...]:
    """The skills whose ``SKILL.md`` a command that succeeded read, in order."""
    found = [name for command in commands if not command.failed for name in _SKILL_READ.findall(command.command)]
    return tuple(dict.fromkeys(found))


def interpret(request: RuntimeRequest, output: CommandOutput, last_message: str, *,
              spent_before: Usage = _NOTHING) -> RuntimeResult:
    """The result of one call, or the typed failure it ended in;
    ``spent_before`` is the thread's total before this turn."""
    turn = parse_events(output.stdout)
    turn.usage = minus(turn.usage, spent_before)
    stderr = output.stderr.strip()
    if request.native_session and _UNKNOWN_SESSION.search(stderr):
        raise RuntimeSessionUnknown(f"codex has no session {request.native_session}: {last_line(stderr)}")
    if turn.completed and output.exit_code == 0:
        answer = last_message.strip() or (turn.answer or "").strip()
        if not answer:
            raise RuntimeMalformedOutput("codex completed the turn without an answer", usage=turn.usage)
        return RuntimeResult(
            text=answer,
            native_session=None if not request.session_key else turn.thread_id or request.native_session,
            usage=turn.usage,
            duration_s=output.duration_s,
            progress=(*warnings_of(stderr), *turn.progress),
            commands=tuple(turn.commands),
            skills_used=skills_read(turn.commands),
        )
    if turn.failure is None and output.exit_code == 0 and not turn.diagnostics:
        raise RuntimeMalformedOutput(
            f"codex exited 0 without finishing a turn ({turn.unreadable_lines} unreadable lines)", usage=turn.usage
        )
    how = f"was killed by signal {-output.exit_code}" if output.exit_code < 0 else f"exited {output.exit_code}"
    exited = f"{how}: {last_line(stderr) or 'nothing on stderr'}"
    # Shown: what the turn failed with, else a kill, else the last diagnostic,
    # else how it ended; classified: all of it (a 401 may show only in the retries).
    if turn.failure:
        shown = turn.failure
    elif output.exit_code < 0 or not turn.diagnostics:
        shown = exited
    else:
        shown = turn.diagnostics[-1]
    raise classify(" ".join([shown, *turn.diagnostics, stderr]), message=f"codex: {short(shown)}", usage=turn.usage)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return short(lines[-1]) if lines else ""
