"""``curator.Brainstorm``, as the curator actor carries it out: the rules
are ``enact.evolution.brainstorm``; this stores, and yields the effects the
actor carries out (``enact.evolution.curator_effects``): what it asks and
the model call.

The theme's brainstorm time is committed (``evolution.settings``) before
the model is called, so that a failed or interrupted call still counts
toward "once per 24 hours": an idle agent must not spend tokens retrying.
The call runs off the curator's thread (it stays responsive) and its
answer, a ``BrainstormAnswered``, is stored back on it (``answered``). New ideas are
stored as active candidates marked ``brainstorm`` with the theme, checked
against every candidate stored inside the same write, each with an audit
event ``brainstormed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import lmdb

from enact.actors._batching import Deferred
from enact.evolution import brainstorm as rules
from enact.evolution import guard
from enact.evolution.candidates import Candidate, CandidateState
from enact.evolution.curator_effects import CandidatesChanged, ModelCall, Steps, ask, counted
from enact.frozen_dataclass import dataclass
from enact.messages.common import RefusalCode, Refused
from enact.messages.curator import AuditEvent, Brainstorm, Brainstormed
from enact.messages.tasks import List, TaskPage
from enact.storage import RecordTable, Store, Table

log = logging.getLogger(__name__)

RECENT_TASKS = 12
_THEME_KEPT = 200


@dataclass(frozen=True, slots=True)
class BrainstormAnswered:
    """The model's answer (or why there is none), to be stored on the actor's thread."""

    reply: Deferred
    theme: str
    answer: str
    failure: str


class Brainstorms:
    def __init__(self, store: Store, *, settings: Table, candidates: RecordTable[Candidate],
                 audit: Callable[[lmdb.Transaction, AuditEvent], None], is_current: Callable[[], bool]) -> None:
        self._store = store
        self._settings = settings
        self._candidates = candidates
        self._audit = audit
        self._is_current = is_current
        """Whether this daemon still owns the home (the fence)."""

    def _completed_work(self) -> Steps[list[str]]:
        page = yield from ask("tasks", List(limit=RECENT_TASKS * 2))
        if not isinstance(page, TaskPage):
            return []
        ended = [task for task in page.tasks if task.state.ended][:RECENT_TASKS]
        return [f"task {task.id} {task.state}: {task.request} — {task.summary}" for task in ended]

    def start(self, message: Brainstorm, now: float) -> Steps[Deferred | Brainstormed | Refused]:
        theme = " ".join(message.theme.split())
        if not theme:
            return Refused(reason="a brainstorm needs a theme (evolve.theme, or a mission in the private identity)",
                           code=RefusalCode.INVALID)
        if not self._is_current():
            return Refused(reason="this daemon was taken over (fenced); it brainstorms nothing",
                           code=RefusalCode.FENCED)
        key = rules.theme_key(theme).encode()

        def claim(txn: lmdb.Transaction) -> list[Candidate] | None:
            last = self._settings.get(txn, key)
            if not rules.allowed(last["at"] if last else None, now):
                return None
            self._settings.put(txn, key, {"at": now, "theme": theme[:_THEME_KEPT]})
            return [candidate for _, candidate in self._candidates.items(txn)]

        existing = self._store.write(claim)
        if existing is None:
            return Brainstormed(candidates=(), skipped=True, note="this theme was brainstormed within 24 hours")
        summaries = [f"{c.draft.title} ({c.state})" for c in sorted(existing, key=lambda c: -c.updated_at)]
        prompt = rules.prompt(theme, summaries, (yield from self._completed_work()))
        reply = Deferred()
        yield ModelCall(prompt, lambda answer, failure, at: self.answered(
            BrainstormAnswered(reply=reply, theme=theme, answer=answer, failure=failure), at), purpose="brainstorm")
        return reply

    def answered(self, message: BrainstormAnswered, now: float) -> Steps[None]:
        try:
            outcome = yield from self._outcome(message, now)
        except Exception as error:  # a fenced or failed write: the asker hears it rather than waiting
            log.warning("brainstorm on %r stored nothing: %s", message.theme[:80], error)
            message.reply.fail(error)
            return
        message.reply.resolve(outcome)

    def _outcome(self, message: BrainstormAnswered, now: float) -> Steps[Brainstormed]:
        theme = message.theme
        if message.failure:
            log.warning("brainstorm on %r stored nothing: %s", theme[:80], message.failure)
            return Brainstormed(candidates=(), note=message.failure)
        try:
            ideas = rules.parse(message.answer)
        except rules.BrainstormError as error:
            log.warning("brainstorm on %r stored nothing: %s", theme[:80], error)
            return Brainstormed(candidates=(), note=str(error))
        for idea in ideas:
            refused = guard.refusal({"title": idea.title, "proposed_change": idea.proposed_change})
            if refused:
                log.warning("brainstorm on %r rejected as a whole: %s", theme[:80], refused)
                return Brainstormed(candidates=(), note=f"rejected: {refused}")

        def store_new(txn: lmdb.Transaction) -> tuple[str, ...]:
            titles = [candidate.draft.title for _, candidate in self._candidates.items(txn)]
            stored = []
            for idea in rules.fresh(ideas, titles):
                new_id = idea.id
                self._candidates.put(txn, new_id.encode(), Candidate(
                    id=new_id, draft=idea, state=CandidateState.ACTIVE, brainstorm=True,
                    theme=theme[:_THEME_KEPT], created_at=now, updated_at=now))
                event = AuditEvent(at=now, kind="brainstormed", candidate_id=new_id,
                                   detail=f"{idea.title} (theme: {theme[:_THEME_KEPT]})")
                self._audit(txn, event)
                stored.append(new_id)
            return tuple(stored)

        stored = self._store.write(store_new)
        if stored:
            yield from counted(CandidatesChanged())
        note = "" if stored else f"all {len(ideas)} ideas repeat existing candidates" if ideas else "no ideas"
        log.info("brainstorm on %r stored %d candidates %s", theme[:80], len(stored), note)
        return Brainstormed(candidates=stored, note=note)
