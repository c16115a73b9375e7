"""Synthesis: active, unlinked evidence signals into at most five candidates.

The model sees the signals (redacted by the scanner, and again here for any
stored before a pattern was known) and answers one JSON array; the reply is
taken whole or not at all. Every candidate draws on one source only, and
one candidate out of bounds (``enact.evolution.guard``) rejects the batch,
so its signals stay active for the next run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import orjson

from enact.credentials import redact
from enact.errors import EnactError
from enact.evolution import guard, ranking
from enact.evolution.candidates import (
    CANDIDATE_FIELDS,
    MAX_FIELD,
    Candidate,
    CandidateState,
    Draft,
)
from enact.evolution.replies import exact_keys, json_array, text_field
from enact.evolution.signals import Signal

MAX_SIGNALS = 100
MAX_CANDIDATES = 5
PROMPT_HEADING = "enact evolution: candidate synthesis"
_TEXT_FIELDS = tuple(name for name in CANDIDATE_FIELDS if name != "evidence_ids")


class SynthesisError(EnactError, ValueError):
    """The model's reply is not a valid batch; the message says why."""


def pending(signals: Iterable[Signal]) -> list[Signal]:
    """Signals no candidate has claimed yet, oldest first, at most MAX_SIGNALS."""
    free = sorted((signal for signal in signals if not signal.candidate_id), key=lambda s: (s.created_at, s.id))
    return free[:MAX_SIGNALS]


def claimed(candidates: Iterable[Candidate], signals: Iterable[Signal]) -> dict[str, tuple[str, ...]]:
    """Unlinked signals a stored candidate already draws on, by candidate id:
    left so by a crash between committing the candidate and linking them.
    Only a live candidate (active or approved) claims: a removed or adopted
    one must not take back signals that are free again."""
    owner: dict[str, str] = {}
    for candidate in candidates:
        if candidate.state not in (CandidateState.ACTIVE, CandidateState.APPROVED):
            continue
        for evidence in candidate.draft.evidence_ids:
            owner.setdefault(evidence, candidate.id)
    found: dict[str, list[str]] = {}
    for signal in signals:
        if not signal.candidate_id and signal.id in owner:
            found.setdefault(owner[signal.id], []).append(signal.id)
    return {candidate: tuple(sorted(ids)) for candidate, ids in found.items()}


def prompt(signals: Sequence[Signal]) -> str:
    lines = [
        PROMPT_HEADING,
        "",
        "You curate improvements to enact, a personal software agent, from evidence about how it served its owner.",
        f"Answer with a JSON array (nothing before or after it) of at most {MAX_CANDIDATES} objects with exactly "
        "these keys: " + ", ".join(CANDIDATE_FIELDS) + ".",
        "evidence_ids: a non-empty list of signal ids below, all of one source (feedback or experience). "
        f"Every other value is a string of at most {MAX_FIELD} characters. Answer [] when nothing is worth doing.",
        "Never propose changes to the agent's identity, mission, credentials, permissions, merging, deploying "
        "or its own authority, and nothing destructive: such a proposal rejects the whole answer.",
        "",
        "Signals:",
    ]
    for signal in signals:
        lines.append(orjson.dumps({
            "id": signal.id, "source": signal.source, "observation": redact(signal.observation),
            "evidence_type": redact(signal.evidence_type), "affected_area": redact(signal.affected_area),
            "desired_outcome": redact(signal.desired_outcome), "confidence": signal.confidence,
            "explicit": signal.explicit,
        }).decode())
    return "\n".join(lines)


def parse(text: str, signals: Mapping[str, Signal]) -> list[Draft]:
    """The model's batch, validated whole; raises SynthesisError naming the
    first problem."""
    answer = json_array(text, most=MAX_CANDIDATES, items="candidates", error=SynthesisError)
    drafts = [_draft(number, item, signals) for number, item in enumerate(answer, start=1)]
    for number, draft in enumerate(drafts, start=1):
        why = guard.refusal({name: getattr(draft, name) for name in guard.SCOPE_FIELDS})
        if why:
            raise SynthesisError(f"candidate {number} ({draft.title!r}) is out of bounds: {why}; "
                                 "the whole batch is rejected")
    return drafts


def _draft(number: int, item: object, signals: Mapping[str, Signal]) -> Draft:
    where = f"candidate {number}"
    item = exact_keys(item, CANDIDATE_FIELDS, where=where, error=SynthesisError)
    evidence = item["evidence_ids"]
    if not isinstance(evidence, list) or not evidence or not all(isinstance(ref, str) for ref in evidence):
        raise SynthesisError(f"{where}: evidence_ids must be a non-empty list of signal ids")
    unknown = [ref for ref in evidence if ref not in signals]
    if unknown:
        raise SynthesisError(f"{where}: evidence_ids names {unknown[0]!r}, which is not a signal it was shown")
    sources = sorted({signals[ref].source for ref in evidence})
    if len(sources) != 1:
        raise SynthesisError(f"{where} draws on more than one source ({', '.join(sources)})")
    fields = {name: text_field(item, name, most=MAX_FIELD, where=where, error=SynthesisError).strip()
              for name in _TEXT_FIELDS}
    return Draft(source=sources[0], evidence_ids=tuple(sorted(set(evidence))), **fields)


def candidate(draft: Draft, signals: Mapping[str, Signal], now: float) -> Candidate:
    evidence = [signals[ref] for ref in draft.evidence_ids]
    return Candidate(id=draft.id, draft=draft, state=CandidateState.ACTIVE,
                     score=ranking.score(draft.source, evidence, now), created_at=now, updated_at=now,
                     evidence_at=max(signal.created_at for signal in evidence))
