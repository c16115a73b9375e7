"""``enact learn SOURCE`` and ``enact skills list|show|remove``: skills the
owner lets enact learn (``enact.skills``), through the running daemon."""

from __future__ import annotations

from pathlib import Path

import click

from enact.cli._client import expect, request
from enact.cli._options import end_on_failure, home_option, needs_daemon, print_json, resolve_home


def _wire(value: object) -> object:
    from enact.messages import to_wire

    return to_wire(value)["body"]


@click.command("learn")
@click.argument("source")
@click.option("--path", "path", default="", help="With a git repository: the skill's folder in it.")
@click.option("--rev", "revision", default="", help="With a git repository: a branch, tag or commit (default HEAD).")
@click.option("--allow-scripts", is_flag=True, help="Accept executable files in the skill.")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def learn(source: str, path: str, revision: str, allow_scripts: bool, home: Path | None, as_json: bool) -> None:
    """Check and assess the skill at SOURCE (a local folder, or a git repository
    with --path and --rev): an improvement candidate; approving it installs it."""
    from enact.messages.skills import Learn, Learned

    local = Path(source).expanduser()
    sent = str(local.absolute()) if local.exists() else source
    message = Learn(source=sent, path=path, revision=revision, allow_scripts=allow_scripts)
    reply = request(resolve_home(home), message, timeout=None)
    end_on_failure(reply, as_json=as_json)
    learned = expect(reply, Learned, message)
    if as_json:
        print_json(_wire(learned))
        return
    click.echo(f"skill {learned.name} at {learned.revision} assessed: candidate {learned.candidate_id}\n"
               f"{learned.summary}\napprove it to install: enact evolve approve {learned.candidate_id}")


@click.group("skills")
def skills() -> None:
    """The installed skills: list, show and remove them."""


@skills.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def list_skills(home: Path | None, as_json: bool) -> None:
    """The installed skills, where each came from and how often it was used."""
    from enact.messages.skills import List, Listing
    from enact.skills.commands import describe

    message = List()
    listing = expect(request(resolve_home(home), message), Listing, message)
    if as_json:
        print_json(_wire(listing))
        return
    if not listing.skills:
        click.echo("no skills installed (enact learn SOURCE learns one, installed once you approve it)")
    for skill in listing.skills:
        click.echo(describe(skill))


@skills.command("show")
@click.argument("name")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def show(name: str, home: Path | None, as_json: bool) -> None:
    """An installed skill: its record, each file's sha256 and its instructions."""
    from enact.messages.skills import Body, Read
    from enact.skills.commands import describe

    message = Read(name=name)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    body = expect(reply, Body, message)
    if as_json:
        print_json(_wire(body))
        return
    click.echo(describe(body.skill))
    for file in body.skill.digests:
        click.echo(f"  {file.path} sha256 {file.sha256}")
    click.echo(f"\n{body.text}")


@skills.command("remove")
@click.argument("name")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def remove(name: str, home: Path | None, as_json: bool) -> None:
    """Remove an installed skill (audited)."""
    from enact.messages.skills import Remove, Removed

    message = Remove(name=name)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    removed = expect(reply, Removed, message)
    if as_json:
        print_json(_wire(removed))
        return
    click.echo(f"skill {removed.name} removed")
