"""The daemon's commands: the registry of every component's commands and the
owner's programs, and a command the owner runs from a shell."""

from __future__ import annotations

import uuid
from pathlib import Path

from enact.command_journal import JournaledCommands
from enact.commands import CommandCall, CommandRegistry
from enact.components import Components
from enact.fence import Fence
from enact.home import COMMANDS_NAME
from enact.messages.commands import Receipt, Run
from enact.messages.common import HUMAN_CLI
from enact.programs import RUN_DIR as PROGRAMS_RUN_DIR
from enact.programs import ProgramSource


def daemon_commands(home: Path, installed: Components) -> CommandRegistry:
    """Every component's chat commands, and the owner's programs watched in
    the home's commands file; raises CommandsFileError for a file that cannot
    be read."""
    commands = CommandRegistry()
    for command in installed.chat_commands(commands):
        commands.register(command)
    commands.watch(ProgramSource(home / COMMANDS_NAME, run_dir=home / PROGRAMS_RUN_DIR))
    return commands


def run_command(journaled: JournaledCommands, fence: Fence, message: Run) -> Receipt:
    """``enact call commands.Run``: the owner at a shell runs a command,
    journaled under its request id like any other effect."""
    call = CommandCall(
        name=message.name,
        args=message.args,
        origin=HUMAN_CLI,
        event_origin=HUMAN_CLI,
        owners=True,  # the owner at a shell
        cancel=fence.token.child(),
        request_id=f"commands.Run:{message.request_id}" if message.request_id else "",
    )
    request_id = call.request_id or f"commands.Run:{uuid.uuid4().hex}"
    return journaled.once(call, request_id=request_id, subject=message.name, resumed=bool(message.request_id))
