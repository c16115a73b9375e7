"""``curator.Brainstorm``, as the curator actor carries it out: the rules
are ``enact.evolution.brainstorm``; this stores and calls.

The theme's brainstorm time is committed (``evolution.settings``) before
the model is called, so that a failed or interrupted call still counts
toward "once per 24 hours": an idle agent must not spend tokens retrying.
The call runs off the curator's thread (it stays responsive) and its
answer, a ``BrainstormAnswered``, is stored back on it. New ideas are
stored as active candidates marked ``brainstorm`` with the theme, checked
against every candidate stored inside the same write, each with an audit
event ``brainstormed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import lmdb

from enact.actors._base import ActorContext
from enact.actors._batching import Deferred
from enact.actors._long_work import OffThread
from enact.cancellation import CancellationToken
from enact.config import RuntimeSettings
from enact.evolution import brainstorm as rules
from enact.evolution import guard
from enact.evolution.candidates import Candidate, CandidateState
from enact.messages.common import RefusalCode, Refused
from enact.messages.curator import AuditEvent, Brainstorm, Brainstormed
from enact.messages.tasks import List, TaskPage
from enact.runtime import Runtime, RuntimeRequest
from enact.storage import RecordTable, Table

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
    def __init__(self, context: ActorContext, *, settings: Table, candidates: RecordTable[Candidate],
                 audit: Callable[[lmdb.Transaction, AuditEvent], None], runtime: Runtime,
                 off_thread: OffThread, stored: Callable[[], None]) -> None:
        self._context = context
        self._off_thread = off_thread
        self._store = context.own_store()
        self._settings = settings
        self._candidates = candidates
        self._audit = audit
        self._runtime = runtime
        self._stored = stored
        """Called after candidates were stored (the curator recounts its states)."""

    def _completed_work(self) -> list[str]:
        page = self._context.ask("tasks", List(limit=RECENT_TASKS * 2))
        if not isinstance(page, TaskPage):
            return []
        ended = [task for task in page.tasks if task.state.ended][:RECENT_TASKS]
        return [f"task {task.id} {task.state}: {task.request} — {task.summary}" for task in ended]

    def start(self, message: Brainstorm) -> Deferred | Brainstormed | Refused:
        theme = " ".join(message.theme.split())
        if not theme:
            return Refused(reason="a brainstorm needs a theme (evolve.theme, or a mission in the private identity)",
                           code=RefusalCode.INVALID)
        if not self._context.fence.is_current():
            return Refused(reason="this daemon was taken over (fenced); it brainstorms nothing",
                           code=RefusalCode.FENCED)
        key = rules.theme_key(theme).encode()
        now = self._context.clock.time()

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
        prompt = rules.prompt(theme, summaries, self._completed_work())
        timeout_s = self._context.config.typed(RuntimeSettings).timeout_s
        reply = Deferred()

        def call(cancel: CancellationToken) -> BrainstormAnswered:
            request = RuntimeRequest(session_key="", prompt=prompt, sandbox="read-only", purpose="curation",
                                     timeout_s=timeout_s, cancel=cancel)
            try:
                answer, failure = self._runtime.invoke(request).text, ""
            except Exception as error:  # a model failure of any kind: the reply says so
                answer, failure = "", f"the model call failed: {type(error).__name__}: {error}"
            return BrainstormAnswered(reply=reply, theme=theme, answer=answer, failure=failure)

        self._off_thread(call, then=self.answered)
        return reply

    def answered(self, message: BrainstormAnswered) -> None:
        try:
            outcome = self._outcome(message)
        except Exception as error:  # a fenced or failed write: the asker hears it rather than waiting
            log.warning("brainstorm on %r stored nothing: %s", message.theme[:80], error)
            message.reply.fail(error)
            return
        message.reply.resolve(outcome)

    def _outcome(self, message: BrainstormAnswered) -> Brainstormed:
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
        now = self._context.clock.time()

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
            self._stored()
        note = "" if stored else f"all {len(ideas)} ideas repeat existing candidates" if ideas else "no ideas"
        log.info("brainstorm on %r stored %d candidates %s", theme[:80], len(stored), note)
        return Brainstormed(candidates=stored, note=note)
