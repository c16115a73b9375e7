"""``enact send`` and ``enact turns``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from enact.cli._client import ConnectionLost, request
from enact.cli._options import (
    EXIT_FAILED,
    EXIT_USAGE,
    fail,
    home_option,
    needs_daemon,
    print_json,
    refuse_together,
    resolve_home,
)

if TYPE_CHECKING:
    from enact.messages.inbox import Ignored, Outcome
    from enact.messages.local import Send

STOPPED_TEXT = "the daemon stopped before it answered; its next start finishes the event (`enact turns`)"
TAKEN_OVER_TEXT = "the daemon was taken over before it answered; the new daemon finishes the event (`enact turns`)"
DUPLICATE_NOTE = "(duplicate: the earlier reply)"
_OUTCOME_KEYS = ("event_id", "duplicate", "reply", "actions", "attempts", "status", "error")


def _problem(outcome: Any) -> str:
    """What went wrong with a finished or unfinished event, in one line, or ""."""
    from enact.messages import local

    error = " ".join(outcome.error.split())
    match outcome.status:
        case local.IN_PROGRESS:
            return f"no reply yet; event {outcome.event_id} is still being processed (see `enact turns`)"
        case local.INTERRUPTED:
            return TAKEN_OVER_TEXT if outcome.error == local.TAKEN_OVER else STOPPED_TEXT
        case "runtime_failed":
            return f"the runtime could not answer (the reply says what to do): {error or 'no error recorded'}"
        case "failed":
            return f"event {outcome.event_id} failed after {outcome.attempts} attempts: {error or 'no error recorded'}"
        case "delivery_failed":
            return f"the reply was not delivered (every attempt failed): {error or 'no error recorded'}"
        case "delivery_uncertain":
            return f"the reply may not have been delivered: {error or 'its delivery was interrupted'}"
    return ""


class _TextAfterOptions(click.Command):
    """A command whose first word that is not one of its own options starts
    the text, and all words from there on are the text: a message may begin
    with ``/`` or ``-`` (``/forget --redact X``) without a ``--`` before it."""

    def parse_args(self, context: click.Context, args: list[str]) -> list[str]:
        takes_value = {name for param in self.get_params(context) if isinstance(param, click.Option)
                       and not param.is_flag for name in param.opts}
        flags = {name for param in self.get_params(context) if isinstance(param, click.Option)
                 and param.is_flag for name in param.opts}
        position = 0
        while position < len(args):
            word = args[position]
            if word == "--":
                break  # the text is marked already
            if word in takes_value:
                position += 2
            elif word in flags or word.partition("=")[0] in takes_value:
                position += 1
            else:
                args = [*args[:position], "--", *args[position:]]
                break
        return super().parse_args(context, args)


@click.command("send", cls=_TextAfterOptions)
@home_option
@click.option("--conversation", default="cli", show_default=True, help="Conversation id on the local channel.")
@click.option("--message-id", default="", help="Message id (default: a fresh one; reuse one to redeliver).")
@click.option("--reply-to", default="", help="Text of the message this one replies to (quoted as data).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.argument("text", nargs=-1, required=True)
@needs_daemon
def send(home: Path | None, conversation: str, message_id: str, reply_to: str, as_json: bool,
         text: tuple[str, ...]) -> None:
    """Send TEXT to enact through the local channel and print the reply.

    The first word that is not one of the options below starts TEXT, and
    every word from there on is TEXT, so it may begin with ``/`` or ``-``
    (``enact send /forget --redact X``).
    TEXT ``-`` reads the text from standard input (UTF-8), which has no
    argument-length limit. Exits 0 once the reply is delivered, 1 if the
    event was ignored, failed, failed on the runtime (status
    ``runtime_failed``: the reply is the advice on what to fix), is still in
    progress or its reply was not delivered, 2 for text that cannot be sent
    (empty, not UTF-8, too long), 3 if no daemon runs."""
    import uuid

    from enact.messages import local, to_wire
    from enact.messages.local import Send

    body = _stdin_text(as_json) if text == ("-",) else " ".join(text)
    if not body.strip():
        fail("there is no text to send", as_json=as_json, code=EXIT_USAGE, status="bad_input")
    # Chosen here, so that the event id is known even if the daemon goes away.
    message_id = message_id or uuid.uuid4().hex
    conversation = conversation or "cli"
    message = Send(text=body, conversation=conversation, message_id=message_id, reply_to=reply_to)
    try:
        reply = _send_to_current_daemon(resolve_home(home), message)
    except ConnectionLost:
        from enact.messages.inbox import ChatEvent

        event = ChatEvent(channel=local.NAME, conversation=conversation, message_id=message_id, text="")
        # Whether it stopped or was taken over, the daemon that had the event is gone.
        fail(STOPPED_TEXT, as_json=as_json, event_id=event.event_id, status=local.INTERRUPTED)
    from enact.messages.inbox import Ignored

    if isinstance(reply, Ignored):
        fail(f"not processed: {reply.reason}", as_json=as_json, event_id=reply.event_id, status="ignored",
             reason=reply.reason)
    outcome = reply
    problem = _problem(outcome)
    if as_json:
        body = to_wire(outcome)["body"]
        if outcome.status == local.INTERRUPTED:
            body["error"] = problem  # the words, as when the connection itself is lost
        print_json({key: body[key] for key in _OUTCOME_KEYS})
    else:
        if outcome.status not in (local.IN_PROGRESS, local.INTERRUPTED):
            click.echo(outcome.reply)
            if outcome.duplicate:
                click.echo(DUPLICATE_NOTE, err=True)
        if problem:
            click.echo(f"enact: {problem}", err=True)
    if problem:
        sys.exit(EXIT_FAILED)


def _stdin_text(as_json: bool) -> str:
    from enact.messages.common import MAX_TEXT

    # One byte over the longest text (4 bytes a character) is enough to know
    # it is too long, without reading an endless pipe into memory.
    data = sys.stdin.buffer.read(4 * MAX_TEXT + 1)
    if len(data) > 4 * MAX_TEXT:
        fail(f"the text on standard input is longer than {MAX_TEXT} characters", as_json=as_json,
             code=EXIT_USAGE, status="bad_input")
    try:
        return data.decode("utf-8").removesuffix("\n")
    except UnicodeDecodeError as error:
        fail(f"the text on standard input is not valid UTF-8 (byte {error.start})", as_json=as_json,
             code=EXIT_USAGE, status="bad_input")


_TAKEOVER_RETRY_S = 10.0


def _send_to_current_daemon(home: Path, message: Send) -> Outcome | Ignored:
    """Send, and if the daemon reached was fenced before it accepted the event
    (a takeover under way), send again to the daemon that replaced it: the
    message id is the same, so the inbox takes the event at most once."""
    from enact.cli._client import NotRunning, TakenOver

    try:
        return request(home, message, timeout=None)
    except TakenOver as error:
        taken_over = error
    deadline = time.monotonic() + _TAKEOVER_RETRY_S
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            return request(home, message, timeout=None)
        except TakenOver as error:
            taken_over = error
        except NotRunning:
            continue  # between the old daemon's socket and the new one's
    raise taken_over


@click.command("turns")
@home_option
@click.option("--conversation", default="", help="Only this conversation (id, or channel:id).")
@click.option("--since", type=click.IntRange(min=0), default=0, help="Only turns after this cursor.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=50, show_default=True,
              help="At most this many turns, oldest first.")
@click.option("--last", type=click.IntRange(min=1, max=1000), default=None,
              help="The newest N turns instead (not with --limit; still printed oldest first).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def turns(home: Path | None, conversation: str, since: int, limit: int, last: int | None, as_json: bool) -> None:
    """Read the turn log by cursor."""
    from datetime import UTC, datetime

    from enact.messages import to_wire
    from enact.messages.inbox import ReadTurns

    refuse_together("last", "limit", as_json=as_json)  # the newest N, or the oldest N: not both
    message = ReadTurns(conversation=conversation, since=since, limit=limit, last=last or 0)
    reply = request(resolve_home(home), message)
    cut_short = ""
    if reply.cut_short:
        cut_short = (f"(fewer turns than asked for, to keep the reply under 1 MiB: "
                     f"{'older ones are left out' if last else f'read on with --since {reply.next_cursor}'})")
    if as_json:
        print_json(to_wire(reply)["body"]["turns"])
        if cut_short:
            click.echo(cut_short, err=True)  # the list stays the list; the note goes beside it
        return
    if not reply.turns:
        where = f" in conversation {conversation!r}" if conversation else ""
        after = f" after cursor {since}" if since else ""
        hint = "`enact turns --last 10` shows the newest of all" if since or conversation else "none is logged yet"
        click.echo(f"no turns{where}{after} ({hint})")
        return
    for turn in reply.turns:
        when = datetime.fromtimestamp(turn.time, UTC).strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"#{turn.cursor} {when} {turn.channel}:{turn.conversation} [{turn.outcome}]")
        # A notice has no message: enact told it unasked.
        click.echo("  (notice from enact)" if turn.is_notice else f"  > {turn.message}")
        for line in turn.reply.splitlines() or [""]:
            click.echo(f"  < {line}")
        for line in turn.error.splitlines():
            click.echo(f"  ! {line}")
    click.echo(f"(next cursor: {reply.next_cursor})")
    if cut_short:
        click.echo(cut_short)
