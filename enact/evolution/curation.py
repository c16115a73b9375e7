"""Curation: which candidate to do next, and which to drop.

The model sees clipped snapshots of the best-ranked active candidates (at
least one per source when there is one) and the latest outcomes of recent
tasks, and answers one JSON object. A reply that fails any check, or a
model that fails, falls back to the top-ranked safe candidate and says so.
Curation only advises: it never changes a candidate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from enact.credentials import redact
from enact.errors import EnactError
from enact.evolution import guard, ranking
from enact.evolution.approval import KEY_PREFIX
from enact.evolution.candidates import Candidate, CandidateState, RemovalClass
from enact.evolution.replies import exact_keys, json_object
from enact.frozen_dataclass import dataclass
from enact.tasks.records import Task

if TYPE_CHECKING:
    from enact.messages.curator import RemovalSuggestion

MAX_SNAPSHOTS = 24
MAX_RECORDS = 12
SNAPSHOT_FIELD = 300
"""Characters kept of each text field in a snapshot."""
MAX_TEXT = 2_000
PROMPT_HEADING = "enact evolution: curation"
REPLY_KEYS = ("recommended", "reason", "guidance", "removals")
REMOVAL_KEYS = ("candidate_id", "class", "reason", "refs")


class CurationError(EnactError, ValueError):
    """The model's reply is not a valid curation; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionRecord:
    """A task's latest terminal outcome, as curation sees it."""

    ref: str  # "task:<id>"
    task_id: int
    state: str
    request: str
    summary: str
    landed: bool
    """Its review landed: the task really changed the agent's repository."""
    candidate_id: str
    finished_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    candidate_id: str
    removal_class: RemovalClass
    reason: str
    refs: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Curation:
    recommended: str | None
    reason: str
    guidance: str
    removals: tuple[Suggestion, ...]
    fallback: bool


def completion_records(tasks: Iterable[Task], landed: set[int]) -> list[CompletionRecord]:
    """The latest terminal outcome of each piece of work, newest first, at
    most MAX_RECORDS. A retry (``parent``) or an evolve task run again is the
    same work: its later failure replaces an earlier success. ``tasks`` are
    ended tasks; ``landed`` the ids of tasks whose review landed."""
    by_id = {task.id: task for task in tasks}
    latest: dict[str, CompletionRecord] = {}
    for task in by_id.values():
        root = task
        while root.parent is not None and root.parent in by_id:
            root = by_id[root.parent]
        # A retry carries a retry: key of its own; the work is named by its root's.
        evolve = root.idempotency_key.startswith(KEY_PREFIX)
        key = root.idempotency_key if evolve else f"root:{root.id}"
        # Task text may quote a credential: redact before clipping, so a
        # clip cannot cut a secret short of the shape that is redacted.
        record = CompletionRecord(
            ref=f"task:{task.id}", task_id=task.id, state=str(task.state),
            request=redact(task.request)[:SNAPSHOT_FIELD], summary=redact(task.summary)[:SNAPSHOT_FIELD],
            landed=task.id in landed, candidate_id=root.idempotency_key.removeprefix(KEY_PREFIX) if evolve else "",
            finished_at=float(task.finished_at or 0.0))
        known = latest.get(key)
        if known is None or (record.finished_at, record.task_id) > (known.finished_at, known.task_id):
            latest[key] = record
    return sorted(latest.values(), key=lambda r: (-r.finished_at, -r.task_id))[:MAX_RECORDS]


def shown(candidates: Iterable[Candidate], now: float | None = None) -> list[Candidate]:
    """The active candidates curation sees: best ranked (scored at ``now``
    when given), every source held."""
    active = [c for c in candidates if c.state is CandidateState.ACTIVE]
    return ranking.diverse(active if now is None else ranking.rescored(active, now), MAX_SNAPSHOTS)


def _clip(text: str) -> str:
    return text if len(text) <= SNAPSHOT_FIELD else text[:SNAPSHOT_FIELD - 1] + "…"


def snapshot(candidate: Candidate) -> dict[str, Any]:
    return {
        "id": candidate.id, "source": candidate.draft.source, "score": candidate.score,
        "brainstorm": candidate.brainstorm, "evidence": len(candidate.draft.evidence_ids),
        "title": _clip(candidate.draft.title), "rationale": _clip(candidate.draft.rationale),
        "proposed_change": _clip(candidate.draft.proposed_change), "risk": _clip(candidate.draft.risk),
        "test_plan": _clip(candidate.draft.test_plan),
    }


def prompt(candidates: Sequence[Candidate], records: Sequence[CompletionRecord]) -> str:
    lines = [
        PROMPT_HEADING,
        "",
        "Choose which improvement candidate enact should do next, and which candidates should be dropped.",
        "Answer with exactly one JSON object (nothing before or after it) with exactly these keys: "
        '"recommended" (a candidate id, or null when none should be done now), "reason", "guidance" (scope, risk '
        'and test guidance for the work), "removals" (a list of objects with exactly "candidate_id", "class", '
        '"reason", "refs").',
        "class is one of " + ", ".join(c.value for c in RemovalClass) + ". refs name candidate ids or task refs "
        "below. already-resolved needs a task ref whose review landed. Never recommend a candidate you suggest "
        "removing.",
        "",
        "Candidates (best ranked first):",
        *(orjson.dumps(snapshot(candidate)).decode() for candidate in candidates),
        "",
        "Recent completed work (latest outcome per task):",
        *(orjson.dumps({"ref": r.ref, "state": r.state, "request": r.request, "summary": r.summary,
                        "review_landed": r.landed, "candidate_id": r.candidate_id}).decode() for r in records),
    ]
    return "\n".join(lines)


