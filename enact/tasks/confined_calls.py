"""Conversation calls of an agentic runtime (Codex, Claude Code), confined
like a task's.

A call with no working directory of its own (a chat turn, a task drafted
from chat, an evolution scan) would otherwise run the CLI, and the commands
its model asks for, in the daemon's working directory with the daemon's
whole environment: a command could print the daemon's tokens or read the
LMDB environment. Here such a call runs in a directory of its own (the
runtime's ``Capabilities.conversation_dir``, else ``$ENACT_HOME/conversation``), shown
read-only, under the same bwrap confinement as a task (``$ENACT_HOME``
masked, no capabilities, own namespaces, a private /tmp) with the
allow-listed environment of ``enact.environment``. Unlike a task's,
the runtime's state directories are its real ones, writable: a
conversation's session lives on from call to call (the CLI's own sandbox
keeps its commands from writing there: read-only for Codex, no shell nor
edit tools for Claude Code).

A call with a working directory (a task's, confined by its worker) passes
through as it is. ``tasks.confinement`` rules here too: ``off`` runs the
call unconfined (in its own directory, with the allow-listed environment),
``required`` refuses a call it cannot confine (NotConfinable, a
RuntimeUnavailable that tells the owner how to fix it).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from enact.config import Config
from enact.runtime import Runtime, RuntimeRequest, RuntimeResult, RuntimeUnavailable, RuntimeWrapper
from enact.tasks.confine import (
    Confinement,
    ConfinementUnavailable,
    bwrap_prefix,
    find_bwrap,
    hidden_credentials,
    settled,
    tools_under_tmp,
    tried,
)
from enact.tasks.settings import TasksSettings

if TYPE_CHECKING:
    from enact.commands import CommandRegistry
    from enact.components import Components


class NotConfinable(RuntimeUnavailable):
    """``tasks.confinement = "required"`` and the call cannot be confined."""

    fix = ("make bwrap able to confine here (install bubblewrap; allow user namespaces), or set "
           "tasks.confinement to auto to let such calls run unconfined")


def confines_calls(runtime: Runtime) -> bool:
    """Agentic runtimes: those with state directories of a CLI whose model
    runs commands (the scripted and HTTP runtimes run none in a conversation)."""
    return bool(runtime.capabilities.state_dirs)


class ConfinedCalls(RuntimeWrapper):
    """``runtime`` with its calls that have no working directory confined."""

    def __init__(self, runtime: Runtime, settings: Config) -> None:
        super().__init__(runtime)
        self._home = settings.home
        self._settings = settings.typed(TasksSettings)

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        if request.cwd is not None or request.confine:
            return self.runtime.invoke(request)
        settings, capabilities = self._settings, self.runtime.capabilities
        workdir = capabilities.conversation_dir or self._home / "conversation"
        with call_confinement(settings.confinement, home=self._home, workdir=workdir,
                              programs=capabilities.program_dirs,
                              shared=capabilities.state_dirs, readable=request.images,
                              passthrough=settings.env_passthrough) as confined:
            return self.runtime.invoke(dataclasses.replace(request, cwd=workdir, confine=confined.prefix,
                                                           env=confined.env))


@contextmanager
def call_confinement(mode: str, *, home: Path, workdir: Path, programs: Sequence[Path] = (),
                     shared: Sequence[Path] = (), readable: Sequence[Path] = (),
                     passthrough: Sequence[str] = ()) -> Iterator[Confinement]:
    """One conversation call's confinement (see the module doc); its private
    /tmp is removed afterwards."""
    workdir.mkdir(parents=True, exist_ok=True)
    for path in shared:  # bwrap binds only what exists; the CLI's first call would make it
        path.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="enact-call-"))
    tmp = root / "tmp"
    (tmp / "home").mkdir(parents=True)
    try:
        bwrap = find_bwrap() if mode != "off" else None
        reason = "tasks.confinement is off" if mode == "off" else "bwrap is not installed"
        prefix: tuple[str, ...] = ()
        if bwrap is not None:
            prefix = bwrap_prefix(bwrap, worktree=workdir, private_tmp=tmp, hidden=(home.resolve(),),
                                  tools=tools_under_tmp(programs=programs), credentials=hidden_credentials(),
                                  read_only_worktree=True, shared=shared, readable=readable)
            reason = tried(prefix, workdir)
        try:
            confined = settled(mode, prefix, reason, tmp=tmp, passthrough=passthrough)
        except ConfinementUnavailable as refused:  # said as a runtime that cannot run, with its fix
            raise NotConfinable(str(refused)) from None
        yield confined
    finally:
        shutil.rmtree(root, ignore_errors=True)


def build_runtime(installed: Components, settings: Config, commands: CommandRegistry | None = None) -> Runtime:
    """The runtime ``runtime.adapter`` names, made by its component (the
    daemon's, a Ray node's); raises RulesError (or another ValueError) for
    a runtime that cannot be made. An agentic runtime's calls outside a
    task are confined (``ConfinedCalls``)."""
    runtime = installed.runtime(settings).make_runtime(settings, commands)
    return ConfinedCalls(runtime, settings) if confines_calls(runtime) else runtime
