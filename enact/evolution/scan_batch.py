"""What one scan sends: its records, each under the ref a signal may cite,
with credentials redacted before anything reaches a model."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from enact.credentials import redact
from enact.evolution.signals import EvidenceSource, experience_ref, task_ref, turn_ref
from enact.frozen_dataclass import dataclass
from enact.messages.inbox import Turn
from enact.messages.tasks import TaskSnapshot
from enact.tasks.records import Experience, TaskState

MAX_RECORD_TEXT = 2_000
"""Each text of a record is clipped to this (after redaction, so a clip
never cuts a credential into a piece the patterns no longer see)."""
MAX_TASK_EVENTS = 40
"""A task's newest events sent; a long repair loop is summarised by its end."""

_UNSETTLED = frozenset({TaskState.QUEUED, TaskState.RUNNING})
"""A task still under way is scanned once it settles (its next event brings it back)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceRecord:
    ref: str
    fields: dict[str, object]
    """What the model reads of the record, redacted and clipped."""


def _text(value: str) -> str:
    cleaned = redact(value)
    return cleaned if len(cleaned) <= MAX_RECORD_TEXT else cleaned[: MAX_RECORD_TEXT - 1] + "…"


def feedback_records(turns: Iterable[Turn]) -> list[EvidenceRecord]:
    records = []
    for turn in turns:
        fields: dict[str, object] = {"owner": _text(turn.message), "enact": _text(turn.reply),
                                     "outcome": turn.outcome}
        if turn.error:
            fields["error"] = _text(turn.error)
        if turn.actions:
            fields["actions"] = [_text(f"{action.command} ({'ok' if action.ok else 'failed'}): {action.receipt}")
                                 for action in turn.actions]
        records.append(EvidenceRecord(ref=turn_ref(turn.cursor), fields=fields))
    return records


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperienceBatch:
    records: list[EvidenceRecord]
    markers: tuple[tuple[int, int], ...]
    """(task id, latest event sequence) of each record."""


def experience_records(snapshots: Iterable[TaskSnapshot], markers: Mapping[int, int]) -> ExperienceBatch:
    """Settled tasks whose latest event is newer than what a completed scan
    processed (``markers``: task id → that event's sequence)."""
    records, marked = [], []
    for snapshot in snapshots:
        task, latest = snapshot.task, snapshot.events[-1].cursor
        if task.state in _UNSETTLED or markers.get(task.id, 0) >= latest:
            continue
        events = [f"{event.event.kind.value} ({event.event.state.value}): {event.event.summary}"
                  for event in snapshot.events[-MAX_TASK_EVENTS:]]
        fields: dict[str, object] = {
            "request": _text(task.request), "state": task.state.value, "attempt": task.attempt,
            "summary": _text(task.summary),
            "events": [_text(line) for line in events],
        }
        records.append(EvidenceRecord(ref=task_ref(task.id, latest), fields=fields))
        if snapshot.experience is not None:
            records.append(_experience_record(snapshot.experience))
        marked.append((task.id, latest))
    return ExperienceBatch(records=records, markers=tuple(marked))


def _experience_record(experience: Experience) -> EvidenceRecord:
    """A succeeded task's experience, beside its task record, under a ref of its own."""
    files = list(experience.files)
    if experience.files_changed > len(files):
        files.append(f"and {experience.files_changed - len(files)} more")
    fields: dict[str, object] = {
        "task": experience.task_id, "request": _text(experience.request), "files": [_text(f) for f in files],
        "diffstat": _text(experience.diffstat), "doctor": _text(experience.doctor),
        "tests": {"passed": experience.tests_passed, "failed": experience.tests_failed,
                  "skipped": experience.tests_skipped},
        "repairs": experience.repairs, "attempt": experience.attempt, "review": experience.review_id,
    }
    return EvidenceRecord(ref=experience_ref(experience.task_id), fields=fields)


def source_noun(source: EvidenceSource, count: int) -> str:
    noun = "turn" if source is EvidenceSource.FEEDBACK else "task"
    return f"{count} {noun}" + ("" if count == 1 else "s")
