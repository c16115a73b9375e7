"""The console's live updates: what its event actor hears, handed to every
open event stream (``/events``) as a named server-sent event.

An event carries only a name and a short datum (a task id): a page that
hears it fetches what changed through the same requests it was drawn from,
so an update is never a second way of reading state."""

from __future__ import annotations

import queue
import threading

from enact.frozen_dataclass import dataclass

MAX_STREAMS = 8
"""Open event streams at once; each holds one of the server's threads."""
_BACKLOG = 256
"""Events a slow stream may fall behind by before it is told to start over."""


@dataclass(frozen=True, slots=True)
class Update:
    name: str
    """``tasks`` (any task changed), ``task-<id>``, ``turns``, ``reviews``, ``review-<id>``;
    ``resync`` when a stream fell behind, ``bye`` when the console stops."""
    data: str = ""


BYE = Update("bye")
RESYNC = Update("resync")


class Stream:
    """One subscriber's queue of updates."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self._queue: queue.Queue[Update] = queue.Queue(maxsize=_BACKLOG)
        self.behind = False

    def offer(self, update: Update) -> None:
        try:
            self._queue.put_nowait(update)
        except queue.Full:
            self.behind = True

    def next(self, wait_s: float) -> Update | None:
        """The next update, ``RESYNC`` once after falling behind, or None
        when ``wait_s`` passed without one."""
        if self.behind:
            self.behind = False
            with self._queue.mutex:
                self._queue.queue.clear()
            return RESYNC
        try:
            return self._queue.get(timeout=wait_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._hub.leave(self)


class Hub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: set[Stream] = set()
        self._closed = False

    def join(self) -> Stream | None:
        """A new stream, or None when ``MAX_STREAMS`` are open or the hub is closed."""
        with self._lock:
            if self._closed or len(self._streams) >= MAX_STREAMS:
                return None
            stream = Stream(self)
            self._streams.add(stream)
            return stream

    def leave(self, stream: Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def publish(self, update: Update) -> None:
        with self._lock:
            streams = tuple(self._streams)
        for stream in streams:
            stream.offer(update)

    def listened(self) -> bool:
        """Whether a stream is open: read at every event the actors publish,
        so without the lock (a set's truth is read in one step); a stream
        that opens meanwhile has read its page after the event anyway."""
        return bool(self._streams)

    @property
    def open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    def close(self) -> None:
        """Every stream hears ``bye`` and ends; no new one opens."""
        with self._lock:
            self._closed = True
            streams = tuple(self._streams)
        for stream in streams:
            stream.offer(BYE)

    def reopen(self) -> None:
        with self._lock:
            self._closed = False
