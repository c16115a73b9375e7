"""Admission: the rules a text passes before it becomes a fact, and merging.

The rules run in a fixed order and the first that fails refuses the text
with a one-line reason that never repeats it (a refused text may hold a
credential): whitespace is collapsed and empty text refused; a credential is
refused; instruction-like text that tries to steer the agent is refused; a
long text is clipped with a visible mark; enums are normalised (an unknown
value is refused, never replaced); tags are lowercased and slugged.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
from collections.abc import Sequence
from typing import TypeVar

from enact.credentials import REDACTED, find_credential
from enact.frozen_dataclass import dataclass
from enact.memory.facts import (
    HUMAN_CLI_ORIGIN,
    Confidence,
    Fact,
    FactState,
    FactType,
    Scope,
    Sensitivity,
)

TRUNCATION_MARK = " […truncated]"
MAX_TAGS = 8
MAX_TAG_CHARS = 40
MAX_SUBJECT_CHARS = 120
MAX_REFS = 64
"""A fact merged many times keeps its latest refs only."""

# Phrases that address the agent rather than describe the owner's world.
# Each names what it tries, for the refusal. They aim at the agent's own
# instructions, prompt, secrets and safety (possessed by "you", or "previous",
# "system", "all" ones), so that the owner's facts about their own rules,
# prompts, confirmations and approvals ("we ignore the lint warnings in
# tests", "I disable confirmations in git") are not mistaken for steering.
_VERB_OVERRIDE = r"\b(?:ignore|disregard|forget|override|bypass)\b"
_VERB_REVEAL = r"\b(?:reveal|print|show|leak|output|disclose|repeat|dump)\b(?:\s+me)?"
_VERB_DISABLE = r"\b(?:disable|turn off|switch off|remove|ignore|bypass)\b"
_STEERING_PATTERNS = (
    ("to override its instructions",
     rf"{_VERB_OVERRIDE}\s+(?:(?:all|any)\s+(?:of\s+)?)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier|"
     r"preceding|system|developer|original|initial|your)\s+(?:\w+\s+)?(?:instructions?|prompts?|rules|"
     r"directives|guidelines)\b"
     rf"|{_VERB_OVERRIDE}\s+(?:all|any|your)\s+(?:of\s+)?(?:the\s+|your\s+)?(?:instructions?|prompts?|rules|"
     r"directives|guidelines)\b"
     rf"|{_VERB_OVERRIDE}\s+(?:everything|anything)\s+(?:above|before|said before|you were told)"),
    ("to reveal secrets or the system prompt",
     rf"{_VERB_REVEAL}\s+(?:all\s+(?:of\s+)?)?(?:your|the)\s+(?:system|hidden|initial|original|developer)\s+"
     r"(?:prompts?|instructions|message)\b"
     rf"|{_VERB_REVEAL}\s+(?:all\s+(?:of\s+)?)?your\s+(?:\w+\s+)?(?:prompts?|instructions|secrets?|api keys?|"
     r"credentials|passwords?|tokens)\b"
     rf"|{_VERB_REVEAL}\s+(?:all\s+(?:of\s+)?)?(?:the\s+|any\s+)?(?:secrets?|api keys?|credentials|passwords?|"
     r"tokens)\s+(?:you\b|stored|in (?:your )?memory)"),
    ("to disable its safety",
     rf"{_VERB_DISABLE}[^.]{{0,20}}?\b(?:safety|guardrails?|sandbox(?:ing)?|content filters?)\b"
     rf"|{_VERB_DISABLE}\s+(?:all\s+(?:of\s+)?)?your\s+(?:\w+\s+)?(?:confirmations?|approvals?|filters?|"
     r"restrictions|rules|checks|limits)\b"),
    ("to change who it is",
     r"\b(?:you are now|from now on,? you (?:are|will|must)|new instructions\s*:|act as an? (?:unrestricted|"
     r"jailbroken|unfiltered)|developer mode|do anything now)\b"),
    ("to speak as the system", r"^\s*(?:system|assistant)\s*:|<\s*/?\s*system\s*>"),
)


@functools.cache
def _steering() -> tuple[re.Pattern[str], tuple[tuple[str, re.Pattern[str]], ...]]:
    """All of them at once first: a text that steers nowhere (nearly every
    text) is searched once; compiled when a fact is first judged, not by every
    daemon's start."""
    steering = tuple((why, re.compile(pattern, re.IGNORECASE)) for why, pattern in _STEERING_PATTERNS)
    return re.compile("|".join(f"(?:{pattern})" for _, pattern in _STEERING_PATTERNS), re.IGNORECASE), steering


