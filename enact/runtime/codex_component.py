"""The Codex CLI as a component: its settings (``runtime.codex``), its
environment check and ``enact runtime check codex``.

Every CLI command imports this module to learn the components' commands, so
the adapter (``enact.runtime.codex``: its subprocess plumbing) is
imported only by the methods that make or check the runtime."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from enact.components import ComponentError, RuntimeCheck, RuntimeComponent
from enact.config import Check, Config, Setting
from enact.frozen_dataclass import dataclass

if TYPE_CHECKING:
    from enact.commands import CommandRegistry
    from enact.runtime.codex import CodexRuntime

EFFORTS = ("minimal", "low", "medium", "high", "xhigh")


@dataclass(frozen=True, slots=True, kw_only=True)
class CodexSettings:
    executable: str
    model: str
    reasoning_effort: str

    @classmethod
    def from_config(cls, config: Config) -> CodexSettings:
        values = config.values
        return cls(executable=values["runtime.codex.executable"], model=values["runtime.codex.model"],
                   reasoning_effort=values["runtime.codex.reasoning_effort"])


class CodexRuntimeComponent(RuntimeComponent):
    """The Codex CLI, selected by ``runtime.adapter = "codex"``."""

    name = "codex"
    sections = ("runtime",)
    settings = (
        Setting("runtime.codex.executable", str, "", "Path of the codex CLI (default: codex on PATH)",
                env="ENACT_CODEX_BIN"),
        Setting("runtime.codex.model", str, "", "Model codex is asked for (default: its own configuration's)",
                env="ENACT_CODEX_MODEL"),
        Setting("runtime.codex.reasoning_effort", str, "", "Reasoning effort codex is asked for (default: its own)",
                Check(f"empty or one of {', '.join(EFFORTS)}", lambda value: value in ("", *EFFORTS)),
                env="ENACT_CODEX_REASONING_EFFORT"),
    )

    def validate_environment(self, settings: Config) -> None:
        """An explicit executable that is not there stops the daemon at start;
        codex missing from PATH does not (each call then tells the owner
        what to install, and ``enact runtime check`` says so too)."""
        from enact.runtime import RuntimeUnavailable
        from enact.runtime.codex import find_executable

        explicit = settings.typed(CodexSettings).executable
        if explicit:
            try:
                find_executable(explicit, where=_where(settings))
            except RuntimeUnavailable as error:
                raise ComponentError(str(error)) from None

    def make_runtime(self, settings: Config, commands: CommandRegistry | None) -> CodexRuntime:
        from enact.runtime.codex import CodexRuntime, find_executable

        own, where = settings.typed(CodexSettings), _where(settings)
        return CodexRuntime(
            lambda: find_executable(own.executable, where=where),
            model=own.model,
            reasoning_effort=own.reasoning_effort,
            default_cwd=settings.home,
            # Where its conversations run (enact.tasks.confined_calls's default), named so skills are placed there.
            conversation_dir=settings.home / "conversation",
        )

    def check(self, settings: Config) -> RuntimeCheck:
        from enact.runtime import RuntimeFailure, RuntimeUnavailable
        from enact.runtime._codex_provider import readiness
        from enact.runtime.codex import INSTALL_HINT, find_executable, home_under_temp

        runtime = self.make_runtime(settings, None)
        try:
            found = find_executable(settings.typed(CodexSettings).executable, where=_where(settings))
        except RuntimeUnavailable as error:
            return RuntimeCheck(problems=(str(error),))
        try:
            version = runtime.version()
        except RuntimeFailure as error:
            return RuntimeCheck(found=found, problems=(f"{error}; reinstall it ({INSTALL_HINT})",))
        home = runtime.totals.codex_home
        notes = [f"CODEX_HOME {home}"]
        if home_under_temp(home, os.environ):
            notes.append("CODEX_HOME is under the temporary directory, where Codex will not set up its shell "
                         "tool's sandbox helper: enact gives each call a TMPDIR of its own, outside it")
        try:
            ready = readiness(home, os.environ, logged_in=runtime.logged_in)
        except RuntimeFailure as error:
            return RuntimeCheck(found=found, version=version, notes=tuple(notes),
                                problems=(f"`codex login status` failed: {error}",))
        return RuntimeCheck(found=found, version=version, notes=(*notes, *ready.notes), problems=ready.problems)


def _where(settings: Config) -> str:
    from enact.runtime._executable import named_where

    return named_where(settings, "runtime.codex.executable", "ENACT_CODEX_BIN")
