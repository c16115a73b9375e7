"""The update component's actor: the serving daemon's end of an attempt,
which tells the owner how it ended (``update.Notify``) through the inbox's
journaled notices, as a task's ending is told."""

from __future__ import annotations

from typing import Any

from enact.actors._base import EnactActor
from enact.chat.settings import ChatSettings
from enact.messages import inbox
from enact.messages.update import Noticed, Notify
from enact.ownership import notice_target


class UpdateActor(EnactActor):
    def handle(self, message: Any) -> Any:
        match message:
            case Notify():
                allowed = self.context.config.typed(ChatSettings).allowed_conversations
                target = notice_target(message.conversation, allowed)
                if target is None:
                    return Noticed(conversation="")
                channel, conversation = target
                self.context.tell("inbox", inbox.Notify(
                    channel=channel, conversation=conversation, notice_id=f"update:{message.notice_id}",
                    text=message.text, session_note=message.text, origin=message.origin))
                return Noticed(conversation=f"{channel}:{conversation}")
        return super().handle(message)
