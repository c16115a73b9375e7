"""The canary a new release's daemon must pass before it keeps the home:
every actor running, ``enact runtime check``, and one turn through the
inbox on a conversation of its own (``update-canary``), each through the
new release's own CLI.

The turn is a message to the runtime when it is the scripted one (offline,
free); with a model runtime, the ``/status`` command, which goes the same
way through the inbox, a conversation and the outbox but spends no tokens
(``runtime check`` looked at the runtime)."""

from __future__ import annotations

import json
from pathlib import Path

from enact.messages.control import StatusReport
from enact.update.daemons import last_line, run_enact
from enact.update.releases import Release

CONVERSATION = "update-canary"
CANARY_TIMEOUT_S = 120.0


def canary(release: Release, home: Path, report: StatusReport, *, adapter: str) -> str:
    """"" when the daemon of ``release`` passes; else one line why not."""
    stopped = [actor.name for actor in report.actors if not actor.alive]  # the full status: any release says them
    if stopped:
        return f"the canary failed: actors not running: {', '.join(stopped)}"
    checked = run_enact(release, home, "runtime", "check", "--json", timeout=CANARY_TIMEOUT_S)
    if checked.returncode != 0:
        try:
            problems = "; ".join(json.loads(checked.stdout)["problems"])
        except (ValueError, KeyError, TypeError):
            problems = last_line(checked)
        return f"the canary failed: runtime check: {problems}"
    text = "update canary: are you there?" if adapter == "scripted" else "/status"
    sent = run_enact(release, home, "send", "--conversation", CONVERSATION, "--json", text, timeout=CANARY_TIMEOUT_S)
    if sent.returncode != 0:
        return f"the canary failed: its turn on {CONVERSATION}: {last_line(sent)}"
    return ""


