"""The Memory actor's side of context: the identities it holds and the
startup selection it keeps between changes.

The startup context only changes when a fact, the private identity or the
settings do, so it is selected once per change of the facts and reused by
every turn's recall, which is the part that costs per message.
"""

from __future__ import annotations

from collections.abc import Callable

import lmdb

from enact.memory.book import FactBook
from enact.memory.context import (
    ContextSettings,
    MemoryContext,
    StartupContext,
    explained,
    select_recall,
    select_startup,
)
from enact.memory.facts import Fact
from enact.memory.identity import BodyIdentity, PrivateIdentity, body_identity, parse_identity
from enact.messages.memory import Context, ContextReply
from enact.storage import RecordTable, Store

_PRIVATE_KEY = b"private"


class IdentityRecords:
    """The private identity in the ``memory.identity`` database: one record,
    so installing replaces it in one write."""

    def __init__(self, store: Store, database: str) -> None:
        self.table = RecordTable(store.table(database), PrivateIdentity)

    def get(self, txn: lmdb.Transaction) -> PrivateIdentity | None:
        return self.table.get(txn, _PRIVATE_KEY)

    def put(self, txn: lmdb.Transaction, identity: PrivateIdentity) -> None:
        self.table.put(txn, _PRIVATE_KEY, identity)

    def delete(self, txn: lmdb.Transaction) -> bool:
        return self.table.delete(txn, _PRIVATE_KEY)


def checked_identity(identity: PrivateIdentity) -> PrivateIdentity:
    """The same checks as a file gets, for an identity that came over the
    wire (``enact call`` can send one without the CLI's parsing); raises
    IdentityError."""
    return parse_identity({
        "name": identity.name,
        "pronouns": identity.pronouns,
        "relationships": [
            {"name": r.name, "relation": r.relation, "notes": r.notes} for r in identity.relationships
        ],
        "personality": identity.personality,
        "mission": identity.mission,
        "values": list(identity.values),
        "care_style": identity.care_style,
    })


class Briefing:
    def __init__(self, settings: ContextSettings, private: PrivateIdentity | None) -> None:
        self.settings = settings
        self.body: BodyIdentity = body_identity()
        self.private = private
        self._startup: tuple[int, StartupContext] | None = None

    def set_private(self, identity: PrivateIdentity | None) -> None:
        self.private = identity
        self._startup = None

    def startup(self, facts: FactBook, *, change: int, explain: bool = False) -> StartupContext:
        """The startup selection for the facts as of ``change``; explained
        ones (for a person asking why) are made afresh, never kept."""
        if explain:
            return self._select(facts, explain=True)
        if self._startup is None or self._startup[0] != change:
            self._startup = (change, self._select(facts, explain=False))
        return self._startup[1]

    def _strangers_startup(self) -> str:
        return select_startup((), body_identity=self.body.render(), private_identity="", settings=self.settings,
                              explain=False).text

    def _select(self, facts: FactBook, *, explain: bool) -> StartupContext:
        return select_startup(
            facts,
            body_identity=self.body.render(),
            private_identity=self.private.render() if self.private is not None else "",
            settings=self.settings,
            explain=explain,
            ranking=facts.ranking,
        )

    def context(
        self,
        facts: FactBook,
        *,
        change: int,
        query: str,
        search: Callable[[str, int], list[str]],
        lookup: Callable[[str], Fact | None],
        session_facts: frozenset[str] | None = None,
        explain: bool = False,
        owners: bool,
    ) -> MemoryContext:
        """``session_facts``: what a resumed session was given at its start
        (recall leaves those out, and no startup context is selected: the
        session has one); None for a new session, which gets this one.
        ``owners``: for the owner's conversation; memory is the owner's, so
        any other gets who this software is (the body identity) and nothing
        of the owner: no fact, no private identity, no recall."""
        if not owners:
            body = "" if session_facts is not None else self._strangers_startup()
            return MemoryContext(startup_text=body, recall_text="", decisions=())
        if session_facts is not None and not explain:
            recall = select_recall(query, search=search, lookup=lookup, startup_ids=session_facts,
                                   settings=self.settings)
            return MemoryContext(startup_text="", recall_text=recall.text, decisions=recall.decisions)
        startup = self.startup(facts, change=change, explain=explain)
        given = startup.fact_ids if session_facts is None else session_facts
        recall = select_recall(query, search=search, lookup=lookup, startup_ids=given, settings=self.settings)
        return MemoryContext(
            startup_text=startup.text,
            recall_text=recall.text,
            decisions=startup.decisions + recall.decisions,
            startup_ids=startup.fact_ids,
            unexplained=startup.unexplained,
        )

    def reply(self, facts: FactBook, message: Context, *, change: int,
              search: Callable[[str, int], list[str]]) -> ContextReply:
        """What a ``Context`` asks, from ``facts`` as of ``change``."""
        given = None if message.session_facts is None else frozenset(message.session_facts)
        built = self.context(facts, change=change, query=message.query, search=search, lookup=facts.get,
                             session_facts=given, explain=message.explain, owners=message.owners)
        decisions, left_out = explained(built.decisions) if message.explain else ((), 0)
        return ContextReply(startup_text=built.startup_text, recall_text=built.recall_text,
                            decisions=decisions, decisions_left_out=left_out + built.unexplained,
                            startup_ids=tuple(sorted(built.startup_ids)))
