"""What the owner is told, in the chat reply, when the runtime cannot answer
for a reason only the owner can fix (a login, a missing binary, an endpoint
that is down)."""

from __future__ import annotations

from enact.runtime import RuntimeFailure

LOGIN_HINTS = {
    "codex": "log Codex in (`codex login`), or give the model provider in its config.toml a valid key",
    "claude": "log Claude Code in (`claude auth login`), or set ANTHROPIC_API_KEY in the daemon's environment",
    "openai": "set ENACT_OPENAI_API_KEY (runtime.openai.api_key) to a key the endpoint accepts",
}
"""How to fix a refused login, per adapter; others get the general advice."""

UNAVAILABLE_HINTS = {
    "codex": "install Codex (npm install -g @openai/codex) or set ENACT_CODEX_BIN to its path",
    "claude": "install Claude Code (npm install -g @anthropic-ai/claude-code) or set ENACT_CLAUDE_BIN to its path; "
              "if it is installed, check that it reaches its API (ANTHROPIC_BASE_URL, the network)",
    "openai": "start the endpoint (`ollama serve` for a local Ollama) or set ENACT_OPENAI_BASE_URL "
              "(runtime.openai.base_url) to one that answers",
}
"""How to make a runtime that cannot be reached available, per adapter."""


def owner_advice(failure: RuntimeFailure, *, adapter: str) -> str:
    """The reply for an ``auth`` or ``unavailable`` failure."""
    if failure.kind == "auth":
        fix = LOGIN_HINTS.get(adapter, "check the runtime's login or API key")
        return (f"I could not answer: the {adapter} runtime was refused by its model ({failure}). "
                f"To fix it, {fix}; `enact runtime check --probe` tests it. Then send your message again.")
    # A failure may know its own fix better than the adapter's general hint.
    hint = getattr(failure, "fix", None) or UNAVAILABLE_HINTS.get(adapter)
    how = f"To fix it, {hint}; `enact runtime check`" if hint else "`enact runtime check`"
    return (f"I could not answer: the {adapter} runtime is not available ({failure}). "
            f"{how} shows what is missing. Then send your message again.")
