"""The environment that points the real Claude Code CLI at a ModelServer."""

from __future__ import annotations

from pathlib import Path


def claude_env(home: Path, base_url: str, *, key: str = "sk-ant-test") -> dict[str, str]:
    """Claude Code's variables with ``home`` (made here) as its own, so the
    owner's Claude config is never read or written, nor a login of theirs used."""
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": key, "ANTHROPIC_AUTH_TOKEN": "", "CLAUDE_CODE_OAUTH_TOKEN": "",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
