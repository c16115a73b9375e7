"""Fact records (local stand-in written to the cross-team contract; replaced
by branch ``mem``'s module when it is merged)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FactType(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    DECISION = "decision"
    WORKFLOW_RULE = "workflow_rule"
    PERSON = "person"
    PROJECT = "project"


class Scope(StrEnum):
    USER = "user"
    PROJECT = "project"
    INSTANCE = "instance"


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        return {"high": 3, "medium": 2, "low": 1}[self.value]


class Sensitivity(StrEnum):
    NORMAL = "normal"
    PRIVATE = "private"
    SECRET = "secret"

    @property
    def rank(self) -> int:
        return {"normal": 1, "private": 2, "secret": 3}[self.value]


class FactState(StrEnum):
    ACTIVE = "active"
    PENDING = "pending"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    id: str
    text: str
    type: FactType
    scope: Scope
    subject: str
    confidence: Confidence
    sensitivity: Sensitivity
    tags: tuple[str, ...]
    refs: tuple[str, ...]
    origin: str
    state: FactState
    created_at: float
    updated_at: float
