"""What a backup leaves out unless asked for secrets: a file a secret
setting is read from (the Telegram token file), and every line of
``config.toml`` that holds something credential-shaped (``enact.credentials``)
or sets a secret setting. The copied configuration stays valid TOML."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable

from enact.config import Config, Setting
from enact.credentials import find_credential
from enact.frozen_dataclass import dataclass

_SECTION = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+\s*(?:#.*)?$")
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z0-9_.\"'-]+)\s*=")


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    left_out: list[str]
    """One line per value left out: its key and why, never the value."""


def secret_keys(settings: Iterable[Setting]) -> frozenset[str]:
    return frozenset(setting.key for setting in settings if setting.secret)


def secret_files(config: Config) -> dict[str, str]:
    """The files secret settings are read from, by the key naming each
    (only those set)."""
    keys = (setting.read_from for setting in config.settings if setting.secret and setting.read_from)
    return {key: str(config.values.get(key) or "") for key in keys if config.values.get(key)}


def redact_config(text: str, secrets: frozenset[str]) -> Redacted:
    """``text`` with each credential-shaped or secret line made a comment
    saying what was left out. A value that spans lines cannot be cut line by
    line: when what is left does not parse, the whole file is left out."""
    section = ""
    lines: list[str] = []
    left_out: list[str] = []
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).replace('"', "").replace("'", "")
        assignment = _ASSIGNMENT.match(line)
        key = ""
        if assignment is not None:
            name = assignment.group(1).replace('"', "").replace("'", "")
            key = f"{section}.{name}" if section else name
        kind = find_credential(line)
        if kind is None and key not in secrets:
            lines.append(line)
            continue
        why = "a secret setting" if kind is None else f"credential-shaped ({kind})"
        where = key or f"line {len(lines) + 1}"
        left_out.append(f"config.toml: {where}: {why}")
        lines.append(f"# {where}: left out of this backup ({why}; enact backup create --include-secrets keeps it)")
    redacted = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
    if left_out:
        try:
            tomllib.loads(redacted)
        except tomllib.TOMLDecodeError:
            return Redacted(text="# config.toml was left out of this backup: it holds a credential in a value "
                                 "that spans lines\n", left_out=["config.toml: the whole file (a credential in a "
                                                                  "value that spans lines)"])
    return Redacted(text=redacted, left_out=left_out)
