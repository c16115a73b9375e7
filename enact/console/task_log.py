"""A task's log as a console page shows it: its text so far, and what was
added since (``LogTail``), read from the file the worker writes, as ``enact
task log`` reads it."""

from __future__ import annotations

from pathlib import Path

from markupsafe import escape

from enact.tasks.records import task_log_path

SHOWN_BYTES = 256 * 1024
"""The page shows the log's last 256 KiB; ``enact task log`` prints it all."""
_CHUNK = 64 * 1024


def log_text(home: Path, task_id: int) -> tuple[str, int, bool]:
    """The log's last ``SHOWN_BYTES`` as text, the offset it ends at, and
    whether older text was left out."""
    path = task_log_path(home, task_id)
    try:
        with open(path, "rb") as file:
            size = file.seek(0, 2)
            start = max(0, size - SHOWN_BYTES)
            file.seek(start)
            return file.read(size - start).decode(errors="replace"), size, start > 0
    except FileNotFoundError:
        return "", 0, False


class LogTail:
    """What a task's log gained since an offset, escaped for a page."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path = path
        self.offset = offset

    @classmethod
    def of(cls, home: Path, task: str, offset: str) -> LogTail | None:
        if not task.isdigit() or not offset.isdigit():
            return None
        return cls(task_log_path(home, int(task)), int(offset))

    def read(self) -> str:
        try:
            with open(self.path, "rb") as file:
                file.seek(self.offset)
                grown = file.read(_CHUNK)
        except FileNotFoundError:
            return ""
        if not grown:
            return ""
        cut = grown.rfind(b"\n") + 1 if len(grown) == _CHUNK else len(grown)
        grown = grown[: cut or len(grown)]
        self.offset += len(grown)
        return str(escape(grown.decode(errors="replace")))
