"""One parent change's assessment: the prompt of its isolated read-only
model call, and its reply, checked all or nothing (one malformed reply
refuses the whole scan, as the evidence scanner's check does). A reply
whose adaptation reaches into what stays the owner's (``enact.evolution.guard``)
is kept, marked refused with the guard's reason: that change is not offered,
the others are. The changes are assessed in turn within the scan's time
budget (``assess_in_turn``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import orjson

from enact.credentials import redact
from enact.errors import EnactError
from enact.evolution import guard
from enact.evolution.lineage_git import ParentChange
from enact.evolution.replies import exact_keys, json_object, text_field
from enact.frozen_dataclass import dataclass
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


class AssessmentFailed(EnactError):
    """A change's model call failed or its reply was refused: the scan records nothing."""


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
    return Assessment(files=tuple(files), confidence=float(confidence), **texts)


def scope_refusal(assessment: Assessment) -> str:
    """Why the candidate this assessment would make is out of bounds (its
    title is the summary, its proposed change the adaptation), or ""."""
    return guard.refusal({"title": assessment.summary, "proposed_change": assessment.adaptation})


@dataclass(frozen=True, slots=True, kw_only=True)
class Assessed:
    change: ParentChange
    assessment: Assessment
    refused: str
    """Why the guard refused it ("": it is offered as a candidate)."""


Invoke = Callable[[ParentChange, float], str]
"""The model's reply to one change's assessment prompt, within the given seconds (raises RuntimeFailure)."""


def assess_in_turn(changes: Sequence[ParentChange], invoke: Invoke, *, budget_s: float, call_timeout_s: float,
                   monotonic: Callable[[], float]) -> list[Assessed]:
    """The changes assessed in order, each call given what is left of
    ``budget_s`` (at most ``call_timeout_s``); those the budget left no time
    for, or whose call it cut short, are not among them (the next scan
    takes them). Raises AssessmentFailed, naming the change, when a call
    fails or a reply is malformed."""
    from enact.runtime import RuntimeFailure, RuntimeTimeout

    deadline = monotonic() + budget_s
    assessed: list[Assessed] = []
    for change in changes:
        left_s = deadline - monotonic()
        if left_s <= 0:
            break
        try:
            assessment = parse_assessment(invoke(change, min(call_timeout_s, left_s)))
        except RuntimeTimeout as failure:
            if call_timeout_s <= left_s:  # the call's own timeout, not the budget's
                raise AssessmentFailed(f"the model call for {change.commit[:12]} failed ({failure.kind}): "
                                       f"{failure}") from None
            break
        except RuntimeFailure as failure:
            raise AssessmentFailed(f"the model call for {change.commit[:12]} failed ({failure.kind}): "
                                   f"{failure}") from None
        except InvalidAssessment as invalid:
            raise AssessmentFailed(f"the assessment of {change.commit[:12]} was refused: {invalid}") from None
        assessed.append(Assessed(change=change, assessment=assessment, refused=scope_refusal(assessment)))
    return assessed
