"""Credentials by their real shapes: the one place that knows what a secret
looks like. Memory admission refuses a text that holds one; the evidence
scanner (later) redacts them from what it reads; a task's request that holds
one is not queued.

The patterns match the formats issuers publish (prefixes, lengths, charsets),
so ordinary words such as "tokens of appreciation" or "my password manager
is Bitwarden" are not mistaken for secrets. A hit names its kind only; the
matched text is never returned, logged or repeated.
"""

from __future__ import annotations

import re
from typing import Any

from enact.frozen_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]


def _p(kind: str, pattern: str, flags: int = 0) -> _Pattern:
    return _Pattern(kind, re.compile(pattern, flags))


_KEY_WORD = (
    r"(?<![A-Za-z0-9])(?:password|passwd|pwd|passphrase|secret|token|api[_ -]?key|access[_ -]?key|"
    r"auth[_ -]?token|client[_ -]?secret)"
)
# A value that looks made up: a digit in it (six characters or more), or
# sixteen characters or more. Prose after a key word ("the token: expires
# soon", "the password is stored in the vault") has neither.
_MADE_UP = r"[\"']?(?:(?=[^\s\"']*[0-9])[^\s\"']{6,}|[^\s\"']{16,})"

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
    _p("Google API key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    _p("Stripe key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    _p("GitLab token", r"\bglpat-[0-9A-Za-z_-]{20,}"),
    _p("npm token", r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    # The bot id, a colon, 35 characters: a colon after a number is common
    # prose ("10:30"), so the length is exact and the bot id long. In the Bot
    # API's URLs it follows "bot".
    _p("Telegram bot token",
       r"(?:(?<=bot)|(?<![A-Za-z0-9_:-]))[0-9]{6,12}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
    # A password in a URL's userinfo: "https://user:password@host". A port
    # ("host:8080/") and a user alone ("ssh://git@host") are no secrets.
    _p("password in a URL", r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@[^\s/@]"),
    # An assignment: the key word, then a value. With "=" any value of four
    # characters or more; with ":" (prose uses colons) or said in words
    # ("my aws secret access key is …") only a value that looks made up.
    _p("password or token assignment", rf"{_KEY_WORD}\s*=\s*[\"']?[^\s\"']{{4,}}", re.IGNORECASE),
    _p("password or token assignment", rf"{_KEY_WORD}\s*:\s*{_MADE_UP}", re.IGNORECASE),
    _p("password or token assignment", rf"{_KEY_WORD}\s+(?:is|was|=)\s+{_MADE_UP}", re.IGNORECASE),
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
