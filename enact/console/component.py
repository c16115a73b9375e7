"""The console component: its settings, ``enact console``, the actor that
hears the event feed for it, ``console.Login`` and the web server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from enact.components import Component, DaemonParts, Dispatch, Service, WireHandler
from enact.console import settings as console_settings

if TYPE_CHECKING:
    from enact.actors._asks import Asker
    from enact.actors.supervisor import ActorSpec
    from enact.config import Config
    from enact.console.hub import Hub
    from enact.console.server import ConsoleServer


class ConsoleComponent(Component):
    name = "console"
    settings = console_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {"console": "enact.cli._console:console"}

    def __init__(self) -> None:
        self._hub: Hub | None = None
        self._server: ConsoleServer | None = None

    def _enabled(self, settings: Config) -> bool:
        return settings.typed(console_settings.ConsoleSettings).enabled

    def _made_hub(self) -> Hub:
        from enact.console.hub import Hub

        if self._hub is None:
            self._hub = Hub()
        return self._hub

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        """Declared whether or not the console serves, so the roster is the
        same either way; it is told the feed's events only while a page has
        its event stream open (every chat turn publishes one, and with no
        page to go to it would cost a message for nothing), so never when
        the console is off."""
        from enact.actors.supervisor import ActorSpec
        from enact.console.events_actor import SUBSCRIBES, ConsoleEventsActor

        hub = self._made_hub()
        return [ActorSpec(name="console", actor=ConsoleEventsActor, options={"hub": hub},
                          subscribes=SUBSCRIBES,
                          listening=hub.listened)]

    def handlers(self, settings: Config, ask: Asker) -> Mapping[type[Any], WireHandler]:
        from enact.messages.console import Login

        return {Login: lambda _: self._login(settings)}

    def _login(self, settings: Config) -> object:
        from enact.messages.common import RefusalCode, Refused

        if self._server is None:
            return Refused(reason="the console is off (console.enabled = false)", code=RefusalCode.UNSUPPORTED)
        return self._server.login()

    def services(self, settings: Config, dispatch: Dispatch) -> Sequence[Service]:
        if not self._enabled(settings):
            return ()
        from enact.console.server import ConsoleServer

        self._server = ConsoleServer(settings, dispatch, self._made_hub())
        return (self._server,)
