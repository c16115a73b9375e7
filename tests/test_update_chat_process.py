"""The updater ``/update`` starts is the daemon's child: when it ends while the
daemon goes on serving (a refused or rolled-back update), it is reaped at once,
not left a zombie until the daemon exits."""

from __future__ import annotations

from pathlib import Path

from enact.cancellation import CancellationToken
from enact.commands import CommandCall, CommandContext
from enact.messages.common import HUMAN_CLI
from enact.update.commands import start_update

from conftest import wait_for


class _FenceOf:
    def __init__(self, home: Path) -> None:
        self.home = home

    def is_current(self) -> bool:
        return True


def test_an_updater_that_ends_while_the_daemon_serves_is_reaped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[update]\nno_such_setting = 1\n")  # the updater refuses it at once
    context = CommandContext(fence=_FenceOf(home), status=lambda: "")  # type: ignore[arg-type]
    call = CommandCall(name="update", args={}, origin=HUMAN_CLI, event_origin=HUMAN_CLI, owners=True,
                       cancel=CancellationToken(), conversation="local:owner")
    reply = start_update(call, context)
    pid = int(reply.removeprefix("Update started (pid ").split(")", 1)[0])
    # Gone from the process table: ended and waited for (a zombie keeps its /proc entry).
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), what="the ended updater reaped")
    assert (home / "updates" / "from-chat.log").stat().st_size > 0  # it ran, and said why it stopped
