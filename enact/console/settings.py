"""The console's settings (``console``): whether the daemon serves it and on
which address."""

from __future__ import annotations

import ipaddress

from enact.addresses import ADDRESS_FORM, parse_address
from enact.config import Check, Config, Setting
from enact.frozen_dataclass import dataclass


def _browsable(value: str) -> bool:
    """An address a browser can be sent to: a wildcard (0.0.0.0, ::) names
    no host, so no request's Host could be checked against it."""
    try:
        host, _ = parse_address(value)
    except ValueError:
        return False
    try:
        return not ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return bool(host)  # a host name (localhost)


SETTINGS: tuple[Setting, ...] = (
    Setting("console.enabled", bool, True, "Serve the web console (enact console prints a link to sign in)"),
    Setting("console.addr", str, "127.0.0.1:9465",
            "Where the console listens; requests for any other Host are refused; port 0 picks a free port",
            Check(f"{ADDRESS_FORM}, not a wildcard address", _browsable)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsoleSettings:
    enabled: bool
    host: str
    port: int

    @classmethod
    def from_config(cls, config: Config) -> ConsoleSettings:
        host, port = parse_address(config.values["console.addr"])
        return cls(enabled=config.values["console.enabled"], host=host, port=port)