_TRAILING_PUNCTUATION = ".!?;:,…"
_SLUG_BREAK = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A text someone asks memory to keep, with the fields as given (enums as
    strings, ``None`` for "the default")."""

    text: str
    origin: str
    type: str | None = None
    scope: str | None = None
    subject: str = ""
    confidence: str | None = None
    sensitivity: str | None = None
    tags: Sequence[str] = ()
    refs: Sequence[str] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    """A candidate that passed every rule, normalised."""

    text: str
    type: FactType
    scope: Scope
    subject: str
    confidence: Confidence
    sensitivity: Sensitivity
    tags: tuple[str, ...]
    refs: tuple[str, ...]
    origin: str
    clipped: bool

    @property
    def key(self) -> str:
        return merge_key(self.text)


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    """One line; never the refused text."""


def collapse(text: str) -> str:
    return " ".join(text.split())


def merge_key(text: str) -> str:
    """Texts with the same key are the same fact: case, whitespace and
    trailing punctuation do not count."""
    return collapse(text).casefold().rstrip(_TRAILING_PUNCTUATION + " ")


def default_confidence(origin: str) -> Confidence:
    """The owner's own word is high; anyone else's claim (a model, an
    extension) is medium until the owner says otherwise."""
    return Confidence.HIGH if origin == HUMAN_CLI_ORIGIN or origin.startswith("chat:") else Confidence.MEDIUM


def admit(candidate: Candidate, *, max_chars: int) -> Admitted | Refusal:
    """Run the rules in order; the first that fails refuses the candidate."""
    text = collapse(candidate.text)
    if not text:
        return Refusal("refused: the text is empty")
    subject = collapse(candidate.subject)
    for part, value in (("text", text), ("subject", subject), ("tags", " ".join(candidate.tags))):
        # A text carrying the redaction mark is a credential's place: such a
        # text comes from a record redacted on the way (a journaled action's
        # args), so saving it would keep what was refused, or a lie.
        kind = find_credential(value) if value else None
        if kind is None and REDACTED in value:
            kind = "a redacted one"
        if kind is not None:
            return Refusal(f"refused: the {part} contains a credential ({kind}); secrets are never kept in memory")
    steering = steering_attempt(f"{text}\n{subject}")
    if steering is not None:
        return Refusal(f"refused: it reads as an instruction to the agent ({steering}); memory keeps facts, "
                       "not instructions")
    clipped = len(text) > max_chars
    if clipped:
        text = text[: max(0, max_chars - len(TRUNCATION_MARK))].rstrip() + TRUNCATION_MARK
    if len(subject) > MAX_SUBJECT_CHARS:
        return Refusal(f"refused: the subject is longer than {MAX_SUBJECT_CHARS} characters")
    fact_type = _enum(FactType, candidate.type, FactType.FACT, "type")
    if isinstance(fact_type, Refusal):
        return fact_type
    scope = _enum(Scope, candidate.scope, Scope.USER, "scope")
    if isinstance(scope, Refusal):
        return scope
    confidence = _enum(Confidence, candidate.confidence, default_confidence(candidate.origin), "confidence")
    if isinstance(confidence, Refusal):
        return confidence
    sensitivity = _enum(Sensitivity, candidate.sensitivity, Sensitivity.NORMAL, "sensitivity")
    if isinstance(sensitivity, Refusal):
        return sensitivity
    tags = normalise_tags(candidate.tags)
    if isinstance(tags, Refusal):
        return tags
    return Admitted(text=text, type=fact_type, scope=scope, subject=subject, confidence=confidence,
                    sensitivity=sensitivity, tags=tags, refs=_unique(candidate.refs)[-MAX_REFS:],
                    origin=candidate.origin, clipped=clipped)


def steering_attempt(text: str) -> str | None:
    """What an instruction-like text tries ("to override its instructions"), or None."""
    any_steering, steering = _steering()
    if not any_steering.search(text):
        return None
    for why, pattern in steering:
        if pattern.search(text):
            return why
    return None


E = TypeVar("E", bound=enum.StrEnum)


def _enum(cls: type[E], given: str | None, default: E, field: str) -> E | Refusal:
    if given is None or not given.strip():
        return default
    normal = given.strip().lower().replace("-", "_").replace(" ", "_")
    try:
        return cls(normal)
    except ValueError:
        known = ", ".join(member.value for member in cls)
        shown = given if len(given) <= 40 and find_credential(given) is None else "the value given"
        return Refusal(f"refused: unknown {field} {shown!r}; one of {known}")


def slug(tag: str) -> str:
    """Lowercase letters and digits, runs of anything else one hyphen."""
    return _SLUG_BREAK.sub("-", tag.lower()).strip("-")


def normalise_tags(tags: Sequence[str]) -> tuple[str, ...] | Refusal:
    slugs: list[str] = []
    for tag in tags:
        tag_slug = slug(tag)
        if not tag_slug:
            continue
        if len(tag_slug) > MAX_TAG_CHARS:
            return Refusal(f"refused: a tag is longer than {MAX_TAG_CHARS} characters")
        if tag_slug not in slugs:
            slugs.append(tag_slug)
    if len(slugs) > MAX_TAGS:
        return Refusal(f"refused: {len(slugs)} tags; at most {MAX_TAGS}")
    return tuple(slugs)


def _unique(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value for value in values if value))


# -- facts made and merged ------------------------------------------------------


def new_fact(admitted: Admitted, *, fact_id: str, state: FactState, now: float) -> Fact:
    return Fact(id=fact_id, text=admitted.text, type=admitted.type, scope=admitted.scope, subject=admitted.subject,
                confidence=admitted.confidence, sensitivity=admitted.sensitivity, tags=admitted.tags,
                refs=admitted.refs, origin=admitted.origin, state=state, created_at=now, updated_at=now)


def merged(existing: Fact, admitted: Admitted, *, state: FactState, now: float) -> Fact:
    """``existing`` with ``admitted`` merged in: refs and tags unioned (the
    first tags kept within the limit), confidence and sensitivity raised to
    the stronger; active if either is (an owner's word confirms a held fact)."""
    confidence = max(existing.confidence, admitted.confidence, key=lambda c: c.rank)
    sensitivity = max(existing.sensitivity, admitted.sensitivity, key=lambda s: s.rank)
    active = FactState.ACTIVE in (existing.state, state)
    return dataclasses.replace(
        existing,
        tags=_unique((*existing.tags, *admitted.tags))[:MAX_TAGS],
        refs=_unique((*existing.refs, *admitted.refs))[-MAX_REFS:],
        confidence=confidence,
        sensitivity=sensitivity,
        subject=existing.subject or admitted.subject,
        state=FactState.ACTIVE if active else FactState.PENDING,
        updated_at=now,
    )
