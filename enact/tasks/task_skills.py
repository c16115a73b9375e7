"""The installed skills in a task's calls: placed in the worktree where a
runtime that reads skills natively looks, for one call only (taken out
again before the change is looked at, so they are never part of it), and
the skills that runtime's own skill tool loaded recorded as the task's use
(as a ``skill.read`` is). Without the skills component, none of it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from enact.actors._asks import ActorUnavailable, Asker
from enact.messages.skills import Place, Used, Withdraw

log = logging.getLogger(__name__)

SKILLS = "skills"


class TaskSkills:
    def __init__(self, ask: Asker, *, task_id: int, under: str, note: Callable[[str], None]) -> None:
        self._ask = ask
        self._task_id = task_id
        self._under = under
        """Where, under its working directory, the runtime reads skills ("": nowhere)."""
        self._note = note
        """A line for the task log."""

    def place(self, worktree: Path) -> tuple[str, ...]:
        """The names placed, for ``withdraw`` once the call has ended."""
        if not self._under:
            return ()
        try:
            placed = self._ask(SKILLS, Place(directory=str(worktree), under=self._under)).names
        except ActorUnavailable as error:  # no skills component: nothing to place
            log.debug("task %d: no skills placed: %s", self._task_id, error)
            return ()
        if placed:
            self._note(f"skills placed in {self._under}: {', '.join(placed)}")
        return placed

    def withdraw(self, worktree: Path, names: tuple[str, ...]) -> None:
        if names:
            self._ask(SKILLS, Withdraw(directory=str(worktree), under=self._under, names=names))

    def used(self, names: tuple[str, ...]) -> None:
        if not names:
            return
        try:
            recorded = self._ask(SKILLS, Used(names=names, used_by=f"task:{self._task_id}")).names
        except ActorUnavailable as error:
            log.debug("task %d: the use of skills is not recorded: %s", self._task_id, error)
            return
        if recorded:
            self._note(f"skills used: {', '.join(recorded)}")
