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


_LOAD_COMPONENTS_AND_LIST = """
import sys
from enact import components
components.load()
print("loaded:", *sorted(sys.modules))
"""

RUNS_ONLY_IN_THE_DAEMON = {
    # the adapters, and what they call their runtime with
    "enact.runtime.scripted", "enact.runtime.codex", "enact.runtime.claude", "enact.runtime.openai",
    "enact.runtime._subprocess", "sh", "asyncio", "http.client", "ssl",
    # the channels, and the protocols they speak to the inbox and the sessions
    "enact.channels.local", "enact.channels.telegram", "enact.channels.telegram_api",
    "enact.messages.inbox", "enact.messages.sessions",
    # the features' rules
    "enact.memory.context", "enact.memory.facts", "enact.evolution.curation", "enact.tasks.records",
    # what only reading a config file, or a failure, needs
    "tomllib", "logging",
}
"""What loading the components must not import: every CLI command loads
them to learn its commands, and pays for each module before it talks to the
daemon (with ``sh`` and the adapters it was three times main's start-up)."""


def test_loading_the_components_imports_their_declarations_only() -> None:
    done = subprocess.run([sys.executable, "-c", _LOAD_COMPONENTS_AND_LIST], capture_output=True, text=True,
                          timeout=60, check=True)
    [listed] = [line for line in done.stdout.splitlines() if line.startswith("loaded: ")]
    loaded = set(listed.split()[1:])
    declared = {"enact.core", "enact.chat.component", "enact.channels.local_component",
                "enact.channels.telegram_component", "enact.runtime.codex_component", "enact.runtime.openai_component"}
    assert declared <= loaded  # it did load them
    assert not loaded & RUNS_ONLY_IN_THE_DAEMON
