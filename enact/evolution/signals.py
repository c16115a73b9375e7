"""Evidence signals: what a scan observed in the turns or the tasks, with the
records it rests on. A signal's id derives from its content, so scanning the
same records twice cannot store the same signal twice."""

from __future__ import annotations

import enum
import hashlib
import re

from enact.frozen_dataclass import dataclass


class SignalState(enum.StrEnum):
    ACTIVE = "active"
    """Observed, not yet drawn on by a candidate."""
    LINKED = "linked"
    """A candidate rests on it."""
    DISMISSED = "dismissed"
    RESOLVED = "resolved"
    """The candidate it supports was adopted."""


class EvidenceSource(enum.StrEnum):
    FEEDBACK = "feedback"
    """The owner's turns with enact."""
    EXPERIENCE = "experience"
    """What enact's tasks went through."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Signal:
    id: str
    source: EvidenceSource
    observation: str
    evidence_type: str
    affected_area: str
    desired_outcome: str
    confidence: float
    explicit: bool
    """The owner said it in so many words (not inferred)."""
    evidence_refs: tuple[str, ...]
    """``turn:<cursor>`` or ``task:<id>@<latest event sequence>``."""
    state: SignalState
    scan_id: str
    candidate_id: str = ""
    created_at: float
    updated_at: float


_SPACES = re.compile(r"\s+")
_TRAILING_PUNCTUATION = ".,;:!?…"


def normalised_observation(text: str) -> str:
    """Case, runs of whitespace and trailing punctuation do not make a new observation."""
    return _SPACES.sub(" ", text.casefold()).strip().rstrip(_TRAILING_PUNCTUATION).strip()


def signal_id(source: EvidenceSource | str, observation: str, refs: tuple[str, ...] | list[str]) -> str:
    digest = hashlib.sha256()
    for part in (str(source), normalised_observation(observation), *sorted(set(refs))):
        digest.update(part.encode())
        digest.update(b"\0")
    return "sig-" + digest.hexdigest()[:12]


def turn_ref(cursor: int) -> str:
    return f"turn:{cursor}"


def task_ref(task_id: int, latest_sequence: int) -> str:
    return f"task:{task_id}@{latest_sequence}"


def experience_ref(task_id: int) -> str:
    """A task's experience record: one per task, written once when it succeeded."""
    return f"experience:{task_id}"
