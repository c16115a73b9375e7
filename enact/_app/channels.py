"""The daemon's chat channels: the ones the installed components enable,
started after the actors and stopped before them."""

from __future__ import annotations

import logging

from enact import config
from enact.actors._asks import Asker
from enact.channels import Channel, InboxInlet
from enact.components import Components
from enact.fence import Fence
from enact.messages.channel import DISABLED, ChannelState
from enact.messages.common import Origin
from enact.metrics import Metrics

log = logging.getLogger("enact.daemon")


class DaemonChannels:
    """Each enabled channel with the origin its component vouches for; on a
    home moved to another host, none that polls an account that host answers."""

    def __init__(self, installed: Components, settings: config.Config, *, moved: bool = False) -> None:
        self._installed = installed
        self.channels: dict[str, Channel] = {}
        self.origins: dict[str, Origin] = {}
        self._shown: tuple[tuple[str, ChannelState | None], ...] | None = None
        """Each installed channel's name, and its record when it is not running (``states``)."""
        for component in installed.channels():
            if not component.enabled(settings):
                continue
            if moved and component.polls_shared_account:
                log.warning("this home was moved to another host: the %s channel is not started", component.name)
                continue
            channel = component.make_channel(settings)
            self.channels[channel.name] = channel
            self.origins[channel.name] = component.origin()

    def start(self, ask: Asker, *, fence: Fence, metrics: Metrics) -> None:
        """After the actors: each channel's events go straight to the inbox."""
        for name, channel in self.channels.items():
            channel.start(InboxInlet(name, ask, origin=self.origins[name], fence=fence, metrics=metrics))

    def stop(self) -> None:
        for channel in self.channels.values():
            channel.stop()

    def states(self) -> tuple[ChannelState, ...]:
        """Every installed channel: a running one says how it runs. Asked by
        every status request, so what cannot change is made once."""
        if self._shown is None:
            self._shown = tuple((c.name, None if c.name in self.channels else ChannelState(name=c.name, state=DISABLED))
                                for c in self._installed.channels())
        return tuple([self.channels[name].state() if disabled is None else disabled for name, disabled in self._shown])
