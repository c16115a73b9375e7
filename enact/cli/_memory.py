"""``enact memory ...``: remember, list, show, forget, confirm and reject facts.

Other memory commands (``memory context``) add themselves to the ``memory``
group from their own modules.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import Any

import click

from enact.cli._client import request
from enact.cli._options import (
    EXIT_FAILED,
    EXIT_USAGE,
    end_on_failure,
    fail,
    home_option,
    needs_daemon,
    print_json,
    resolve_home,
)
from enact.wording import counted

_TYPES = ("preference", "fact", "decision", "workflow_rule", "person", "project")
_SCOPES = ("user", "project", "instance")
_CONFIDENCES = ("high", "medium", "low")
_SENSITIVITIES = ("normal", "private", "secret")
_SECRET = "secret"
"""A secret fact's text is listed by no one: ``memory show`` gives it, one fact at a time."""


def _json_option(command: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(command)


@click.group("memory")
def memory() -> None:
    """Long-term facts: what enact remembers, and forgetting."""


def _unexpected(reply: object, as_json: bool) -> None:
    fail(f"unexpected reply {type(reply).__name__}", as_json=as_json)


@memory.command("remember")
@click.argument("text")
@click.option("--type", "fact_type", type=click.Choice(_TYPES), default=None, help="What kind of fact (default fact).")
@click.option("--tag", "tags", multiple=True, help="A tag; repeat for more (at most 8).")
@click.option("--confidence", type=click.Choice(_CONFIDENCES), default=None, help="Default high: it is your word.")
@click.option("--scope", type=click.Choice(_SCOPES), default=None, help="Default user.")
@click.option("--subject", default="", help="Who or what the fact is about.")
@click.option("--sensitivity", type=click.Choice(_SENSITIVITIES), default=None,
              help="private: sent only with memory.send_private; secret: never sent to a model.")
@home_option
@_json_option
@needs_daemon
def remember(text: str, fact_type: str | None, tags: tuple[str, ...], confidence: str | None, scope: str | None,
             subject: str, sensitivity: str | None, home: Path | None, as_json: bool) -> None:
    """Remember TEXT as a fact (merged into an equal one if it exists)."""
    from enact.messages.memory import Merged, Pending, Remember, Saved

    if not text.strip():
        fail("there is no text to remember", as_json=as_json, code=EXIT_USAGE, status="bad_input")
    reply = request(resolve_home(home), Remember(text=text, type=fact_type, tags=tags, confidence=confidence,
                                                 scope=scope, subject=subject, sensitivity=sensitivity))
    end_on_failure(reply, as_json=as_json)
    if isinstance(reply, Saved):
        clipped = " (clipped: longer than memory.max_fact_chars)" if reply.clipped else ""
        _outcome(as_json, reply.id, "saved", "clipped" if reply.clipped else "", f"saved as {reply.id}{clipped}")
    elif isinstance(reply, Merged):
        _outcome(as_json, reply.id, "merged", "", f"merged into {reply.id}")
    elif isinstance(reply, Pending):
        why = f": {reply.why}" if reply.why else ""
        _outcome(as_json, reply.id, "pending", reply.why, f"held for confirmation as {reply.id}{why}")
    else:
        _unexpected(reply, as_json)


def _outcome(as_json: bool, fact_id: str, outcome: str, reason: str, line: str) -> None:
    if as_json:
        print_json({"id": fact_id, "outcome": outcome, "reason": reason})
    else:
        click.echo(line)


@memory.command("list")
@click.option("--tag", default="", help="Only facts with this tag.")
@click.option("--origin", default="", help="Only facts from this origin (human-cli, model-marker, …).")
@click.option("--pending", is_flag=True, help="Only facts held for confirmation.")
@home_option
@_json_option
@needs_daemon
def list_facts(tag: str, origin: str, pending: bool, home: Path | None, as_json: bool) -> None:
    """List facts, most recently updated first, with their sensitivity; a
    secret fact's text is withheld (`enact memory show ID` shows it)."""
    from enact.messages import to_wire
    from enact.messages.memory import FactList, List

    reply = request(resolve_home(home), List(tag=tag.lower(), origin_is=origin, pending=pending))
    if not isinstance(reply, FactList):
        return _unexpected(reply, as_json)
    if as_json:
        body = to_wire(reply)["body"]
        for listed in body["facts"]:
            listed["text_withheld"] = listed["sensitivity"] == _SECRET
            listed["text"] = "" if listed["text_withheld"] else listed["text"]
        print_json(body)
        return
    if not reply.facts:
        click.echo("no facts")
    width = max(map(len, _SENSITIVITIES))
    for fact in reply.facts:
        state = " [pending]" if fact.state == "pending" else ""
        tags = f"  #{' #'.join(fact.tags)}" if fact.tags else ""
        text = f"(withheld: `enact memory show {fact.id}` shows it)" if fact.sensitivity == _SECRET else fact.text
        click.echo(f"{fact.id}  {fact.type}/{fact.confidence}  {fact.sensitivity:<{width}}{state}  {text}{tags}")
    if reply.total > len(reply.facts):
        click.echo(f"… and {reply.total - len(reply.facts)} more")


@memory.command("show")
@click.argument("fact_id", metavar="ID")
@home_option
@_json_option
@needs_daemon
def show(fact_id: str, home: Path | None, as_json: bool) -> None:
    """Show one fact and its history."""
    from enact.messages import to_wire
    from enact.messages.memory import FactShown, Show

    reply = request(resolve_home(home), Show(id=fact_id))
    end_on_failure(reply, as_json=as_json)
    if not isinstance(reply, FactShown):
        return _unexpected(reply, as_json)
    if as_json:
        print_json(to_wire(reply)["body"])
        return
    fact = reply.fact
    click.echo(f"{fact.id}: {fact.text}")
    for name in ("type", "scope", "subject", "confidence", "sensitivity", "origin", "state"):
        click.echo(f"  {name:<12} {getattr(fact, name)}")
    click.echo(f"  {'tags':<12} {', '.join(fact.tags)}")
    click.echo(f"  {'refs':<12} {', '.join(fact.refs)}")
    for change in reply.history:
        refs = f" ({', '.join(change.refs)})" if change.refs else ""
        held = f"; held: {change.held}" if change.held else ""
        click.echo(f"  {_when(change.at)}  {change.change} by {change.origin}{refs}{held}")


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at).isoformat(sep=" ", timespec="seconds")


