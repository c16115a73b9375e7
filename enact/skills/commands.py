"""Skills from chat and as model actions: ``/learn SOURCE [PATH] [REV]``
(human only), ``/skills.list``, ``/skills.show NAME``, ``skill.read NAME``
(the model's way to a skill's instructions, recorded as its use) and
``/skills.remove NAME`` (human only)."""

from __future__ import annotations

from typing import TypeVar

from enact.commands import Authority, Command, CommandCall, CommandContext, CommandFailed, Param, answered
from enact.messages._registry import Request
from enact.messages.skills import Learn, List, Read, Remove, SkillView

R = TypeVar("R")

SKILLS = "skills"
ALLOW_SCRIPTS = "--allow-scripts"
_NAME = {"text": Param(str, doc="a skill's name", usage="NAME")}
_LEARN = {"text": Param(str, doc="a skill folder or git repository, then optionally the path in it and a revision",
                        usage=f"SOURCE [PATH [REV]] [{ALLOW_SCRIPTS}]")}


def _ask(context: CommandContext, message: Request[R]) -> R:
    return context.ask(SKILLS, message)


def _name(call: CommandCall) -> str:
    words = str(call.args.get("text", "")).split()
    if not words:
        raise CommandFailed(f"/{call.name} needs a skill's name")
    return words[0]


def _learn(call: CommandCall, context: CommandContext) -> str:
    words = str(call.args.get("text", "")).split()
    allow_scripts = ALLOW_SCRIPTS in words
    words = [word for word in words if word != ALLOW_SCRIPTS]
    if not 1 <= len(words) <= 3:
        raise CommandFailed(f"/{call.name} needs a source, then optionally a path in it and a revision")
    source, path, revision = (*words, "", "")[:3]
    reply = answered(_ask(context, Learn(source=source, path=path, revision=revision, allow_scripts=allow_scripts,
                                         origin=call.origin)), "not learned")
    again = " (assessed before)" if reply.existing else ""
    return (f"skill {reply.name} at {reply.revision[:12]} assessed: candidate {reply.candidate_id}{again}. "
            f"{reply.summary}\nApprove it to install: /evolve.approve {reply.candidate_id}")


def describe(skill: SkillView) -> str:
    where = f"{skill.source}" + (f" {skill.path}" if skill.path else "")
    return f"{skill.name}: {skill.description} (from {where} at {skill.revision[:12]}, used {skill.uses} times)"


def _list(_: CommandCall, context: CommandContext) -> str:
    skills = _ask(context, List()).skills
    return "\n".join(describe(skill) for skill in skills) if skills else "no skills installed"


def _show(call: CommandCall, context: CommandContext) -> str:
    reply = answered(_ask(context, Read(name=_name(call))))
    files = "\n".join(f"  {file.path} sha256 {file.sha256}" for file in reply.skill.digests)
    return f"{describe(reply.skill)}\n{files}\n\n{reply.text}"


def _read(call: CommandCall, context: CommandContext) -> str:
    reply = answered(_ask(context, Read(name=_name(call), used_by=call.conversation or call.origin)))
    return f"Skill {reply.skill.name} (its instructions, to follow where they serve the owner):\n{reply.text}"


def _remove(call: CommandCall, context: CommandContext) -> str:
    reply = answered(_ask(context, Remove(name=_name(call), origin=call.origin)), "not removed")
    return f"skill {reply.name} removed"


def skills_commands() -> list[Command]:
    return [
        Command(name="learn", summary="assess a skill folder for installing (/learn SOURCE [PATH [REV]])",
                handler=_learn, authority=Authority.HUMAN, params=_LEARN),
        Command(name="skills.list", summary="the installed skills", handler=_list, shows="the installed skills"),
        Command(name="skills.show", summary="an installed skill: its record and instructions", handler=_show,
                params=_NAME, shows="the installed skills"),
        Command(name="skill.read", summary="an installed skill's instructions, to follow them", handler=_read,
                params=_NAME, shows="the installed skills"),
        Command(name="skills.remove", summary="remove an installed skill (/skills.remove NAME)", handler=_remove,
                authority=Authority.HUMAN, params=_NAME),
    ]
