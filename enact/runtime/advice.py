"""What the owner is told, in the chat reply, when the runtime cannot answer
for a reason only the owner can fix (a login, a missing binary)."""

from __future__ import annotations

from enact.runtime import RuntimeFailure

LOGIN_HINTS = {
    "codex": "log Codex in (`codex login`), or give the model provider in its config.toml a valid key",
}
"""How to fix a refused login, per adapter; others get the general advice."""


def owner_advice(failure: RuntimeFailure, *, adapter: str) -> str:
    """The reply for an ``auth`` or ``unavailable`` failure."""
    if failure.kind == "auth":
        fix = LOGIN_HINTS.get(adapter, "check the runtime's login or API key")
        return (f"I could not answer: the {adapter} runtime was refused by its model ({failure}). "
                f"To fix it, {fix}; `enact runtime check --probe` tests it. Then send your message again.")
    return (f"I could not answer: the {adapter} runtime is not available ({failure}). "
            "`enact runtime check` shows what is missing. Then send your message again.")
