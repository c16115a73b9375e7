"""Tasks from chat: the ``task.*`` commands (chat commands and model actions)
and the brief a conversation's own session writes before a task is queued.

``task.add`` asks the conversation's session (the runtime, resuming the
conversation's native session) for a brief: the intended outcome, decisions,
constraints, targets and what is ruled out, at most 3,000 characters; or a
clarification question, which stops the queueing and is shown to the owner.
The brief travels with the task; the transcript does not. The idempotency
key derives from the chat event's identity, so a redelivered event queues
its task once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import orjson

from enact.commands import Authority, Command, CommandCall, CommandContext, CommandFailed, Param, answered
from enact.frozen_dataclass import dataclass
from enact.messages.inbox import Notify
from enact.runtime import RuntimeFailure
from enact.spoken import Audience, command
from enact.tasks.records import MAX_BRIEF, ConversationRef, Task, TaskState, check_request, clip

BRIEF_MARKER = "[task brief]"
"""Leads the brief request's owner message, so scripted rules can tell it apart."""

NOTIFIER = "tasks"
"""The actor that holds a task's outcome notice until the inbox takes it."""



@dataclass(frozen=True, slots=True)
class Brief:
    text: str


@dataclass(frozen=True, slots=True)
class Question:
    text: str


def brief_prompt(request: str) -> str:
    return (
        f"{BRIEF_MARKER} The owner's request is about to be queued as a task for a worker that will not see "
        "this conversation:\n"
        f"{request}\n\n"
        "Write the worker's brief from what was said here: the intended outcome, the decisions taken, the "
        f"constraints, the targets (files, commands), and what is ruled out; at most {MAX_BRIEF} characters. "
        'Answer with only a JSON object: {"brief": "..."}; or, if the request is too unclear to start, '
        '{"question": "..."} with the one question to ask the owner.'
    )


def parse_brief(answer: str) -> Brief | Question:
    """The session's answer: a JSON brief or question; any other text is
    taken as the brief itself. Clipped to the limit either way."""
    text = answer.strip()
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        question, brief = parsed.get("question"), parsed.get("brief")
        if isinstance(question, str) and question.strip():
            return Question(question.strip())
        if isinstance(brief, str):
            return Brief(clip(brief.strip(), MAX_BRIEF))
    return Brief(clip(text, MAX_BRIEF))


def task_key(request_id: str, request: str) -> str:
    """One task per chat event and request: a redelivered event (same
    request id) submits under the same key. Without an event, a fresh key."""
    if not request_id:
        return ""
    digest = hashlib.sha256(request.encode()).hexdigest()[:16]
    return f"chat:{request_id}:task:{digest}"


def conversation_of(call: CommandCall) -> ConversationRef | None:
    channel, sep, conversation = call.conversation.partition(":")
    if not sep:
        return None
    return ConversationRef(channel=channel, conversation=conversation, session_key=call.conversation)


def _task_id(call: CommandCall) -> int:
    raw = call.args.get("id", call.args.get("text", ""))
    text = str(raw).strip().lstrip("#")
    if not text.isdigit():
        raise CommandFailed(f"{call.name} needs a task id, such as /{call.name} 3")
    return int(text)


def _describe(task: Task) -> str:
    progress = f" ({task.progress})" if task.progress else ""
    review = f", review {task.review_id}" if task.review_id else ""
    summary = f": {task.summary}" if task.summary else ""
    return f"task {task.id} {task.state}{progress}, attempt {task.attempt}{review}{summary}"


def _add(call: CommandCall, context: CommandContext) -> str:
    from enact.messages.tasks import Submit

    request = str(call.args.get("text", "")).strip()
    if not request:
        raise CommandFailed("task.add needs the task's text")
    if not context.agentic:
        raise CommandFailed("not queued: the selected runtime cannot work in a repository (it is not agentic)")
    # Checked before the brief too, so that a refused request is not sent to the model for one.
    refused = check_request(request)
    if refused is not None:
        raise CommandFailed(f"not queued: {refused}")
    brief: Brief | Question = Brief("")
    if context.converse is not None and call.conversation:
        try:
            answer = context.converse(call.conversation, brief_prompt(request),
                                      owner_message=f"{BRIEF_MARKER} {request}", owners=call.owners)
        except RuntimeFailure as error:
            raise CommandFailed(f"not queued: the conversation's session could not write the brief "
                                f"({error.kind}: {error}); ask again") from None
        brief = parse_brief(answer)
    if isinstance(brief, Question):
        return f"Not queued yet: the task needs an answer first. Ask the owner: {brief.text}"
    message = Submit(request=request, brief=brief.text, repo=str(call.args.get("repo", "")), origin=call.origin,
                     idempotency_key=task_key(call.request_id, request),
                     repairs=int(call.args.get("repairs", 2)), deadline_s=int(call.args.get("deadline", 600)),
                     conversation=conversation_of(call))
    reply = answered(context.ask("tasks", message), "not queued")
    if reply.existing:
        return f"task {reply.task.id} was already queued for this message ({reply.task.state})"
    return f"queued task {reply.task.id} on {reply.task.repo}; you will hear here when it ends"


