"""Keeping the derived memory index in step with the facts.

The index is derived from LMDB: a failure to write it (a full disk) marks it
stale instead of failing its owner. A stale index is searched as far as it
goes, with every fact the owner holds scored from memory beside it, and the
owner tries again until a rebuild works.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable
from pathlib import Path

from enact.memory.facts import Fact
from enact.memory.index import FactIndex, IndexUnwritable

log = logging.getLogger("enact.memory.memory_actor")


class IndexUpkeep:
    def __init__(self, index: FactIndex) -> None:
        self.index = index
        self.stale = False

    @classmethod
    def opened(cls, directory: Path, facts: Iterable[Fact], change: int) -> IndexUpkeep:
        """The index in ``directory``, rebuilt when it does not reflect
        ``change`` (stale when that cannot be written)."""
        with contextlib.suppress(OSError):  # a full disk: the rebuild finds out, and marks it stale
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        upkeep = cls(FactIndex(directory))
        reflected = upkeep.index.reflected_change()
        if reflected != change:
            upkeep.rebuild(facts, change, f"it reflected change {reflected}, the facts are at {change}")
        return upkeep

    def rebuild(self, facts: Iterable[Fact], change: int, why: str) -> bool:
        """Rebuild from ``facts`` (read as it goes); False when the index
        cannot be written."""
        started = time.perf_counter()
        try:
            count = self.index.rebuild(facts, change)
        except IndexUnwritable as error:
            self._unwritable(error)
            return False
        self.stale = False
        log.info("memory index rebuilt from %d facts in %.2f s (%s)", count, time.perf_counter() - started, why)
        return True

    def commit(self, facts: Iterable[Fact], change: int) -> bool:
        """Commit what is staged (rebuild a stale index); False when the
        index could not be written: try again later."""
        if self.stale:
            return self.rebuild(facts, change, "it was stale")
        if self.index.pending or self.index.reflected_change() != change:
            try:
                self.index.commit(change)
            except IndexUnwritable as error:
                self._unwritable(error)
                return False
        return True

    def _unwritable(self, error: IndexUnwritable) -> None:
        if not self.stale:
            log.warning("memory index is stale: it cannot be written (%s); facts are searched from memory "
                        "and it is rebuilt once it can be written", error)
        self.stale = True
