"""The environment of what runs for a task or a conversation: an allow-list.

The daemon's environment holds its owner's secrets (model keys, tokens of
other services), and whatever a task's commands see, the model steering
them can print. So a command gets only what a process needs to run
(``RUN_NEEDS``), its private HOME and TMPDIR, and what the owner lists in
``tasks.env_passthrough``. A runtime's CLI gets, besides, what its component
declares it needs to reach its model (``cli_needs``), and keeps that from
the commands it runs where the CLI can (see the runtimes). ``ENACT_*`` is
never passed: a repository's tests must not find the daemon's home.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

RUN_NEEDS = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "USER", "LOGNAME")
"""What a process needs to run, none of it a secret."""


def allowed(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches one of ``patterns`` (exact names or globs
    such as ``LC_*``); ``ENACT_*`` never does."""
    return not name.startswith("ENACT_") and any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def passed(environ: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
    listed = tuple(patterns)
    return {name: value for name, value in environ.items() if allowed(name, listed)}


def task_environment(*, tmp: Path | None, home: Path | None, passthrough: Iterable[str] = (),
                     environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of a task's commands (the doctor's, a scripted rule's,
    what a CLI runs): ``RUN_NEEDS`` and ``passthrough`` from ``environ``,
    with TMPDIR and HOME the task's private ones (as seen where it runs)."""
    env = passed(environ, (*RUN_NEEDS, *passthrough))
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    if home is not None:
        env["HOME"] = str(home)
    return env


def cli_environment(commands_env: Mapping[str, str], needs: Iterable[str],
                    environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of a runtime's CLI: its commands' one, the owner's
    real HOME (where the CLI finds its login and configuration) and what the
    CLI declared it ``needs`` to reach its model."""
    env = dict(commands_env)
    if "HOME" in environ:
        env["HOME"] = environ["HOME"]
    env.update(passed(environ, needs))
    return env
