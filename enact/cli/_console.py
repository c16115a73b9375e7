"""``enact console``: a one-time link that signs the owner in to the web console."""

from __future__ import annotations

from pathlib import Path

import click

from enact.cli._client import request
from enact.cli._options import end_on_failure, home_option, needs_daemon, print_json, resolve_home


@click.command("console")
@home_option
@click.option("--open", "open_browser", is_flag=True, help="Open the link in a web browser too.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"address\", \"url\", \"token\", \"expires_at\"}.")
@needs_daemon
def console(home: Path | None, open_browser: bool, as_json: bool) -> None:
    """Print the console's address and a link that signs you in once.

    The link's token is spent by its first use and void after ten minutes;
    it makes a session in that browser until the daemon stops. Keep it to
    yourself: it is the owner's authority."""
    from enact.messages.console import Login, LoginLink

    link = request(resolve_home(home), Login())
    if not isinstance(link, LoginLink):
        end_on_failure(link, as_json=as_json, about="no console link")
        return
    if as_json:
        print_json({"address": link.address, "url": link.url, "token": link.token, "expires_at": link.expires_at})
    else:
        click.echo(f"console  http://{link.address}/")
        click.echo(f"sign in  {link.url}")
        click.echo("         (one use, within 10 minutes)")
    if open_browser:
        import webbrowser

        if not webbrowser.open(link.url):
            click.echo("enact: no web browser could be opened; open the link above", err=True)
