"""A ``HOST:PORT`` address, as the metrics endpoint takes it."""

from __future__ import annotations

ADDRESS_FORM = "HOST:PORT ([::1]:PORT for IPv6) with a port from 0 to 65535"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) to a pair; raises ValueError."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected {ADDRESS_FORM}, got {text!r}")
    return host.strip("[]"), int(port)


def is_address(value: str) -> bool:
    try:
        parse_address(value)
    except ValueError:
        return False
    return True
