"""The Claude Code CLI as a component: its settings (``runtime.claude``),
where its executable is, and ``enact runtime check claude``.

Every CLI command imports this module to learn the components' commands, so
the adapter (``enact.runtime.claude``: its subprocess plumbing) is
imported only by the methods that make or check the runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enact.components import ComponentError, RuntimeCheck, RuntimeComponent
from enact.config import Config, Setting
from enact.frozen_dataclass import dataclass

if TYPE_CHECKING:
    from enact.commands import CommandRegistry
    from enact.runtime.claude import ClaudeRuntime

INSTALL_HINT = "install it (npm install -g @anthropic-ai/claude-code) or set ENACT_CLAUDE_BIN to its path"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudeSettings:
    executable: str
    model: str

    @classmethod
    def from_config(cls, config: Config) -> ClaudeSettings:
        return cls(executable=config.values["runtime.claude.executable"], model=config.values["runtime.claude.model"])


def find_executable(settings: Config) -> str:
    """``runtime.claude.executable`` (``ENACT_CLAUDE_BIN``) if set, which must
    exist, else ``claude`` on PATH; raises ComponentError saying what to do."""
    from enact.runtime import RuntimeUnavailable
    from enact.runtime._executable import find_executable as find_program
    from enact.runtime._executable import named_where

    key = "runtime.claude.executable"
    try:
        return find_program(settings.typed(ClaudeSettings).executable, program="claude",
                            where=named_where(settings, key, "ENACT_CLAUDE_BIN"),
                            not_on_path=f"the claude CLI is not on PATH: {INSTALL_HINT}")
    except RuntimeUnavailable as error:
        raise ComponentError(str(error)) from None


class ClaudeRuntimeComponent(RuntimeComponent):
    """The Claude Code CLI as a component."""

    name = "claude"
    sections = ("runtime",)
    settings = (
        Setting("runtime.claude.executable", str, "", "The claude CLI (default: claude on PATH)",
                env="ENACT_CLAUDE_BIN"),
        Setting("runtime.claude.model", str, "", "Model Claude Code uses (default: its own choice)",
                env="ENACT_CLAUDE_MODEL"),
    )

    def validate_environment(self, settings: Config) -> None:
        find_executable(settings)

    def make_runtime(self, settings: Config, commands: CommandRegistry | None) -> ClaudeRuntime:
        from enact.runtime.claude import ClaudeRuntime

        return ClaudeRuntime(find_executable(settings), model=settings.typed(ClaudeSettings).model,
                             conversation_dir=settings.home / "claude")

    def check(self, settings: Config) -> RuntimeCheck:
        from enact.runtime import RuntimeFailure
        from enact.runtime.claude import login_state, version_of

        try:
            found = find_executable(settings)
            version = version_of(found)
        except ComponentError as error:
            return RuntimeCheck(problems=(str(error),))
        except RuntimeFailure as error:
            return RuntimeCheck(found=found, problems=(f"{error}; reinstall it ({INSTALL_HINT})",))
        logged_in, how = login_state(found)
        if logged_in is False:
            return RuntimeCheck(found=found, version=version, problems=(
                "Claude Code is not logged in and has no key: run `claude auth login`, or set ANTHROPIC_API_KEY "
                "in the daemon's environment",))
        notes = (f"login: {how}",) if logged_in else (f"login unknown: {how}; --probe tells",)
        return RuntimeCheck(found=found, version=version, notes=notes)
