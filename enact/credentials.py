"""Credentials by their real shapes: the one place that knows what a secret
looks like. Memory admission refuses a text that holds one; the evidence
scanner (later) redacts them from what it reads.

The patterns match the formats issuers publish (prefixes, lengths, charsets),
so ordinary words such as "tokens of appreciation" or "my password manager
is Bitwarden" are not mistaken for secrets. A hit names its kind only; the
matched text is never returned, logged or repeated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]


def _p(kind: str, pattern: str, flags: int = 0) -> _Pattern:
    return _Pattern(kind, re.compile(pattern, flags))


_KEY_WORD = (
    r"(?<![A-Za-z0-9])(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|access[_-]?key|"
    r"auth[_-]?token|client[_-]?secret)"
)

# Order matters only for which kind is named when two overlap: the more
# specific shapes come first.
_PATTERNS = (
    _p("private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    _p("GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    _p("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{36,}"),
    _p("Anthropic API key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    _p("OpenAI-style API key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    _p("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    _p("AWS access key id", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
    _p("JWT", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    # An assignment: the key word, then a value. With "=" any value of four
    # characters or more; with ":" (prose uses colons) only a value that looks
    # made up (a digit in it, or 16 characters or more), so "the
    # token: expires soon" and "password manager: Bitwarden" pass.
    _p("password or token assignment", rf"{_KEY_WORD}\s*=\s*[\"']?[^\s\"']{{4,}}", re.IGNORECASE),
    _p(
        "password or token assignment",
        rf"{_KEY_WORD}\s*:\s*[\"']?(?:(?=[^\s\"']*[0-9])[^\s\"']{{6,}}|[^\s\"']{{16,}})",
        re.IGNORECASE,
    ),
)

REDACTED = "[redacted credential]"


def find_credential(text: str) -> str | None:
    """The kind of the first credential in ``text`` ("GitHub token", …), or
    None. Never the credential itself."""
    for pattern in _PATTERNS:
        if pattern.regex.search(text):
            return pattern.kind
    return None


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``[redacted credential]``."""
    for pattern in _PATTERNS:
        text = pattern.regex.sub(REDACTED, text)
    return text


def redact_json(value: Any) -> Any:
    """A JSON-like value (an action's args) with every string in it redacted,
    keys included: what is recorded or shown back of a model's action."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(key)): redact_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(item) for item in value]
    return value
