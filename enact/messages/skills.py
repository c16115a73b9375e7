"""The skills protocol (actor ``skills``): learning a skill into a candidate,
installing it on the owner's approval, the installed skills and their use.

``Learn`` reads and checks the skill folder at an exact revision and has a
model assess it: an improvement candidate (source ``skill``), nothing
installed. ``Install`` is the curator's, when the owner approves that
candidate; ``Remove`` is the owner's. Both need a human origin.
"""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import NotFound, Origin, Refused

_NAME = 64
_SOURCE = 4096


@request("skills.Learn", long_wait="skills.learn_timeout_s")
@dataclass(frozen=True, slots=True, kw_only=True)
class Learn(Request["Learned | Refused"]):
    source: str = field(metadata=limit(_SOURCE))
    """A local folder (an absolute path) or a git repository (a path or a URL)."""
    path: str = field(default="", metadata=limit(_SOURCE))
    """With a git repository: the skill's folder in it ("" for its root)."""
    revision: str = field(default="", metadata=limit(256))
    """With a git repository: a branch, tag or commit ("" for its HEAD)."""
    allow_scripts: bool = False
    origin: Origin = ""


@reply("skills.Learned")
@dataclass(frozen=True, slots=True, kw_only=True)
class Learned:
    candidate_id: str
    name: str
    revision: str
    summary: str
    """The assessment's verdict in a line."""
    existing: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FileDigest:
    path: str
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillView:
    name: str
    description: str
    source: str
    path: str
    revision: str
    digests: tuple[FileDigest, ...]
    """By path."""
    installed_at: float
    by: str
    uses: int = 0


@request("skills.List")
@dataclass(frozen=True, slots=True, kw_only=True)
class List(Request["Listing"]):
    pass


@reply("skills.Listing")
@dataclass(frozen=True, slots=True, kw_only=True)
class Listing:
    skills: tuple[SkillView, ...]


@request("skills.Read")
@dataclass(frozen=True, slots=True, kw_only=True)
class Read(Request["Body | NotFound"]):
    """A skill's instructions; ``used_by`` (a conversation or ``task:N``) records its use."""

    name: str = field(metadata=limit(_NAME))
    used_by: str = field(default="", metadata=limit(256))


@internal("skills.Used")
@dataclass(frozen=True, slots=True, kw_only=True)
class Used(Request["UseRecorded"]):
    """The runtime's model took up skills through its own skill tool (Claude
    Code's ``Skill``): recorded as a read is, for the installed ones among ``names``."""

    names: tuple[str, ...] = field(metadata=limit(64))
    used_by: str = field(default="", metadata=limit(256))


@reply("skills.UseRecorded")
@dataclass(frozen=True, slots=True, kw_only=True)
class UseRecorded:
    names: tuple[str, ...]
    """The installed skills whose use was recorded."""


@reply("skills.Body")
@dataclass(frozen=True, slots=True, kw_only=True)
class Body:
    skill: SkillView
    text: str


@request("skills.Remove")
@dataclass(frozen=True, slots=True, kw_only=True)
class Remove(Request["Removed | NotFound | Refused"]):
    name: str = field(metadata=limit(_NAME))
    origin: Origin = ""


@reply("skills.Removed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Removed:
    name: str


@internal("skills.Install")
@dataclass(frozen=True, slots=True, kw_only=True)
class Install(Request["Installed | NotFound | Refused"]):
    """The curator's, when the owner approves a skill candidate."""

    candidate_id: str = field(metadata=limit(_NAME))
    origin: Origin = ""


@reply("skills.Installed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Installed:
    skill: SkillView
    removed: bool = False
    """The candidate proposed removing the skill (it went unused, or failures
    followed its uses): approving it removed the skill."""


@internal("skills.Startup")
@dataclass(frozen=True, slots=True, kw_only=True)
class Startup(Request["StartupText"]):
    """What a new session is told of the installed skills."""


@reply("skills.StartupText")
@dataclass(frozen=True, slots=True, kw_only=True)
class StartupText:
    text: str


@internal("skills.ReviewUse")
@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewUse(Request["UseReviewed"]):
    """Review the installed skills' use now, as the skills actor does on its
    clock: a skill unused too long, or whose last uses were each followed by
    a failure, is offered to the curator as a removal candidate."""


@reply("skills.UseReviewed")
@dataclass(frozen=True, slots=True, kw_only=True)
class UseReviewed:
    candidate_ids: tuple[str, ...]
    """The removal candidates offered now (none: nothing new)."""


@internal("skills.Place")
@dataclass(frozen=True, slots=True, kw_only=True)
class Place(Request["Placed"]):
    """A task's worker, before a call of a runtime that reads skills
    natively: the installed skills, copied to ``directory/under``."""

    directory: str = field(metadata=limit(_SOURCE))
    under: str = field(metadata=limit(256))


@reply("skills.Placed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Placed:
    names: tuple[str, ...]


@internal("skills.Withdraw")
@dataclass(frozen=True, slots=True, kw_only=True)
class Withdraw(Request["Withdrawn"]):
    """After that call: the skills placed removed again, so they are no part of the task's change."""

    directory: str = field(metadata=limit(_SOURCE))
    under: str = field(metadata=limit(256))
    names: tuple[str, ...]


@reply("skills.Withdrawn")
@dataclass(frozen=True, slots=True, kw_only=True)
class Withdrawn:
    pass


__all__ = ["Body", "FileDigest", "Install", "Installed", "Learn", "Learned", "List", "Listing", "NotFound", "Place",
           "Placed", "Read", "Refused", "Remove", "Removed", "ReviewUse", "SkillView", "Startup", "StartupText",
           "UseReviewed", "Withdraw", "Withdrawn"]
