"""The scan's reply, checked all or nothing: one fault fails the whole scan,
so its records stay pending and the next scan sends them again."""

from __future__ import annotations

from collections.abc import Collection

from enact.errors import EnactError
from enact.evolution.replies import exact_keys, json_array, text_field
from enact.evolution.scan_prompt import MAX_OBSERVATIONS, OBSERVATION_KEYS
from enact.evolution.signals import EvidenceSource, Signal, SignalState, signal_id

MAX_FIELD_CHARS = 2_000
_TEXT_KEYS = ("observation", "evidence_type", "affected_area", "desired_outcome")


class InvalidScanReply(EnactError, ValueError):
    """Why the model's reply is refused, in one line."""


def parse_observations(text: str, *, source: EvidenceSource, known_refs: Collection[str], scan_id: str,
                       now: float) -> tuple[Signal, ...]:
    """The reply's observations as active signals, deduplicated by id; raises InvalidScanReply."""
    data = json_array(text, most=MAX_OBSERVATIONS, items="observations", error=InvalidScanReply)
    signals: dict[str, Signal] = {}
    for index, item in enumerate(data, 1):
        signal = _signal(item, f"observation {index}", source=source, known_refs=known_refs, scan_id=scan_id,
                         now=now)
        signals.setdefault(signal.id, signal)
    return tuple(signals.values())


def _signal(item: object, where: str, *, source: EvidenceSource, known_refs: Collection[str], scan_id: str,
            now: float) -> Signal:
    item = exact_keys(item, OBSERVATION_KEYS, where=where, error=InvalidScanReply)
    for key in _TEXT_KEYS:
        text_field(item, key, most=MAX_FIELD_CHARS, where=where, error=InvalidScanReply)
    confidence = item["confidence"]
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        raise InvalidScanReply(f"{where}: confidence must be a number from 0 to 1")
    if not isinstance(item["explicit"], bool):
        raise InvalidScanReply(f"{where}: explicit must be true or false")
    refs = item["evidence_refs"]
    if not isinstance(refs, list) or not refs or not all(isinstance(ref, str) for ref in refs):
        raise InvalidScanReply(f"{where}: evidence_refs must be a non-empty list of refs")
    unknown = [ref for ref in refs if ref not in known_refs]
    if unknown:
        shown = ", ".join(repr(ref[:80]) for ref in unknown[:3])
        raise InvalidScanReply(f"{where} cites refs that were not sent: {shown}")
    cited = tuple(sorted(set(refs)))
    return Signal(
        id=signal_id(source, item["observation"], cited), source=source, observation=item["observation"],
        evidence_type=item["evidence_type"], affected_area=item["affected_area"],
        desired_outcome=item["desired_outcome"], confidence=float(confidence), explicit=item["explicit"],
        evidence_refs=cited, state=SignalState.ACTIVE, scan_id=scan_id, created_at=now, updated_at=now)
