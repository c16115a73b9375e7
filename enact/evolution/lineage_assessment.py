"""One parent change's assessment: the prompt of its isolated read-only
model call, and its reply, checked all or nothing (one fault refuses the
whole scan, as the evidence scanner's check does)."""

from __future__ import annotations

import orjson

from enact.credentials import redact
from enact.errors import EnactError
from enact.evolution import guard
from enact.evolution.lineage_git import ParentChange
from enact.evolution.replies import exact_keys, json_object, text_field
from enact.messages.lineage import Assessment

PROMPT_HEAD = "enact lineage assessment"
"""The prompt's first words: what a scripted rule matches."""
ASSESSMENT_KEYS = ("summary", "behavioural_change", "rationale", "adaptation", "risks", "files", "tests",
                   "confidence")
_TEXT_KEYS = ("summary", "behavioural_change", "rationale", "adaptation", "risks", "tests")
MAX_FIELD_CHARS = 1_200
MAX_FILES = 50


class InvalidAssessment(EnactError, ValueError):
    """Why the model's assessment is refused, in one line."""


def assessment_prompt(change: ParentChange) -> str:
    head = {"commit": change.commit, "merged": list(change.merged), "files": list(change.files)}
    lines = [
        f"{PROMPT_HEAD}: {change.commit}",
        "",
        "enact (a personal software agent) descends from a parent agent. Below is one change the parent made",
        "since enact last looked: its commit messages and its diff. Assess what it would mean for enact.",
        "Read only; change nothing.",
        "",
        "Answer with one JSON object and nothing else (no prose, no code fence), with exactly these keys:",
        '  "summary": what the change does, in a sentence or two',
        '  "behavioural_change": how the parent behaves differently because of it',
        '  "rationale": why the parent made it, as far as it shows',
        '  "adaptation": what enact could change to take it in (or why it should not)',
        '  "risks": what could go wrong in adopting it',
        '  "files": a list of the files of enact likely concerned (may be empty)',
        '  "tests": the tests that would show it works in enact',
        '  "confidence": a number from 0 to 1',
        f"Each text at most {MAX_FIELD_CHARS} characters.",
        "",
        "Change: " + orjson.dumps(head).decode(),
        "Commit messages:",
        redact(change.messages),
        "Diff" + (" (clipped)" if change.clipped else "") + ":",
        redact(change.diff),
    ]
    return "\n".join(lines)


def parse_assessment(text: str) -> Assessment:
    """The reply as an Assessment; raises InvalidAssessment."""
    item = exact_keys(json_object(text, error=InvalidAssessment), ASSESSMENT_KEYS, where="the assessment",
                      error=InvalidAssessment)
    texts = {key: text_field(item, key, most=MAX_FIELD_CHARS, where="the assessment", error=InvalidAssessment)
             for key in _TEXT_KEYS}
    files = item["files"]
    if not isinstance(files, list) or len(files) > MAX_FILES or not all(
            isinstance(name, str) and 0 < len(name) <= 300 for name in files):
        raise InvalidAssessment(f"the assessment: files must be a list of at most {MAX_FILES} file names")
    confidence = item["confidence"]
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        raise InvalidAssessment("the assessment: confidence must be a number from 0 to 1")
    refused = guard.refusal({"title": texts["summary"], "proposed_change": texts["adaptation"]})
    if refused:
        raise InvalidAssessment(f"the assessment was rejected: {refused}")
    return Assessment(files=tuple(files), confidence=float(confidence), **texts)
