"""Typed messages, their stable wire names and the orjson codec."""

from enact.messages._codec import DecodeError, decode, encode, from_wire, limit, to_wire
from enact.messages._registry import (
    Kind,
    Registration,
    Request,
    internal,
    lookup,
    registered,
    reply,
    reply_types,
    request,
    type_name,
)

__all__ = [
    "DecodeError",
    "Kind",
    "Registration",
    "Request",
    "decode",
    "encode",
    "from_wire",
    "internal",
    "limit",
    "lookup",
    "registered",
    "reply",
    "reply_types",
    "request",
    "to_wire",
    "type_name",
]

# The protocol modules (enact.messages.inbox, ...) register their wire names
# when imported; ``lookup`` imports one on first use of its prefix.
