"""Brainstorming (auto-evolve only): candidates from the configured theme
or mission rather than from evidence.

One isolated, read-only model call (purpose ``curation``) is sent the theme,
summaries of the existing candidates and of recent completed work, and asks
for a JSON array of at most 3 candidates with exactly the keys synthesis
uses (``evidence_ids`` empty: a brainstorm cites no evidence). The reply is
valid as a whole or not at all. Ideas whose normalised title matches any
existing candidate (whatever its state) or an earlier idea are dropped.
A theme is brainstormed at most once per 24 hours.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from enact.credentials import redact
from enact.errors import EnactError
from enact.evolution.candidates import CANDIDATE_FIELDS, MAX_FIELD, Draft, normalised
from enact.evolution.replies import exact_keys, json_array, text_field

MAX_IDEAS = 3
INTERVAL_S = 24 * 3_600
PROMPT_HEADING = "enact evolution: brainstorm"
SOURCE = "brainstorm"
"""The ``source`` of a brainstormed candidate (not feedback nor experience)."""
MAX_THEME = 2_000
MAX_SUMMARIES = 40
_SUMMARY_CHARS = 240


class BrainstormError(EnactError, ValueError):
    """The model's reply is not a valid brainstorm; the message is one line."""


def theme_key(theme: str) -> str:
    """Where a theme's last brainstorm time is kept: the same for any
    spelling that normalises alike."""
    return "brainstorm:" + hashlib.sha256(normalised(theme).encode()).hexdigest()[:16]


def allowed(last_at: float | None, now: float) -> bool:
    """Whether a theme last brainstormed at ``last_at`` may be again now."""
    return last_at is None or now - last_at >= INTERVAL_S


def _clip(text: str, limit: int) -> str:
    # Redact before clipping: a clip could cut a credential short of the shape redact knows.
    text = " ".join(redact(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prompt(theme: str, candidates: Sequence[str], completed: Sequence[str]) -> str:
    """The brainstorm prompt; ``candidates`` and ``completed`` are one-line
    summaries (the newest first), redacted, then clipped and capped here."""
    known = "\n".join(f"- {_clip(line, _SUMMARY_CHARS)}" for line in candidates[:MAX_SUMMARIES]) or "- none"
    done = "\n".join(f"- {_clip(line, _SUMMARY_CHARS)}" for line in completed[:MAX_SUMMARIES]) or "- none"
    keys = ", ".join(CANDIDATE_FIELDS)
    text = (
        f"{PROMPT_HEADING}. You propose bounded improvements to enact itself, a personal software agent, "
        "from its owner's theme below; you are not given evidence, so these are ideas, not findings.\n"
        f"Theme: {_clip(theme, MAX_THEME)}\n\n"
        f"Existing candidates (do not repeat them):\n{known}\n\n"
        f"Recent completed work:\n{done}\n\n"
        f"Reply with only a JSON array of at most {MAX_IDEAS} objects, each with exactly the keys {keys}; "
        f'"evidence_ids" is an empty list, every other value a non-empty string of at most {MAX_FIELD} '
        "characters. Nothing that touches identity, mission, credentials, permissions, merging, deploying or "
        "the daemon's own authority, and nothing destructive. An empty array is a fine answer."
    )
    return text


def parse(reply: str) -> tuple[Draft, ...]:
    """The ideas in ``reply`` (drafts of source ``brainstorm``, citing no
    evidence); BrainstormError says why it is not valid."""
    data = json_array(reply, most=MAX_IDEAS, items="candidates", error=BrainstormError)
    return tuple(_idea(index, item) for index, item in enumerate(data, 1))


def _idea(index: int, item: object) -> Draft:
    where = f"brainstorm candidate {index}"
    item = exact_keys(item, CANDIDATE_FIELDS, where=where, error=BrainstormError)
    if item["evidence_ids"] != []:
        raise BrainstormError(f"{where}: evidence_ids must be empty (a brainstorm cites no evidence)")
    return Draft(source=SOURCE, evidence_ids=(),
                 **{key: text_field(item, key, most=MAX_FIELD, where=where, error=BrainstormError).strip()
                    for key in CANDIDATE_FIELDS[1:]})


def fresh(ideas: Iterable[Draft], existing_titles: Iterable[str]) -> tuple[Draft, ...]:
    """The ideas whose normalised title is new: not an existing candidate's
    (in any state) nor an earlier idea's."""
    seen = {normalised(title) for title in existing_titles}
    kept = []
    for idea in ideas:
        title = normalised(idea.title)
        if title and title not in seen:
            seen.add(title)
            kept.append(idea)
    return tuple(kept)
