"""The scripted runtime as a component: its settings (``scripted``), the
check of its rules file and how to build it.

Every CLI command imports this module to learn the components' commands, so
the runtime (``enact.runtime.scripted``: its rules, its subprocesses) is
imported only by the method that makes it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from enact.components import ComponentError, RuntimeComponent
from enact.config import Config, Setting
from enact.frozen_dataclass import dataclass
from enact.home import SCRIPTED_RULES_NAME

if TYPE_CHECKING:
    from enact.commands import CommandRegistry
    from enact.runtime.scripted import ScriptedRuntime


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedSettings:
    rules: str
    """As written; empty: ``<home>/scripted.toml``."""
    transcript: str

    @classmethod
    def from_config(cls, config: Config) -> ScriptedSettings:
        return cls(rules=config.values["scripted.rules"], transcript=config.values["scripted.transcript"])


class ScriptedRuntimeComponent(RuntimeComponent):
    """The scripted runtime as a component: its settings and how to build it."""

    name = "scripted"
    settings = (
        Setting("scripted.rules", str, "", "Rules file of the scripted runtime (default: <home>/scripted.toml)",
                env="ENACT_SCRIPTED_RULES"),
        Setting("scripted.transcript", str, "", "A JSON-lines file the scripted runtime appends every call to"),
    )

    def validate_environment(self, settings: Config) -> None:
        """A rules file named in the configuration must exist (the default
        ``<home>/scripted.toml`` may be absent)."""
        from enact.home_guard import HomeRefused, check_owned_file

        rules = settings.typed(ScriptedSettings).rules
        if rules and not Path(rules).expanduser().is_file():
            raise ComponentError(f"scripted.rules ({settings.sources['scripted.rules']}): {rules} does not exist")
        try:  # its rules run commands: the same rule as the home's config.toml
            check_owned_file(Path(rules).expanduser() if rules else settings.home / SCRIPTED_RULES_NAME)
        except HomeRefused as error:
            raise ComponentError(str(error)) from None

    def make_runtime(self, settings: Config, commands: CommandRegistry | None) -> ScriptedRuntime:
        """Raises RulesError for a rules file that does not parse."""
        from enact.runtime.scripted import ScriptedRuntime

        own = settings.typed(ScriptedSettings)
        rules, transcript = own.rules, own.transcript
        return ScriptedRuntime(
            Path(rules).expanduser() if rules else settings.home / SCRIPTED_RULES_NAME,
            transcript=Path(transcript).expanduser() if transcript else None,
            known_commands=commands.names if commands is not None else None,
        )
