"""``/evolve.mode [disabled|co-evolve|auto-evolve]`` in chat, through the
command registry. Showing is harmless, but the command sets the mode too, so
it needs a human (``Authority.HUMAN``): a model action is refused, and from
chat it needs the conversation lock."""

from __future__ import annotations

import time

from enact.commands import Authority, Command, CommandCall, CommandContext, Param, answered
from enact.messages.curator import GetMode, SetMode
from enact.messages.evolve import GetClock


def _when(moment: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(moment)) if moment is not None else "never"


def _mode(call: CommandCall, context: CommandContext) -> str:
    text = str(call.args.get("text", "")).strip()
    if text:
        reply = answered(context.ask("curator", SetMode(mode=text, origin=call.origin)))
        return f"evolve mode: {reply.mode} (was {reply.previous})"
    shown = context.ask("curator", GetMode())
    clock = context.ask("evolve", GetClock())  # the clock's one home
    return (f"evolve mode: {shown.mode}; schedule {clock.schedule}, next due {_when(clock.next_due_at)}, "
            f"last run {_when(clock.last_run_at)}")


def mode_commands() -> list[Command]:
    return [
        Command(name="evolve.mode", summary="show or set the evolve mode (disabled, co-evolve, auto-evolve)",
                handler=_mode, authority=Authority.HUMAN,
                params={"text": Param(str, required=False, doc="the new mode; none: show it", usage="MODE")}),
    ]
