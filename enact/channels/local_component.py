"""The local channel as a component: its setting, its channel, and the
``local.*`` requests it serves.

Every CLI command imports this module to learn the components' commands, so
the channel (``enact.channels.local``: the inbox's protocol, its waiting
sends) is imported only by the methods that make and serve it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from enact.components import ChannelComponent, WireHandler
from enact.config import Config, DaemonSettings, Setting
from enact.messages.common import HUMAN_CLI, Origin
from enact.messages.local import NAME

if TYPE_CHECKING:
    from enact.actors._asks import Asker
    from enact.channels.local import LocalChannel


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LocalSettings:
    deliver_command: str
    """The program each reply is also handed to; "": none."""

    @classmethod
    def from_config(cls, config: Config) -> LocalSettings:
        return cls(deliver_command=config.values["chat.local_deliver_command"])


class LocalChannelComponent(ChannelComponent):
    """The local channel as a component: its setting, its channel, and the
    ``local.*`` requests it serves."""

    name = NAME
    # Its key predates components and stays where config files have it.
    sections = ("chat",)
    polls_shared_account = False  # its socket is this host's own
    settings = (
        Setting("chat.local_deliver_command", str, "", "Optional program the local channel also hands each reply to"),
    )

    def __init__(self) -> None:
        self._channel: LocalChannel | None = None

    def origin(self) -> Origin:
        """Only the owner reaches the 0600 control socket: what it sends is
        the owner's at a shell."""
        return HUMAN_CLI

    def make_channel(self, settings: Config) -> LocalChannel:
        from enact.channels.local import LocalChannel

        self._channel = LocalChannel(
            deliver_command=settings.typed(LocalSettings).deliver_command,
            wait_timeout_s=settings.typed(DaemonSettings).request_timeout_s,
        )
        return self._channel

    def handlers(self, settings: Config, ask: Asker) -> Mapping[type[Any], WireHandler]:
        from enact.channels.local import ChannelNotStarted
        from enact.messages.local import Send

        if self._channel is None:
            raise ChannelNotStarted("the local channel is served before it is made")
        return {Send: self._channel.send}
