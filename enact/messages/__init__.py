"""Typed messages, their stable wire names and the orjson codec."""

from enact.messages._codec import DecodeError, decode, encode, from_wire, limit, to_wire
from enact.messages._registry import Kind, Registration, internal, lookup, registered, reply, request, type_name

__all__ = [
    "DecodeError",
    "Kind",
    "Registration",
    "decode",
    "encode",
    "from_wire",
    "internal",
    "limit",
    "lookup",
    "registered",
    "reply",
    "request",
    "to_wire",
    "type_name",
]

# Importing the protocol modules registers their wire names.
from enact.messages import commands, common, control, epoch, inbox, journal, sessions

__all__ += ["commands", "common", "control", "epoch", "inbox", "journal", "sessions"]
