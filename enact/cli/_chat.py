"""``enact send`` and ``enact turns``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from enact.channels.local import IN_PROGRESS
from enact.cli._client import request
from enact.cli._options import home_option, needs_daemon, print_json, resolve_home
from enact.messages import to_wire
from enact.messages.inbox import Ignored, Outcome, ReadTurns, Send, Turns


@click.command("send")
@home_option
@click.option("--conversation", default="cli", show_default=True, help="Conversation id on the local channel.")
@click.option("--message-id", default="", help="Message id (default: a fresh one; reuse one to redeliver).")
@click.option("--reply-to", default="", help="Text of the message this one replies to (quoted as data).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.argument("text", nargs=-1, required=True)
@needs_daemon
def send(home: Path | None, conversation: str, message_id: str, reply_to: str, as_json: bool,
         text: tuple[str, ...]) -> None:
    """Send TEXT to enact through the local channel and print the reply."""
    message = Send(text=" ".join(text), conversation=conversation, message_id=message_id, reply_to=reply_to)
    outcome = request(resolve_home(home), message, timeout=None)
    if isinstance(outcome, Ignored):
        click.echo(f"enact: not processed: {outcome.reason}", err=True)
        sys.exit(1)
    assert isinstance(outcome, Outcome)
    if outcome.status == IN_PROGRESS and not as_json:
        click.echo(
            f"enact: no reply yet; event {outcome.event_id} is still being processed (see `enact turns`)", err=True
        )
        sys.exit(1)
    if as_json:
        body = to_wire(outcome)["body"]
        print_json({key: body[key] for key in ("event_id", "duplicate", "reply", "actions", "attempts", "status")})
        return
    click.echo(outcome.reply)


@click.command("turns")
@home_option
@click.option("--conversation", default="", help="Only this conversation (id, or channel:id).")
@click.option("--since", type=click.IntRange(min=0), default=0, help="Only turns after this cursor.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def turns(home: Path | None, conversation: str, since: int, limit: int, as_json: bool) -> None:
    """Read the turn log by cursor."""
    reply = request(resolve_home(home), ReadTurns(conversation=conversation, since=since, limit=limit))
    assert isinstance(reply, Turns)
    if as_json:
        print_json(to_wire(reply)["body"]["turns"])
        return
    for turn in reply.turns:
        when = datetime.fromtimestamp(turn.time, UTC).strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"#{turn.cursor} {when} {turn.channel}:{turn.conversation} [{turn.outcome}]")
        click.echo(f"  > {turn.message}")
        for line in turn.reply.splitlines() or [""]:
            click.echo(f"  < {line}")
    if reply.turns:
        click.echo(f"(next cursor: {reply.next_cursor})")


COMMANDS: list[click.Command] = [send, turns]
