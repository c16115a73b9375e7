"""What the curator asks and tells the scanner about a candidate's signals:
read them, link them to the candidate that draws on them, and settle them
(resolved when it is adopted, dismissed when it is removed). A scanner that
does not answer never fails the curator's step: the link is repaired on the
next proposal, a read says why it came back empty."""

from __future__ import annotations

import logging

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.evolution.candidates import Candidate
from enact.evolution.signals import Signal, SignalState

log = logging.getLogger(__name__)

SCANNER = "scanner"


def signals_of(context: ActorContext, candidate: Candidate) -> tuple[list[Signal], str]:
    """The candidate's signals, and why there are none when the scanner did not answer."""
    if not candidate.draft.evidence_ids:
        return [], ""
    from enact.messages.scanner import SignalList, Signals

    try:
        reply = context.ask(SCANNER, Signals(ids=candidate.draft.evidence_ids))
    except ActorUnavailable as error:
        return [], f"the scanner did not answer: {error}"
    return (list(reply.signals) if isinstance(reply, SignalList) else []), ""


def link_signals(context: ActorContext, candidate_id: str, signal_ids: tuple[str, ...]) -> bool:
    """Whether the scanner linked them (else a later proposal repairs the link)."""
    from enact.messages.scanner import LinkSignals

    try:
        context.ask(SCANNER, LinkSignals(signal_ids=signal_ids, candidate_id=candidate_id))
    except ActorUnavailable as error:
        log.warning("signals %s stay unlinked from %s: %s (repaired on the next proposal)",
                    ", ".join(signal_ids), candidate_id, error)
        return False
    return True


def set_signals(context: ActorContext, candidate: Candidate, state: SignalState) -> None:
    """Tell the scanner the candidate's signals are ``state`` now (resolved, dismissed)."""
    from enact.messages.scanner import SetSignalState

    if candidate.draft.evidence_ids:
        try:
            context.tell(SCANNER, SetSignalState(signal_ids=candidate.draft.evidence_ids, state=state))
        except ActorUnavailable as error:
            log.warning("signals of %s %s not marked %s: %s", candidate.state.value, candidate.id, state, error)