def parse(text: str, candidates: Sequence[Candidate], records: Sequence[CompletionRecord]) -> Curation:
    """The model's curation, validated; raises CurationError naming the first problem."""
    answer = exact_keys(json_object(text, error=CurationError), REPLY_KEYS, where="the reply", error=CurationError)
    ids = {candidate.id for candidate in candidates}
    by_ref = {record.ref: record for record in records}
    recommended = answer["recommended"]
    if recommended is not None and (not isinstance(recommended, str) or recommended not in ids):
        raise CurationError(f"recommended {recommended!r} is not a candidate it was shown")
    reason, guidance = _text(answer["reason"], "reason", required=True), _text(answer["guidance"], "guidance")
    removals = answer["removals"]
    if not isinstance(removals, list) or len(removals) > MAX_SNAPSHOTS:
        raise CurationError(f"removals must be a list of at most {MAX_SNAPSHOTS} objects")
    suggestions: list[Suggestion] = []
    for number, item in enumerate(removals, start=1):
        suggestion = _suggestion(number, item, ids, by_ref)
        if suggestion.candidate_id == recommended:
            raise CurationError(f"{suggestion.candidate_id} is both recommended and suggested for removal")
        if any(known.candidate_id == suggestion.candidate_id for known in suggestions):
            raise CurationError(f"{suggestion.candidate_id} is suggested for removal twice")
        suggestions.append(suggestion)
    return Curation(recommended=recommended, reason=reason, guidance=guidance, removals=tuple(suggestions),
                    fallback=False)


def _text(value: object, name: str, *, required: bool = False) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise CurationError(f"{name} must be a {'non-empty ' if required else ''}string")
    if len(value) > MAX_TEXT:
        raise CurationError(f"{name} has {len(value)} characters; at most {MAX_TEXT} are allowed")
    return value.strip()


def _suggestion(number: int, item: object, ids: set[str], records: Mapping[str, CompletionRecord]) -> Suggestion:
    where = f"removal {number}"
    item = exact_keys(item, REMOVAL_KEYS, where=where, error=CurationError)
    candidate = item["candidate_id"]
    if not isinstance(candidate, str) or candidate not in ids:
        raise CurationError(f"{where} names {candidate!r}, which is not a candidate it was shown")
    try:
        removal_class = RemovalClass(item["class"])
    except (ValueError, TypeError):
        raise CurationError(f"{where}: class {item['class']!r} is not one of "
                            + ", ".join(c.value for c in RemovalClass)) from None
    refs = item["refs"]
    if not isinstance(refs, list) or not all(isinstance(ref, str) for ref in refs):
        raise CurationError(f"{where}: refs must be a list of strings")
    unknown = [ref for ref in refs if ref not in ids and ref not in records]
    if unknown:
        raise CurationError(f"{where}: ref {unknown[0]!r} is neither a candidate nor a task it was shown")
    if removal_class is RemovalClass.ALREADY_RESOLVED and not any(
            ref in records and records[ref].landed for ref in refs):
        raise CurationError(f"{where}: already-resolved needs a task ref whose review landed")
    return Suggestion(candidate_id=candidate, removal_class=removal_class,
                      reason=_text(item["reason"], f"{where}: reason", required=True), refs=tuple(refs))


def fallback(candidates: Sequence[Candidate], why: str) -> Curation:
    """The top-ranked safe candidate, saying that it is a fallback and why."""
    for candidate in ranking.ranked(c for c in candidates if c.state is CandidateState.ACTIVE):
        if not guard.refusal({"title": candidate.draft.title, "proposed_change": candidate.draft.proposed_change}):
            return Curation(recommended=candidate.id, fallback=True, removals=(), guidance="",
                            reason=f"curation failed ({why}): the top-ranked safe candidate")
    return Curation(recommended=None, fallback=True, removals=(), guidance="",
                    reason=f"curation failed ({why}): no safe active candidate")


def suggestion_mismatch(suggestion: RemovalSuggestion | None, candidate_id: str, removal_class: str) -> str:
    """Why a removal may not cite ``suggestion``, or "": the suggestion must
    name this candidate, and the class the owner read (when given) must be its."""
    if suggestion is None:
        return "no such removal suggestion"
    if suggestion.candidate_id != candidate_id:
        return f"suggestion {suggestion.id} is about {suggestion.candidate_id}, not {candidate_id}"
    if removal_class and removal_class != suggestion.removal_class.value:
        return f"suggestion {suggestion.id} suggests {suggestion.removal_class.value}, not {removal_class}"
    return ""
