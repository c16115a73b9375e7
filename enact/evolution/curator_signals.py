"""What the curator asks and tells the scanner about a candidate's signals:
read them, link them to the candidate that draws on them, and settle them
(resolved when it is adopted, dismissed when it is removed). A scanner that
does not answer never fails the curator's step: the link is repaired on the
next proposal, a read says why it came back empty. Each is a step of effects
(``enact.evolution.curator_effects``)."""

from __future__ import annotations

import logging

from enact.evolution.candidates import Candidate
from enact.evolution.curator_effects import Steps, Unanswered, ask_or_unanswered, tell
from enact.evolution.signals import Signal, SignalState

log = logging.getLogger(__name__)

SCANNER = "scanner"


def signals_of(candidate: Candidate) -> Steps[tuple[list[Signal], str]]:
    """The candidate's signals, and why there are none when the scanner did not answer."""
    if not candidate.draft.evidence_ids:
        return [], ""
    from enact.messages.scanner import SignalList, Signals

    reply = yield from ask_or_unanswered(SCANNER, Signals(ids=candidate.draft.evidence_ids))
    if isinstance(reply, Unanswered):
        return [], f"the scanner did not answer: {reply.reason}"
    return (list(reply.signals) if isinstance(reply, SignalList) else []), ""


def link_signals(candidate_id: str, signal_ids: tuple[str, ...]) -> Steps[bool]:
    """Whether the scanner linked them (else a later proposal repairs the link)."""
    from enact.messages.scanner import LinkSignals

    reply = yield from ask_or_unanswered(SCANNER, LinkSignals(signal_ids=signal_ids, candidate_id=candidate_id))
    if isinstance(reply, Unanswered):
        log.warning("signals %s stay unlinked from %s: %s (repaired on the next proposal)",
                    ", ".join(signal_ids), candidate_id, reply.reason)
        return False
    return True


def set_signals(candidate: Candidate, state: SignalState) -> Steps[None]:
    """Tell the scanner the candidate's signals are ``state`` now (resolved, dismissed)."""
    from enact.messages.scanner import SetSignalState

    if candidate.draft.evidence_ids:
        unanswered = yield from tell(SCANNER, SetSignalState(signal_ids=candidate.draft.evidence_ids, state=state))
        if unanswered is not None:
            log.warning("signals of %s %s not marked %s: %s", candidate.state.value, candidate.id, state,
                        unanswered.reason)
