"""The chat component: the inbox and its conversations, the journal of
effects, the runtime sessions and the outbox; ``enact send`` and ``enact
turns``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact.chat import settings as chat_settings
from enact.components import Component, DaemonParts

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from enact.actors.supervisor import ActorSpec
    from enact.chat.metrics import ChatMetrics


class ChatComponent(Component):
    name = "chat"
    settings = chat_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {"send": "enact.cli._chat:send", "turns": "enact.cli._chat:turns"}
    _metrics: ChatMetrics | None = None
    """Made by ``metrics``; ``actors`` adds the channels' series to them."""

    def metrics(self, registry: CollectorRegistry) -> None:
        from enact.chat.metrics import ChatMetrics
        from enact.metrics import feature_metrics

        self._metrics = feature_metrics(registry, ChatMetrics)

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.chat import inbox_records, journal_actor, outbox_actor, sessions_actor
        from enact.chat.inbox_actor import CONVERSATIONS, InboxActor
        from enact.chat.services import ChatServices, startup_context

        if self._metrics is not None:
            self._metrics.add_channels(parts.channels)
        services = ChatServices(channels=parts.channels, runtime=parts.runtime, commands=parts.commands,
                                startup_context=startup_context(parts.commands), origins=parts.origins,
                                budget=parts.budget)
        return [
            ActorSpec(name="journal", actor=journal_actor.JournalActor, databases=(journal_actor.DATABASE,),
                      depends_on=("epoch",)),
            ActorSpec(name="sessions", actor=sessions_actor.SessionsActor,
                      databases=sessions_actor.DATABASES, depends_on=("epoch",)),
            ActorSpec(name="outbox", actor=outbox_actor.OutboxActor, databases=outbox_actor.DATABASES,
                      depends_on=("epoch",), options={"channels": services.channels}),
            ActorSpec(name="inbox", actor=InboxActor, databases=inbox_records.DATABASES,
                      depends_on=("epoch", "journal", "sessions", "outbox", "memory"),
                      options={"services": services}, pools=(CONVERSATIONS,)),
        ]
