"""What an improvement candidate may not touch.

Some scope stays with the owner however good the evidence: who the agent is
and what it is for, credentials, permissions, merging, deploying, and the
daemon's own authority (approval, the evolve mode). A candidate whose title
or proposed change reaches into that scope, or that is destructive, rejects
the whole synthesis batch: one bad proposal says the batch was not made
with the limits in mind (a lineage scan refuses only that change).

Merging is the owner's as an act on their branches: the agent merging (or
landing, or pushing) work into main, merging on its own, automatically or
without a review. The word alone is not: merging duplicate facts, or
taking in a parent's merge commit, is ordinary work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

HUMAN_CONTROLLED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (area, re.compile(pattern, re.IGNORECASE)) for area, pattern in (
        ("identity", r"\b(identity|persona|personality|system prompt|who (enact|the agent|it) is)\b"),
        ("mission", r"\b(mission|purpose statement|core goals?)\b"),
        ("credentials", r"\b(credentials?|secrets?|passwords?|api[ -]?keys?|access tokens?|auth tokens?"
                        r"|ssh keys?|private keys?)\b"),
        ("permissions", r"\b(permissions?|authori[sz]ation|allow[ -]?list|allowed_conversations|sandbox(ing)?"
                        r"|confinement|full-access|sudo|root access)\b"),
        ("merging", r"\b(auto[- ]?merg\w*|auto[- ]?land\w*"
                    r"|merg(e|es|ing)\b[^.;\n]{0,40}\b(into|onto) (the )?(main|master|trunk|default branch"
                    r"|owner'?s branch)"
                    r"|merg(e|es|ing)\b[^.;\n]{0,40}\b(automatically|by itself|on (its|their) own"
                    r"|without (a |the )?(human|owner|review|approval))"
                    r"|merg(e|es|ing) (its|their) own|land(s|ing)? (its|the|a) (own )?reviews?"
                    r"|push(es|ing)? to main)\b"),
        ("deploying", r"\b(deploy(s|ed|ing|ment)?|releas(e|es|ing) to production|ship(s|ping)? to production)\b"),
        ("the daemon's own authority", r"\b(approv(e|es|ing|al) (itself|its own|candidates?|proposals?)"
                                       r"|self-approv\w*|bypass(es|ing)? (the )?(owner|human|approval)"
                                       r"|evolve mode|auto-evolve|human authority|epoch fence)\b"),
    )
)

DESTRUCTIVE = re.compile(
    r"\b(delet(e|es|ing)|drop(s|ping)?|wip(e|es|ing)|eras(e|es|ing)|purg(e|es|ing)|truncat(e|es|ing)"
    r"|destroy(s|ing)?|rm -rf|force[- ]push(es|ing)?|reset --hard)\b"
    r"[^.;\n]{0,40}\b(all|every|history|histor(y|ies)|database|databases|data|records?|logs?|repositor(y|ies)"
    r"|branch(es)?|memory|memories|facts|tests?|backups?|files?|turns?|tasks?|reviews?)\b",
    re.IGNORECASE,
)

SCOPE_FIELDS = ("title", "proposed_change")
"""What a candidate would change; its rationale may quote the evidence
(which can mention anything), so it is not judged."""


def refusal(fields: Mapping[str, str]) -> str:
    """Why these candidate fields are out of bounds, or ""."""
    for name in SCOPE_FIELDS:
        text = fields.get(name, "")
        for area, pattern in HUMAN_CONTROLLED:
            found = pattern.search(text)
            if found:
                return f"its {name.replace('_', ' ')} touches {area} ({found.group(0)!r}), which stays " \
                       "human-controlled"
        found = DESTRUCTIVE.search(text)
        if found:
            return f"its {name.replace('_', ' ')} is destructive ({found.group(0)!r})"
    return ""
