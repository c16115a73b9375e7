"""The ``enact`` command line.

Every command is a click command of the group in ``_group``. Started from a
shell, a command is first handed to the daemon's command server
(``_handoff``): a warm process with click and every message type loaded runs
it in a fork of itself, on this process's standard streams, directory and
environment, while this process waits for its exit code and passes signals
on. Python's start-up and those imports cost more than the 60 ms a command
may take before it talks to the daemon; the hand-off costs an interpreter
and a connect. Without a command server (no daemon running, another version
of enact, ``ENACT_COMMAND_SERVER=off``, or ``daemon`` commands, which must
be processes of their own) the command runs here."""

from __future__ import annotations

import sys


def main(args: list[str] | None = None, prog_name: str = "enact") -> None:
    if args is None and sys.argv[1:] == ["--version"]:  # what click's version option prints, without click
        from enact import __version__

        print(f"{prog_name}, version {__version__}")
        return
    if args is None:
        from enact.cli._handoff import run_in_command_server

        code = run_in_command_server(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    from enact.cli._group import main as group

    group(args=args, prog_name=prog_name)


__all__ = ["main"]
