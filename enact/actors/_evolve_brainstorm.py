"""``curator.Brainstorm``, as the curator actor carries it out: the rules
are ``enact.evolution.brainstorm``; this stores and calls.

The theme's brainstorm time is committed (``evolution.settings``) before
the model is called, so that a failed or interrupted call still counts
toward "once per 24 hours": an idle agent must not spend tokens retrying.
New ideas are stored as active candidates marked ``brainstorm`` with the
theme, deduplicated again inside the write against every candidate stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import lmdb

from enact.evolution import brainstorm as rules
from enact.evolution import guard
from enact.evolution.candidates import Candidate, CandidateState, candidate_id
from enact.messages._registry import Request
from enact.messages.common import Rejected
from enact.messages.curator import Brainstorm, Brainstormed
from enact.messages.tasks import List, TaskPage
from enact.runtime import Runtime, RuntimeFailure, RuntimeRequest
from enact.storage import RecordTable, Store, Table

log = logging.getLogger(__name__)

RECENT_TASKS = 12
Ask = Callable[[str, Request[Any]], Any]


def _completed_work(ask: Ask) -> list[str]:
    page = ask("tasks", List(limit=RECENT_TASKS * 2))
    if not isinstance(page, TaskPage):
        return []
    ended = [task for task in page.tasks if task.state.ended][:RECENT_TASKS]
    return [f"task {task.id} {task.state}: {task.request} — {task.summary}" for task in ended]


def brainstorm(message: Brainstorm, *, store: Store, settings: Table, candidates: RecordTable[Candidate],
               runtime: Runtime, ask: Ask, timeout_s: float) -> Brainstormed | Rejected:
    theme = " ".join(message.theme.split())
    if not theme:
        return Rejected(reason="a brainstorm needs a theme (evolve.theme, or a mission in the private identity)")
    key = rules.theme_key(theme).encode()
    now = time.time()

    def claim(txn: lmdb.Transaction) -> list[Candidate] | None:
        last = settings.get(txn, key)
        if not rules.allowed(last["at"] if last else None, now):
            return None
        settings.put(txn, key, {"at": now, "theme": theme[:200]})
        return [candidate for _, candidate in candidates.items(txn)]

    existing = store.write(claim)
    if existing is None:
        return Brainstormed(candidates=(), skipped=True, note="this theme was brainstormed within 24 hours")
    summaries = [f"{c.title} ({c.state})" for c in sorted(existing, key=lambda c: -c.updated_at)]
    prompt = rules.prompt(theme, summaries, _completed_work(ask))
    try:
        result = runtime.invoke(RuntimeRequest(session_key="", prompt=prompt, sandbox="read-only",
                                               purpose="curation", timeout_s=timeout_s))
        ideas = rules.parse(result.text)
    except (RuntimeFailure, rules.BrainstormError) as error:
        log.warning("brainstorm on %r stored nothing: %s", theme[:80], error)
        return Brainstormed(candidates=(), note=str(error))
    for idea in ideas:
        refused = guard.refusal({"title": idea.title, "proposed_change": idea.proposed_change})
        if refused:
            log.warning("brainstorm on %r rejected as a whole: %s", theme[:80], refused)
            return Brainstormed(candidates=(), note=f"rejected: {refused}")

    def store_new(txn: lmdb.Transaction) -> tuple[str, ...]:
        titles = [candidate.title for _, candidate in candidates.items(txn)]
        stored = []
        for idea in rules.fresh(ideas, titles):
            new_id = candidate_id(rules.SOURCE, (), idea.title)
            candidates.put(txn, new_id.encode(), Candidate(
                id=new_id, source=rules.SOURCE, evidence_ids=(), title=idea.title, rationale=idea.rationale,
                proposed_change=idea.proposed_change, expected_benefit=idea.expected_benefit, risk=idea.risk,
                test_plan=idea.test_plan, state=CandidateState.ACTIVE, brainstorm=True, theme=theme[:200],
                created_at=now, updated_at=now))
            stored.append(new_id)
        return tuple(stored)

    stored = store.write(store_new)
    note = "" if stored else f"all {len(ideas)} ideas repeat existing candidates" if ideas else "no ideas"
    log.info("brainstorm on %r stored %d candidates %s", theme[:80], len(stored), note)
    return Brainstormed(candidates=stored, note=note)
