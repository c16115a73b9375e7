"""What a skill folder must be before anything of it is assessed or installed.

A skill is a folder holding ``SKILL.md``: front matter between two ``---``
lines with at least ``name`` and ``description``, then the instructions
(the format Claude Code and Codex read). The front matter is read as plain
``key: value`` lines, which is all the two required keys need; a YAML
library would add a dependency and far more syntax (anchors, tags,
documents) to a parser that sees untrusted text, for no key we use.

The folder arrives as ``SkillFiles`` (``enact.skills.sources``), already
read without following anything out of it; here it is checked whole: a
valid name and description, the size and file count within the limits, no
executable file unless the owner allowed scripts. Every problem is named,
not only the first.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.skills.settings import SkillLimits

SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
"""A skill's name: a slug, as its folder's name and a command argument."""
MAX_DESCRIPTION = 1024
_FENCE = "---"


class SkillRefused(EnactError):
    """The skill is not taken; the message names every reason, one a line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillFiles:
    """A skill folder's content: its files by relative path (``/``-separated)."""

    files: Mapping[str, bytes]
    executables: frozenset[str] = frozenset()
    problems: tuple[str, ...] = ()
    """What reading found wrong (a link out, a special file), for ``checked``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """A checked skill: what its ``SKILL.md`` says and its files' digests."""

    name: str
    description: str
    body: str
    """The instructions after the front matter."""
    files: Mapping[str, bytes]
    digests: Mapping[str, str]
    """sha256 of each file, by path."""


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """The ``key: value`` pairs between the opening and closing ``---`` and the
    text after them. A value may be quoted; a line that is not ``key: value``
    (a list item, a comment) is skipped. No front matter: ({}, text)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != _FENCE:
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == _FENCE)
    except StopIteration:
        return {}, text
    pairs: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if not sep or line[:1].isspace() or not key.strip() or key.lstrip().startswith("#"):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        pairs.setdefault(key.strip(), value)
    return pairs, "\n".join(lines[end + 1:]).lstrip("\n")


def checked(folder: SkillFiles, limits: SkillLimits, *, allow_scripts: bool = False) -> Skill:
    """The skill, or SkillRefused naming everything wrong with the folder."""
    problems = list(folder.problems)
    if len(folder.files) > limits.max_files:
        problems.append(f"it holds {len(folder.files)} files; at most {limits.max_files}")
    total = sum(len(data) for data in folder.files.values())
    if total > limits.max_bytes:
        problems.append(f"it holds {total} bytes; at most {limits.max_bytes}")
    problems += [f"{path} is {len(data)} bytes; at most {limits.max_file_bytes} a file"
                 for path, data in sorted(folder.files.items()) if len(data) > limits.max_file_bytes]
    if folder.executables and not allow_scripts:
        problems += [f"{path} is executable (pass --allow-scripts to accept it)" for path in sorted(folder.executables)]
    manifest = folder.files.get(SKILL_FILE)
    pairs: dict[str, str] = {}
    body = ""
    if manifest is None:
        problems.append(f"it has no {SKILL_FILE}")
    else:
        try:
            pairs, body = front_matter(manifest.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(f"{SKILL_FILE} is not UTF-8 text")
        else:
            problems += _manifest_problems(pairs)
    if problems:
        raise SkillRefused("\n".join(problems))
    return Skill(name=pairs["name"], description=" ".join(pairs["description"].split()), body=body,
                 files=dict(folder.files),
                 digests={path: hashlib.sha256(data).hexdigest() for path, data in folder.files.items()})


def _manifest_problems(pairs: Mapping[str, str]) -> list[str]:
    problems = []
    name = pairs.get("name", "")
    if not NAME.match(name):
        problems.append(f"{SKILL_FILE} needs a name of lowercase letters, digits and dashes "
                        f"(at most 64), not {name[:80]!r}")
    description = pairs.get("description", "").strip()
    if not description:
        problems.append(f"{SKILL_FILE} needs a description")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"{SKILL_FILE}'s description is {len(description)} characters; at most {MAX_DESCRIPTION}")
    return problems


def revision_of(files: Mapping[str, bytes]) -> str:
    """A content revision for a folder that is not a git tree: its files' digest."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return "sha256:" + digest.hexdigest()[:16]
