"""``enact identity install|show|clear`` and ``enact memory context``."""

from __future__ import annotations

from pathlib import Path

import click

from enact.cli._client import expect, request
from enact.cli._options import EXIT_USAGE, end_on_failure, fail, home_option, needs_daemon, print_json, resolve_home


@click.group("identity")
def identity() -> None:
    """The private identity the owner gives enact (the body identity ships with it)."""


@identity.command("install")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@needs_daemon
def install(home: Path | None, as_json: bool, file: Path) -> None:
    """Install FILE (TOML or JSON: name, pronouns, relationships, personality,
    mission, values, care_style), replacing the identity installed before."""
    from enact.memory.identity import IdentityError, read_identity_file
    from enact.messages.memory import IdentityInstalled, InstallIdentity

    try:
        parsed = read_identity_file(file)
    except IdentityError as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE)
    message = InstallIdentity(identity=parsed)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    installed = expect(reply, IdentityInstalled, message)
    if as_json:
        print_json({"outcome": "installed", "name": installed.name, "replaced": installed.replaced})
    else:
        click.echo(f"identity {installed.name!r} installed" + (" (replacing the earlier one)" if installed.replaced
                                                               else ""))


@identity.command("show")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def show(home: Path | None, as_json: bool) -> None:
    """The body identity and the installed private identity."""
    from enact.messages import to_wire
    from enact.messages.memory import GetIdentity

    message = GetIdentity()
    reply = request(resolve_home(home), message)
    if as_json:
        print_json(to_wire(reply)["body"])
        return
    click.echo("body identity (ships with enact):")
    click.echo(_indented(reply.body.render()))
    click.echo("private identity:")
    click.echo(_indented(reply.private.render()) if reply.private is not None
               else "  none installed (`enact identity install FILE`)")


@identity.command("clear")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@needs_daemon
def clear(home: Path | None, as_json: bool) -> None:
    """Remove the private identity."""
    from enact.messages.memory import ClearIdentity, IdentityCleared

    message = ClearIdentity()
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    cleared = expect(reply, IdentityCleared, message)
    if as_json:
        print_json({"outcome": "cleared" if cleared.cleared else "none", "cleared": cleared.cleared})
    else:
        click.echo("private identity cleared" if cleared.cleared else "no private identity was installed")


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
