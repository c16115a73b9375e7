"""``/update`` in the owner's chat: starts the updater, which outlives the
daemon that starts it, and answers at once; the updater tells this
conversation how the attempt ended."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from enact.commands import Authority, Command, CommandCall, CommandContext
from enact.one_cpu import unpinned
from enact.update.history import updates_dir


def update_commands() -> Sequence[Command]:
    return [Command(name="update", summary="update enact to the head of its branch; rolled back if it does not hold",
                    handler=start_update, authority=Authority.HUMAN)]


def start_update(call: CommandCall, context: CommandContext) -> str:
    home = context.fence.home
    directory = updates_dir(home)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "enact", "update", "--home", str(home), "--origin", call.origin]
    if call.conversation:
        argv += ["--notify", call.conversation]
    log_path = directory / "from-chat.log"
    with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log, unpinned():
        # Its own session: the daemon it replaces stops, the updater goes on.
        process = subprocess.Popen(argv, cwd=home, env=_own_enact_first(), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=log, start_new_session=True)
    # Waited for, so an updater that ends while this daemon goes on serving
    # (refused, rolled back) is reaped at once instead of staying a zombie.
    threading.Thread(target=process.wait, name=f"updater-{process.pid}", daemon=True).start()
    return (f"Update started (pid {process.pid}): I will tell you here how it ends. "
            "`enact update history` lists every attempt.")


def _own_enact_first() -> dict[str, str]:
    """This environment, with the daemon's own enact first on the path: the
    updater is the serving release's, even when the interpreter would import
    another enact from elsewhere (a daemon run from a checkout in its own
    working directory)."""
    import enact

    source = str(Path(enact.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{path}" if path else source}
