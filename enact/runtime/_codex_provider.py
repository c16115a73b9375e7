"""Whether the Codex CLI can reach a model, found out without a model call:
which provider its ``config.toml`` selects, and for that provider a login,
a key or an address that answers.

Measured with Codex 0.169: with its built-in ``openai`` provider and no
login, ``codex exec`` sends its requests without a key (``OPENAI_API_KEY``
in the environment is not used; ``CODEX_API_KEY`` is) and retries for
seconds before it fails; ``OPENAI_BASE_URL`` is ignored, the top-level
``openai_base_url`` key is read; a provider named in ``model_provider`` that
is neither defined nor one of its own stops it at once ("Model provider `x`
not found"), and its own ``ollama`` waits for ``localhost``.
"""

from __future__ import annotations

import socket
import tomllib
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from enact.frozen_dataclass import dataclass

DEFAULT_PROVIDER = "openai"
API_KEY_VARIABLE = "CODEX_API_KEY"
"""The key ``codex exec`` sends to its built-in provider when it has no login."""
GUIDE = "docs/runtimes.md"
NO_WAY_TO_A_MODEL = (f"codex has no login and no provider configured; run `codex login` or configure a provider "
                     f"(see {GUIDE})")
CONNECT_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Readiness:
    problems: tuple[str, ...] = ()
    """Each one line saying what to do; none: codex has a way to a model."""
    notes: tuple[str, ...] = ()


def readiness(codex_home: Path, environ: Mapping[str, str], *, logged_in: Callable[[], bool]) -> Readiness:
    """What stands between the Codex CLI and a model. ``logged_in`` asks
    the CLI itself (``codex login status``); it is asked only when the
    built-in provider would need the login."""
    config_path = codex_home / "config.toml"
    try:
        config = tomllib.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    except (OSError, UnicodeError, tomllib.TOMLDecodeError) as error:
        return Readiness(problems=(f"{config_path} cannot be read as TOML: {error}",))
    name = _selected_provider(config)
    providers = config.get("model_providers")
    defined = providers.get(name) if isinstance(providers, dict) else None
    if isinstance(defined, dict):
        return _configured(name, defined, config_path, environ)
    if name != DEFAULT_PROVIDER:
        return Readiness(notes=(f"model provider {name!r} is not defined in {config_path}: codex's own of that "
                                "name is used if it has one; --probe tells whether it answers",))
    notes = []
    base_url = config.get("openai_base_url")
    if isinstance(base_url, str) and base_url:
        problem = _unreachable(base_url, f"openai_base_url in {config_path}")
        if problem:
            return Readiness(problems=(problem,))
        notes.append(f"model provider {DEFAULT_PROVIDER!r} at {base_url}")
    if environ.get(API_KEY_VARIABLE):
        return Readiness(notes=(*notes, f"key: {API_KEY_VARIABLE} from the environment"))
    if logged_in():
        return Readiness(notes=(*notes, "login: `codex login status` says logged in"))
    if notes:  # a local OpenAI-compatible server may need no key
        return Readiness(notes=(*notes, "no login and no key: the provider must accept calls without one"))
    return Readiness(problems=(NO_WAY_TO_A_MODEL,))


def _selected_provider(config: Mapping[str, Any]) -> str:
    """The provider codex uses: the selected profile's, else the top level's, else its default."""
    profile_name = config.get("profile")
    profiles = config.get("profiles")
    if isinstance(profile_name, str) and isinstance(profiles, dict):
        profile = profiles.get(profile_name)
        if isinstance(profile, dict) and isinstance(profile.get("model_provider"), str):
            return str(profile["model_provider"])
    name = config.get("model_provider")
    return name if isinstance(name, str) and name else DEFAULT_PROVIDER


def _configured(name: str, provider: Mapping[str, Any], config_path: Path, environ: Mapping[str, str]) -> Readiness:
    """A provider the owner defined: its key variable must be set, its address must answer."""
    where = f"[model_providers.{name}] in {config_path}"
    base_url = provider.get("base_url")
    if not isinstance(base_url, str) or not base_url:
        return Readiness(problems=(f"{where} has no base_url: set the provider's address (see {GUIDE})",))
    env_key = provider.get("env_key")
    if isinstance(env_key, str) and env_key and not environ.get(env_key):
        return Readiness(problems=(f"{where} reads its key from {env_key}, which is not set in the daemon's "
                                   "environment: set it there",))
    problem = _unreachable(base_url, f"the base_url of {where}")
    if problem:
        return Readiness(problems=(problem,))
    return Readiness(notes=(f"model provider {name!r} at {base_url}",))


def _unreachable(base_url: str, named_by: str) -> str:
    """A problem line if nothing accepts a connection at ``base_url``; "" if something does."""
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return f"{base_url} ({named_by}) is not an http(s) address"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=CONNECT_TIMEOUT_S):
            return ""
    except OSError as error:
        return f"cannot reach {base_url} ({named_by}): {error.strerror or error}; start the server or fix the address"
