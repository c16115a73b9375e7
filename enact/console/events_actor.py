"""The console's ear on the event feed: the task, turn, land and close events the
actors publish, handed to the console's open streams (``hub.py``). It owns
nothing and asks no one: a subscriber never asks back its publisher."""

from __future__ import annotations

from typing import Any

from enact.actors._base import ActorContext, EnactActor
from enact.console.hub import Hub, Update
from enact.messages.inbox import TurnLogged
from enact.messages.reviews import Closed, Landed
from enact.messages.tasks import TaskChanged

SUBSCRIBES = (TaskChanged, TurnLogged, Landed, Closed)


class ConsoleEventsActor(EnactActor):
    def __init__(self, context: ActorContext, *, hub: Hub) -> None:
        super().__init__(context)
        self._hub = hub

    def handle(self, message: Any) -> Any:
        match message:
            case TaskChanged():
                task_id = str(message.task.id)
                self._hub.publish(Update("tasks", task_id))
                self._hub.publish(Update(f"task-{task_id}", message.event.event.kind))
                if message.task.review_id:
                    self._hub.publish(Update("reviews", str(message.task.review_id)))
                return None
            case TurnLogged():
                self._hub.publish(Update("turns", message.conversation_key))
                return None
            case Landed() | Closed():
                self._hub.publish(Update("reviews", str(message.review.id)))
                self._hub.publish(Update(f"review-{message.review.id}", message.review.state.value))
                return None
        return super().handle(message)
