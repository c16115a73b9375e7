"""The OpenAI-compatible endpoint as a component: its settings
(``runtime.openai``), its environment check and ``enact runtime check openai``.

Every CLI command imports this module to learn the components' commands, so
the adapter (``enact.runtime.openai``: http.client, ssl, its wire format) is
imported only by the methods that make or check the runtime."""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING

from enact.components import ComponentError, RuntimeCheck, RuntimeComponent
from enact.config import Check, Config, Setting, between
from enact.frozen_dataclass import dataclass

if TYPE_CHECKING:
    from enact.commands import CommandRegistry
    from enact.runtime.openai import OpenAIRuntime

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"
"""A local Ollama's OpenAI-compatible endpoint."""


def _is_http_url(value: str) -> bool:
    parsed = urllib.parse.urlsplit(value)
    return parsed.scheme in ("http", "https") and bool(parsed.hostname)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAISettings:
    base_url: str
    api_key: str
    model: str
    history_chars: int

    @classmethod
    def from_config(cls, config: Config) -> OpenAISettings:
        values = config.values
        return cls(base_url=values["runtime.openai.base_url"], api_key=values["runtime.openai.api_key"],
                   model=values["runtime.openai.model"], history_chars=values["runtime.openai.history_chars"])


class OpenAIRuntimeComponent(RuntimeComponent):
    """The chat-completions runtime as a component."""

    name = "openai"
    sections = ("runtime",)
    settings = (
        Setting("runtime.openai.base_url", str, DEFAULT_BASE_URL,
                "Base URL of the OpenAI-compatible endpoint (default: a local Ollama)",
                Check("an http(s) URL", _is_http_url), env="ENACT_OPENAI_BASE_URL"),
        Setting("runtime.openai.api_key", str, "",
                "Bearer key for the endpoint; local servers need none. From the environment only, "
                "shown as set or unset", env="ENACT_OPENAI_API_KEY", secret=True),
        Setting("runtime.openai.model", str, "", "Model the endpoint runs (e.g. llama3.2)",
                env="ENACT_OPENAI_MODEL"),
        Setting("runtime.openai.history_chars", int, 60_000,
                "Characters of a session's message history sent with each call (the startup context is kept)",
                between(1000, 10_000_000)),
    )

    def validate_environment(self, settings: Config) -> None:
        if not settings.typed(OpenAISettings).model:
            raise ComponentError("runtime.openai.model is not set: name the endpoint's model "
                                 "(ENACT_OPENAI_MODEL=llama3.2, for instance)")

    def make_runtime(self, settings: Config, commands: CommandRegistry | None) -> OpenAIRuntime:
        from enact.runtime.openai import OpenAIRuntime

        own = settings.typed(OpenAISettings)
        return OpenAIRuntime(own.base_url, model=own.model, api_key=own.api_key, history_chars=own.history_chars)

    def check(self, settings: Config) -> RuntimeCheck:
        from enact.runtime.openai import check_endpoint

        own = settings.typed(OpenAISettings)
        return check_endpoint(own.base_url, api_key=own.api_key, model=own.model)
