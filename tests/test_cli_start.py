"""A command run in its own process loads only the protocols it speaks.

Each protocol module it imports costs it start-up time (a message type is a
dataclass, about half a millisecond to create), so a check for another
protocol's reply is made by the reply's wire name, and what a protocol's
records need only in one rule (the credential patterns, OpenSSL's hashes) is
loaded by that rule.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import DaemonFactory, enact_env

_RUN_AND_LIST = """
import sys
from enact.cli import main
try:
    main(sys.argv[1:])  # arguments given: run here, never handed to a command server
except SystemExit:
    pass
print("loaded:", *sorted(sys.modules))
"""


def _loaded_by(daemons: DaemonFactory, *args: str) -> set[str]:
    daemon = daemons.start()
    done = subprocess.run([sys.executable, "-c", _RUN_AND_LIST, *args], env=enact_env(daemon.home),
                          capture_output=True, text=True, timeout=60)
    [listed] = [line for line in done.stdout.splitlines() if line.startswith("loaded: ")]
    return set(listed.split()[1:])


def test_send_loads_neither_the_control_nor_the_epoch_protocol(daemons: DaemonFactory) -> None:
    loaded = _loaded_by(daemons, "send", "hello")
    assert {"enact.messages.local", "enact.messages.inbox"} <= loaded  # it did send, and read the outcome
    assert not loaded & {"enact.messages.control", "enact.messages.epoch", "hashlib"}


def test_status_reads_the_task_leases_without_the_credential_patterns(daemons: DaemonFactory) -> None:
    loaded = _loaded_by(daemons, "status")
    assert {"enact.messages.control", "enact.messages.tasks"} <= loaded
    assert "enact.credentials" not in loaded
