"""A remembered fact and its vocabulary: the shape every part of memory shares.

The Memory actor stores facts as these records in LMDB (enums by value); the
index, the startup context and recall read them. Admission
(``enact.memory.admission``) is the only way a text becomes a fact.
"""

from __future__ import annotations

import enum

from enact.frozen_dataclass import dataclass


class FactType(enum.StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    DECISION = "decision"
    WORKFLOW_RULE = "workflow_rule"
    PERSON = "person"
    PROJECT = "project"


class Scope(enum.StrEnum):
    USER = "user"
    PROJECT = "project"
    INSTANCE = "instance"


class Confidence(enum.StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """Higher is stronger: high 3, medium 2, low 1."""
        return _CONFIDENCE_RANK[self]


class Sensitivity(enum.StrEnum):
    NORMAL = "normal"
    PRIVATE = "private"
    SECRET = "secret"

    @property
    def rank(self) -> int:
        """Higher is more sensitive: normal 1, private 2, secret 3."""
        return _SENSITIVITY_RANK[self]


class FactState(enum.StrEnum):
    ACTIVE = "active"
    PENDING = "pending"
    """Held until the owner confirms it; never sent to a model."""


_CONFIDENCE_RANK = {Confidence.HIGH: 3, Confidence.MEDIUM: 2, Confidence.LOW: 1}
_SENSITIVITY_RANK = {Sensitivity.NORMAL: 1, Sensitivity.PRIVATE: 2, Sensitivity.SECRET: 3}

HUMAN_CLI_ORIGIN = "human-cli"
MODEL_MARKER_ORIGIN = "model-marker"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    id: str
    """Short and stable: ``f-`` and eight hex digits."""
    text: str
    type: FactType
    scope: Scope
    subject: str
    confidence: Confidence
    sensitivity: Sensitivity
    tags: tuple[str, ...]
    refs: tuple[str, ...]
    """Where it came from: event ids."""
    origin: str
    """``human-cli``, ``model-marker``, ``extension:<name>`` …"""
    state: FactState
    created_at: float
    updated_at: float
    """Epoch seconds."""
