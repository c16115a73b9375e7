"""``enact hello``: the hello extension's CLI command, imported only when it runs."""

from __future__ import annotations

import click


@click.command("hello")
@click.argument("name", default="owner")
def hello(name: str) -> None:
    """Ask the hello extension for its greeting."""
    from enact.cli._client import request
    from enact.cli._options import resolve_home
    from enact_hello import Greet, Greeting

    answer = request(resolve_home(None), Greet(name=name))
    if not isinstance(answer, Greeting):
        raise click.ClickException(f"the hello extension answered {type(answer).__name__}")
    click.echo(answer.text)
