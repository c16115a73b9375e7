"""``--repo PATH``, as every command that names a task's repository takes it.

The daemon checks the repository (``enact.tasks.repositories``: one check,
the same words for the CLI, chat and cron); the CLI only makes the path
absolute against the shell's working directory, which the daemon cannot
know (through the command server the command runs in the caller's), so
that ``--repo .`` names where the owner stands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def repo_option(default: str) -> Callable[[F], F]:
    """The ``--repo`` option; ``default`` says what is used without it."""
    # A plain path: what is wrong with it is the daemon's check to say.
    return click.option("--repo", type=click.Path(path_type=Path), default=None,
                        help=f"The git repository to work on, or any directory in it (default: {default}).")


def sent_repo(repo: Path | None) -> str:
    """``repo`` as the daemon is sent it: absolute; "" for none."""
    return str(repo.expanduser().absolute()) if repo is not None else ""
