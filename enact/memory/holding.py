"""Holding: which admitted facts wait for the owner's confirmation.

Memory is the owner's. Every fact an active one reaches every new session,
the owner's included, so only the owner's word writes one at once. A fact is
held (pending, never sent to a model) when:

- it says what the agent may do (approve, land or merge, skip reviews or
  confirmations, act without asking, change its mode, ignore the owner,
  grant itself permissions), whoever sent it but the owner's CLI: a chat
  message may be a stranger's or a forwarded one, and a model's word may be
  anyone's it read;
- its sender gives a reason (a marker from a conversation that is not the
  owner's, or one repeating an action's receipt: ``Remember.hold``);
- it is a model's and ``memory.confirm_model_facts`` is set (the Memory
  actor's reason).

The rules here only hold; what is refused outright (credentials,
instructions to the agent) is admission's (``enact.memory.admission``).
"""

from __future__ import annotations

import functools
import re

from enact.memory.facts import HUMAN_CLI_ORIGIN

MODEL_FACTS_HELD = "memory.confirm_model_facts holds a model's facts"

# What an agent's permission is made of. Each names what the text tries, for
# the notice. They read the text as a rule for the agent, so that facts about
# the owner's own habits ("the owner prefers reviews in the morning", "the
# owner merges on Fridays", "the owner never skips code reviews") pass.
_OWNER_SAY = r"(?:ask(?:ing)?|check(?:ing)? with|consult(?:ing)?|tell(?:ing)?|confirm(?:ing|ation)?|approval|" \
             r"review|permission|sign-?off|the owner(?:'s)? (?:ok|say|consent))"
_GATED = r"(?:approv\w*|land\w*|merg\w*|push\w*|deploy\w*|releas\w*|ship\w*|delet\w*|remov\w*|commit\w*|" \
         r"run\w*|execut\w*|install\w*|publish\w*|cancel\w*|clos\w*|accept\w*|reviews?)"
_AGENT = r"(?:you|the agent|the assistant|the bot|enact|the model)"
_GRANT_PATTERNS = (
    ("to act without the owner's say",
     rf"\bwithout\s+(?:first\s+)?(?:the owner'?s?\s+|my\s+|his\s+|her\s+|their\s+|any\s+|a\s+|an\s+)?{_OWNER_SAY}"
     r"|\b(?:no need|not necessary|never necessary|unnecessary)\s+to\s+(?:ask|check|confirm|wait)"
     r"|\b(?:do not|don't|never|no longer|stop)\s+(?:ask(?:ing)?|check(?:ing)? with|wait(?:ing)? for|"
     r"consult(?:ing)?)\s+(?:the owner|me|for\b|first|before)"),
    ("to skip reviews or confirmations",
     r"\b(?:skip(?:ping)?|bypass(?:ing)?|waive|omit|disable|turn off|no more|dispense with)\s+(?:the\s+|all\s+|"
     r"any\s+|its\s+|your\s+)?(?:\w+\s+)?(?:reviews?|confirmations?|approvals?|sign-?offs?|checks?|"
     r"doctor|tests?)\b"
     r"|\b(?:reviews?|confirmations?|approvals?)\s+(?:are|is)\s+(?:not needed|unnecessary|optional|not required)"),
    ("to approve, land or merge on its own",
     r"^\s*(?:please\s+)?(?:always\s+|just\s+|simply\s+|automatically\s+|go ahead and\s+)?"
     r"(?:approve|land|merge|push|deploy|release|ship|publish)\b"
     r"|\bauto-?(?:approv|land|merg|deploy|accept)\w*"
     r"|\b(?:approve|land|merge)s?\s+(?:its|your|their)\s+own\b"
     r"|\bself-?approv\w*"
     rf"|\b{_AGENT}\s+(?:may|can|could|should|must|is allowed to|are allowed to|is free to|are free to|"
     rf"is permitted to|are permitted to|has permission to|have permission to)\s+(?:always\s+)?{_GATED}"
     rf"|\b(?:wants?|lets?|allows?|permits?|authori[sz]es?|trusts?)\s+{_AGENT}\s+(?:to\s+)?(?:always\s+)?{_GATED}"),
    ("to change its mode",
     r"\b(?:switch|change|set|put|turn|move)\s+(?:to\s+|into\s+)?(?:your|its|the agent'?s|enact'?s|the evolve|"
     r"the evolution|evolve|evolution)\s+(?:\w+\s+)?mode\b"
     r"|\b(?:autonomous|unattended|yolo|full[- ]access|unrestricted|auto-evolve)\s+mode\b"
     r"|\bauto-evolve\b"
     r"|\b(?:your|its|the agent'?s|enact'?s|evolve|evolution)\s+mode\s+(?:is|to|=|should be)\s+\S"),
    ("to ignore the owner",
     r"\b(?:ignore|disregard|override|overrule|do not listen to|don't listen to|never listen to)\s+"
     r"(?:what\s+)?(?:the owner|me|my)\b"),
    ("to grant itself permissions",
     r"\b(?:grant|give)s?\s+(?:yourself|itself|himself|the agent|the assistant|you|enact)\s+(?:\w+\s+){0,2}?"
     r"(?:permissions?|access|rights|authority|privileges|root|admin|sudo)\b"
     rf"|\b{_AGENT}\s+(?:has|have|is granted|are granted|holds?)\s+(?:\w+\s+){{0,2}}?"
     r"(?:permission|authority|privileges|root access|admin rights|sudo)\b"
     r"|\b(?:elevate|escalate|raise)\s+(?:your|its)\s+(?:own\s+)?(?:privileges|permissions|access|authority)"),
)


@functools.cache
def _grants() -> tuple[re.Pattern[str], tuple[tuple[str, re.Pattern[str]], ...]]:
    """All of the grants as one pattern, and each with what it tries: compiled
    when a fact is first judged, not by every daemon's start (about 10 ms)."""
    grants = tuple((why, re.compile(pattern, re.IGNORECASE)) for why, pattern in _GRANT_PATTERNS)
    return re.compile("|".join(f"(?:{pattern})" for _, pattern in _GRANT_PATTERNS), re.IGNORECASE), grants


def grants_permission(text: str) -> str | None:
    """What a text tells the agent it may do ("to skip reviews or
    confirmations"), or None for a fact about the world."""
    any_grant, grants = _grants()
    if not any_grant.search(text):
        return None
    for why, pattern in grants:
        if pattern.search(text):
            return why
    return None


def hold_reason(text: str, origin: str, *, asked: str) -> str | None:
    """Why an admitted fact waits for the owner (one line, never the text), or
    None when it may be active. ``asked`` is the sender's or the config's
    reason to hold it ("" for none)."""
    if origin != HUMAN_CLI_ORIGIN:
        grant = grants_permission(text)
        if grant is not None:
            return f"it says what the agent may do ({grant}); only the owner's CLI makes such a fact active"
    return asked or None
