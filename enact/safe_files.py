"""Reading a file from a tree the host does not trust: a repository or a
task's worktree, whose content a committer or a task's runtime chose.

A committed ``AGENTS.md`` that was a symbolic link to the Telegram token file
once put the token into a task's prompt. So the host reads such a file only
if it is a regular file inside the tree, bounded in size:

- a symbolic link is followed only while it stays inside the tree (a repository
  may well link ``AGENTS.md`` to ``CLAUDE.md``); the path is resolved, then
  opened one component at a time with ``O_NOFOLLOW`` from the tree's root, so
  a link swapped in between the two fails the open instead of leading out;
- what was opened is checked with ``fstat``, not the name: a FIFO, a device or
  a directory is refused, and ``O_NONBLOCK`` keeps the open of a FIFO from
  waiting for a writer;
- a hard link (more than one name) is refused: it may be a second name of a
  file outside the tree, which no path check can tell;
- at most ``limit`` bytes: a larger file is refused rather than read whole.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from enact.errors import EnactError

__all__ = ["UnsafeFile", "read_bytes_inside", "read_inside"]


class UnsafeFile(EnactError):
    """The file is there but is not read; one line naming it and why."""


def read_inside(root: Path, relative: str, *, limit: int) -> str | None:
    """The text (UTF-8, undecodable bytes replaced) of ``root/relative``, or
    None when nothing is there. Raises UnsafeFile when something is there
    that is not a regular file inside ``root`` of at most ``limit`` bytes."""
    data = read_bytes_inside(root, relative, limit=limit)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_bytes_inside(root: Path, relative: str, *, limit: int) -> bytes | None:
    """``read_inside`` without the decoding."""
    real_root = os.path.realpath(root)
    target = os.path.join(real_root, relative)
    if not os.path.lexists(target):
        return None
    resolved = os.path.realpath(target)
    if os.path.commonpath([real_root, resolved]) != real_root or resolved == real_root:
        raise UnsafeFile(f"{relative} is not read: it leads outside {root}")
    parts = os.path.relpath(resolved, real_root).split(os.sep)
    try:
        fd = _open_beneath(real_root, parts)
    except FileNotFoundError:
        return None  # a dangling link inside the tree, or gone meanwhile
    except OSError as error:
        raise UnsafeFile(f"{relative} is not read: {error.strerror or error}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise UnsafeFile(f"{relative} is not read: it is not a regular file")
        if status.st_nlink != 1:
            raise UnsafeFile(f"{relative} is not read: it is a hard link (one of {status.st_nlink} names)")
        if status.st_size > limit:
            raise UnsafeFile(f"{relative} is not read: it is larger than {limit} bytes")
        data = _read_at_most(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after the fstat
        raise UnsafeFile(f"{relative} is not read: it is larger than {limit} bytes")
    return data


def _open_beneath(root: str, parts: list[str]) -> int:
    """A descriptor of ``root/parts…`` opened without following any link."""
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            os.close(directory)
            directory = inner
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    finally:
        os.close(directory)


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
