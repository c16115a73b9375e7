"""Telegram updates read into chat events: text or caption, the replied-to
text, the sender, the forum topic, and a photo's largest size fetched into
the home (at most ``max_photo_bytes``) as an image attachment."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from enact.channels.telegram_api import BAD_RESPONSE, TOO_LARGE, BotApi, BotApiError
from enact.channels.telegram_component import NAME
from enact.messages.inbox import Attachment, ChatEvent

log = logging.getLogger("enact.channels.telegram")

PHOTO_FETCH_ATTEMPTS = 3
"""Polls in which a photo's fetch may fail before its update goes on without
it: a photo Telegram keeps failing to serve must not hold up the chat."""


def _not_fetched(size: int, why: str) -> Attachment:
    return Attachment(kind="photo", name=f"photo (not fetched: {why})"[:200], mime_type="image/jpeg", size=size)


class UpdateReader:
    """Turns an update into the event the inbox is handed, or None for an
    update it drops (no text, caption or photo)."""

    def __init__(self, api: BotApi, *, attachments: Path, max_photo_bytes: int) -> None:
        self._api = api
        self._attachments = attachments
        self._max_photo_bytes = max_photo_bytes
        self._fetch_failures: dict[str, int] = {}
        """file_id -> fetches failed so far (this daemon's run)."""

    def event_of(self, update_id: int, update: dict[str, Any]) -> ChatEvent | None:
        message = update.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("chat"), dict):
            log.info("telegram: update %d dropped: not a message", update_id)
            return None
        text = message.get("text") or message.get("caption") or ""
        attachments: tuple[Attachment, ...] = ()
        photos = message.get("photo")
        if isinstance(photos, list) and photos:
            attachments = (self._photo(message, photos),)
        if not text and not attachments:
            log.info("telegram: update %d dropped: no text, caption or photo", update_id)
            return None
        replied = message.get("reply_to_message")
        reply_to = (replied.get("text") or replied.get("caption") or "") if isinstance(replied, dict) else ""
        sender = message.get("from")
        thread = message.get("message_thread_id") if message.get("is_topic_message") else None
        return ChatEvent(
            channel=NAME, conversation=str(message["chat"].get("id")), message_id=str(message.get("message_id")),
            text=text, sender=str(sender.get("id", "")) if isinstance(sender, dict) else "", cursor=update_id,
            thread_id=str(thread) if thread is not None else "", reply_to=reply_to, attachments=attachments,
        )

    def _photo(self, message: dict[str, Any], photos: list[Any]) -> Attachment:
        """The largest size, fetched into the home (at most ``max_photo_bytes``)."""
        sizes = [p for p in photos if isinstance(p, dict) and p.get("file_id")]
        if not sizes:
            return _not_fetched(0, "no size of it has a file id")
        largest = max(sizes, key=lambda p: (p.get("file_size") or 0, (p.get("width") or 0) * (p.get("height") or 0)))
        declared = int(largest.get("file_size") or 0)
        too_large = "larger than channels.telegram.max_photo_bytes"
        if declared > self._max_photo_bytes:
            return _not_fetched(declared, too_large)
        file_id = str(largest["file_id"])
        try:
            fetched = self._fetch(message, largest)
        except BotApiError as error:
            failures = self._fetch_failures[file_id] = self._fetch_failures.get(file_id, 0) + 1
            if not error.terminal and failures < PHOTO_FETCH_ATTEMPTS:
                raise  # the network or Telegram: this update is polled again later
            # Refused for good (an expired file, too large once read), or failing
            # poll after poll: the event goes on without it.
            self._fetch_failures.pop(file_id, None)
            return _not_fetched(declared, too_large if error.reason == TOO_LARGE else str(error))
        self._fetch_failures.pop(file_id, None)
        return fetched

    def _fetch(self, message: dict[str, Any], largest: dict[str, Any]) -> Attachment:
        found = self._api.call("getFile", {"file_id": largest["file_id"]})
        file_path = found.get("file_path") if isinstance(found, dict) else None
        if not isinstance(file_path, str) or not file_path:
            raise BotApiError(BAD_RESPONSE, "getFile: no file_path in the answer")
        unique = str(largest.get("file_unique_id") or largest["file_id"])[:64]
        suffix = Path(file_path).suffix or ".jpg"
        destination = (self._attachments / str(message["chat"].get("id"))
                       / f"{message.get('message_id')}-{unique}{suffix}")
        if destination.is_file():
            size = destination.stat().st_size  # a redelivery: fetched already
        else:
            size = self._api.download(file_path, destination, max_bytes=self._max_photo_bytes)
        return Attachment(kind="photo", name=destination.name, mime_type="image/jpeg", size=size,
                          path=str(destination))

