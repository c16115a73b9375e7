"""Where a home keeps its files. ``$ENACT_HOME`` defaults to
``$XDG_STATE_HOME/enact``, else ``~/.local/state/enact``.

Light on purpose (no pathlib at import): the command line's hand-off to the
command server finds the home before it may import anything heavier."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing itself costs a start-up several milliseconds
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

SOCKET_NAME = "control.sock"
CLI_SOCKET_NAME = "cli.sock"
"""The command server's socket: commands from the command line run there, warm."""
LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
CONFIG_NAME = "config.toml"
COMMANDS_NAME = "commands.toml"
SCRIPTED_RULES_NAME = "scripted.toml"
STATE_DIR = "state"
WORKTREES_DIR = "worktrees"


def home_directory(environ: Mapping[str, str] = os.environ) -> str:
    """The default home as a path string, with ``~`` expanded."""
    if environ.get("ENACT_HOME"):
        return os.path.expanduser(environ["ENACT_HOME"])
    state = environ.get("XDG_STATE_HOME")
    base = os.path.expanduser(state) if state else os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "enact")


def default_home(environ: Mapping[str, str] = os.environ) -> Path:
    from pathlib import Path

    return Path(home_directory(environ))
