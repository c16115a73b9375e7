"""Skill folders in a git repository made by a test: a good one, and ones
with a link out, an executable or an oversized file."""

from __future__ import annotations

import os
from pathlib import Path

import task_repos

GOOD = "---\nname: tidy-notes\ndescription: Keep the owner's notes tidy and dated.\n---\n\n" \
       "# Tidy notes\nDate every note; merge duplicates.\n"


def git(repo: Path, *args: str) -> str:
    return task_repos.git(repo, *args).strip()


def skill_repo(path: Path) -> Path:
    """A repository whose ``skills/`` holds ``good``, ``link-out``, ``script`` and ``big``."""
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "-b", "main")
    for name in ("good", "link-out", "script", "big"):
        folder = path / "skills" / name
        folder.mkdir(parents=True)
        text = GOOD if name == "good" else GOOD.replace("tidy-notes", name)
        (folder / "SKILL.md").write_text(text)
        (folder / "reference.md").write_text("More about it.\n")
    (path / "skills" / "good" / "alias.md").symlink_to("reference.md")
    (path / "skills" / "link-out" / "secrets").symlink_to("../../../outside.txt")
    run = path / "skills" / "script" / "run.sh"
    run.write_text("#!/bin/sh\necho hi\n")
    os.chmod(run, 0o755)
    (path / "skills" / "big" / "blob.txt").write_text("x" * 300_000)
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "skills")
    return path
