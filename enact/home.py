"""Where a home keeps its files. ``$ENACT_HOME`` defaults to
``$XDG_STATE_HOME/enact``, else ``~/.local/state/enact``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SOCKET_NAME = "control.sock"
LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
CONFIG_NAME = "config.toml"
COMMANDS_NAME = "commands.toml"
SCRIPTED_RULES_NAME = "scripted.toml"
STATE_DIR = "state"


def default_home(environ: Mapping[str, str] = os.environ) -> Path:
    if environ.get("ENACT_HOME"):
        return Path(environ["ENACT_HOME"]).expanduser()
    state = environ.get("XDG_STATE_HOME")
    base = Path(state).expanduser() if state else Path.home() / ".local" / "state"
    return base / "enact"
