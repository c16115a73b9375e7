"""``enact channel list`` and ``enact channel check``."""

from __future__ import annotations

import time
from pathlib import Path

import click

from enact.cli._client import request
from enact.cli._options import EXIT_USAGE, fail, home_option, needs_daemon, print_json, resolve_home


@click.group("channel")
def channel_group() -> None:
    """The chat channels: their state, and whether their credentials work."""


@channel_group.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def channel_list(home: Path | None, as_json: bool) -> None:
    """Each channel, its state, cursor and last error."""
    from enact.messages import to_wire
    from enact.messages.channel import List as ListChannels

    message = ListChannels()
    reply = request(resolve_home(home), message)
    if as_json:
        print_json(to_wire(reply)["body"]["channels"])
        return
    click.echo(f"{'channel':<12} {'state':<9} {'cursor':>12} {'refused':>8}  last error")
    for channel in reply.channels:
        when = (time.strftime(" (%Y-%m-%d %H:%M:%S)", time.localtime(channel.last_error_at))
                if channel.last_error_at else "")
        error = f"{channel.last_error}{when}" if channel.last_error else "-"
        click.echo(f"{channel.name:<12} {channel.state:<9} {channel.cursor:>12} {channel.delivery_failures:>8}  "
                   f"{error}")


@channel_group.command("check")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.argument("name")
def channel_check(home: Path | None, as_json: bool, name: str) -> None:
    """Try channel NAME's credentials (Telegram: getMe); needs no daemon."""
    from enact import components, config

    try:
        installed = components.load()
        settings = installed.load_config(resolve_home(home))
    except (components.ComponentError, config.ConfigError) as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE)
    found = {c.name: c for c in installed.channels()}
    component = found.get(name)
    if component is None:
        fail(f"no channel {name!r}; the channels are {', '.join(sorted(found))}", as_json=as_json,
             code=EXIT_USAGE)
    try:
        said = component.check(settings)
    except components.ComponentError as error:
        fail(str(error), as_json=as_json, channel=name, ok=False)
    if as_json:
        print_json({"channel": name, "ok": True, "message": said})
        return
    click.echo(f"{name}: {said}")


