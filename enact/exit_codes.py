"""The exit codes of every ``enact`` command and of the daemon's process.

Declared once, with what each means, because a script branches on them and
the CLI reference (``docs/reference/cli.md``, written by ``enact.reference``)
is generated from this table. The command line's names for them
(``EXIT_USAGE`` ...) and the daemon's (``EXIT_REFUSED`` ...) are these."""

from __future__ import annotations

import enum
from collections.abc import Mapping


class ExitCode(enum.IntEnum):
    DONE = 0
    FAILED = 1
    USAGE = 2
    NOT_RUNNING = 3
    TIMED_OUT = 4
    INTERRUPTED = 130


MEANINGS: Mapping[ExitCode, str] = {
    ExitCode.DONE: "done: the command did what it was asked (`daemon run`: the daemon stopped as asked)",
    ExitCode.FAILED: (
        "failed: the command ran but the outcome is not what was asked (a failed or undelivered event, a daemon "
        "error, a connection lost before the answer, a `busy` refusal: the same request may work later); "
        "`daemon run`: a fatal error stopped the daemon"
    ),
    ExitCode.USAGE: (
        "bad input, a refusal or nothing found: nothing changed (click's own usage errors too); "
        "`daemon run` and `daemon start`: the daemon refused to start (a bad configuration, a home another "
        "daemon owns), saying why in one line"
    ),
    ExitCode.NOT_RUNNING: "no daemon runs on the home (`daemon status`: it is not running)",
    ExitCode.TIMED_OUT: "a wait's `--timeout` passed first (`task watch`); what it waited for goes on",
    ExitCode.INTERRUPTED: (
        "interrupted (Ctrl-C) before the command started; a running command that is interrupted says `Aborted!` "
        "and exits 1 (`daemon run` stops in order instead), and one killed by another signal ends by that signal "
        "(a shell shows 128 + its number)"
    ),
}
"""What each code means, in the words of the CLI reference."""