@memory.command("forget")
@click.argument("selector")
@click.option("--redact", is_flag=True, help="Also replace the fact's text in the turn log with a tombstone "
              "(kept histories are redacted and native sessions that may hold it reset either way).")
@home_option
@_json_option
@needs_daemon
def forget(selector: str, redact: bool, home: Path | None, as_json: bool) -> None:
    """Forget the fact SELECTOR names: its id, or text or a tag matching exactly one fact."""
    from enact.messages.memory import Forget, Forgotten, forgotten_line

    reply = request(resolve_home(home), Forget(selector=selector, redact=redact))
    end_on_failure(reply, as_json=as_json)
    if not isinstance(reply, Forgotten):
        return _unexpected(reply, as_json)
    if as_json:
        print_json({"id": reply.id, "redacted": reply.redacted, "turns_redacted": reply.turns_redacted,
                    "histories_redacted": reply.histories_redacted, "sessions_reset": reply.sessions_reset,
                    "redact_error": reply.redact_error})
        return
    click.echo(forgotten_line(reply))
    if reply.redact_error:
        sys.exit(EXIT_FAILED)


def _decide(fact_id: str, home: Path | None, as_json: bool, *, confirm: bool) -> None:
    from enact.messages.memory import Confirm, Confirmed, Discarded, Reject

    message = Confirm(id=fact_id) if confirm else Reject(id=fact_id)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    if not isinstance(reply, (Confirmed, Discarded)):
        return _unexpected(reply, as_json)
    outcome = "confirmed" if confirm else "rejected"
    if as_json:
        print_json({"id": reply.id, "outcome": outcome})
    else:
        click.echo(f"{outcome} {reply.id}")


@memory.command("confirm")
@click.argument("fact_id", metavar="ID")
@home_option
@_json_option
@needs_daemon
def confirm(fact_id: str, home: Path | None, as_json: bool) -> None:
    """Make a fact held for confirmation active."""
    _decide(fact_id, home, as_json, confirm=True)


@memory.command("reject")
@click.argument("fact_id", metavar="ID")
@home_option
@_json_option
@needs_daemon
def reject(fact_id: str, home: Path | None, as_json: bool) -> None:
    """Drop a fact held for confirmation."""
    _decide(fact_id, home, as_json, confirm=False)


@memory.command("context")
@home_option
@click.option("--query", default="", help="The owner's message to recall facts for.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def context(home: Path | None, query: str, as_json: bool) -> None:
    """Exactly what memory would send a model now, and why each fact was or was not included."""
    from enact.messages import to_wire
    from enact.messages.memory import Context

    message = Context(query=query, explain=True, owners=True)  # what the owner's conversations get
    reply = request(resolve_home(home), message)
    if as_json:
        print_json(to_wire(reply)["body"])
        return
    click.echo("== startup context (sent once per new session) ==")
    click.echo(reply.startup_text or "(empty)")
    click.echo("\n== recall for this message ==")
    click.echo(reply.recall_text or ("(nothing recalled)" if query else "(no --query given)"))
    click.echo("\n== decisions ==")
    for decision in reply.decisions:
        mark = "+" if decision.included else "-"
        click.echo(f"{mark} {decision.fact_id} [{decision.section}] {decision.reason}")
    if reply.decisions_left_out:
        left_out = counted(reply.decisions_left_out, "fact")
        click.echo(f"… and {left_out} left out, not explained here (the reply is limited)")
