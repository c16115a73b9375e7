"""The scan's prompt: observations only, as one JSON array, about the records sent."""

from __future__ import annotations

import orjson

from enact.evolution.scan_batch import EvidenceRecord
from enact.evolution.signals import EvidenceSource

MAX_OBSERVATIONS = 10
OBSERVATION_KEYS = ("observation", "evidence_type", "affected_area", "desired_outcome", "confidence", "explicit",
                    "evidence_refs")

PROMPT_HEAD = "enact evidence scan"
"""The prompt's first words, then the source: what a scripted rule matches."""

_WHAT = {
    EvidenceSource.FEEDBACK: "turns of the conversation between enact (a personal software agent) and its owner",
    EvidenceSource.EXPERIENCE: "tasks enact (a personal software agent) worked on, each with its lifecycle events "
                               "(and, for a task that succeeded with a change, its experience record: what was "
                               "asked, what changed, the doctor's outcome, the repairs it took)",
}


def scan_prompt(source: EvidenceSource, records: list[EvidenceRecord]) -> str:
    lines = [
        f"{PROMPT_HEAD}: {source.value}",
        "",
        f"Below are {len(records)} {_WHAT[source]}, one JSON object per line, each under its ref.",
        "Report what they show about how enact should improve: complaints, corrections, repeated friction,",
        "failures and their causes, wishes the owner stated. Observations only: no code, no plans, no fixes.",
        "",
        f"Answer with one JSON array and nothing else (no prose, no code fence): at most {MAX_OBSERVATIONS}",
        "objects, each with exactly these keys:",
        '  "observation": what you observed (at most 2000 characters)',
        '  "evidence_type": e.g. complaint, correction, failure, friction, wish',
        '  "affected_area": the part of enact concerned',
        '  "desired_outcome": what would be better',
        '  "confidence": a number from 0 to 1',
        '  "explicit": true if the owner said it in so many words, false if inferred',
        '  "evidence_refs": a non-empty list of the refs below it rests on',
        "Nothing worth reporting: answer [].",
        "",
        "Records:",
    ]
    lines.extend(orjson.dumps({"ref": record.ref, **record.fields}).decode() for record in records)
    return "\n".join(lines)