def _list(call: CommandCall, context: CommandContext) -> str:
    from enact.messages.tasks import List

    page = context.ask("tasks", List(limit=10))
    if not page.tasks:
        return "no tasks"
    return "\n".join(_describe(task) for task in page.tasks)


def _show(call: CommandCall, context: CommandContext) -> str:
    from enact.messages.tasks import Get

    task_id = _task_id(call)
    found = answered(context.ask("tasks", Get(task_id=task_id)))
    return f"{_describe(found.task)}\nrequest: {found.task.request}"


def _owner_action(verb: str) -> Callable[[CommandCall, CommandContext], str]:
    def run(call: CommandCall, context: CommandContext) -> str:
        from enact.messages import tasks

        task_id = _task_id(call)
        kind = {"cancel": tasks.Cancel, "retry": tasks.Retry, "resume": tasks.Resume}[verb]
        reply = answered(context.ask("tasks", kind(task_id=task_id, origin=call.origin)))
        if isinstance(reply, tasks.CancelAccepted):
            return f"task {task_id} cancelled" if reply.at_once else \
                f"task {task_id} is running; it stops at its worker's next heartbeat"
        if isinstance(reply, tasks.Submitted):
            return f"queued task {reply.task.id} as a retry of task {task_id}"
        return f"task {task_id} queued again"

    return run


def outcome_notice(task: Task) -> Notify | None:
    """What the owner is told, on the conversation a task came from, once it
    ended or paused; None for any other change, or a task not from chat."""
    if task.conversation is None or not (task.state.ended or task.state is TaskState.PAUSED):
        return None
    # A notice lands on a conversation: it speaks chat, whoever started the task.
    show = command("review.show", "review show", task.review_id).to(Audience.CHAT)
    review = f" Review {task.review_id}: `{show}`." if task.review_id else ""
    worktree = f" Its worktree is kept at {task.worktree}." if task.worktree and task.state is not \
        TaskState.SUCCEEDED else ""
    text = f"Task {task.id} {task.state}: {task.summary or 'no summary'}.{review}{worktree}"
    # What the conversation's next call is told first (``sessions.AddNote``): short, the review by id.
    reviewed = f"; review {task.review_id}" if task.review_id else ""
    note = f"Task {task.id} ({clip(task.request, 200)}) {task.state}: {clip(task.summary or 'no summary', 300)}" \
           f"{reviewed}"
    return Notify(channel=task.conversation.channel, conversation=task.conversation.conversation,
                  notice_id=f"task:{task.id}:{task.attempt}:{task.state}", text=text, session_note=note,
                  origin=task.origin, acknowledge_to=NOTIFIER)


def task_commands() -> list[Command]:
    by_id = {"id": Param(int, required=False, doc="the task id"),
             "text": Param(str, required=False, doc="a task id, as typed in chat", usage="ID")}
    return [
        Command(name="task.add", summary="queue repository work as a task (a brief is written first)",
                handler=_add, authority=Authority.EFFECT,
                params={"text": Param(str, doc="what to do", usage="TEXT"),
                        "repo": Param(str, required=False, doc="the git repository"),
                        "repairs": Param(int, required=False, doc="repair rounds, 0-5"),
                        "deadline": Param(int, required=False, doc="seconds, 60-7200")}),
        Command(name="task.list", summary="the newest tasks", handler=_list),
        Command(name="task.show", summary="one task", handler=_show, params=by_id),
        Command(name="task.cancel", summary="cancel a task", handler=_owner_action("cancel"),
                authority=Authority.HUMAN, params=by_id),
        Command(name="task.retry", summary="retry a failed or cancelled task", handler=_owner_action("retry"),
                authority=Authority.HUMAN, params=by_id),
        Command(name="task.resume", summary="resume a paused task", handler=_owner_action("resume"),
                authority=Authority.HUMAN, params=by_id),
    ]
