"""What a hostile task plants in its worktree to have the host run its
commands: a ``.git`` file pointing at a git directory it made, whose config
defines a filter, a diff driver's textconv and an fsmonitor command, and a
post-commit hook, with a ``.gitattributes`` that applies them to every file.
Each command touches ``MARKER``: the tests assert it never exists."""

from __future__ import annotations

import sys

import orjson

PLANT = r'''
import os, pathlib, shutil, subprocess, sys
marker = sys.argv[1]
here = pathlib.Path.cwd()
planted = here / ".planted-git"
own = ["git", f"--git-dir={planted}", f"--work-tree={here}"]
subprocess.run(["git", "init", "-q", "--bare", str(planted)], check=True)
subprocess.run([*own, "config", "core.bare", "false"], check=True)
# Its index tracks the files, then each is rewritten as it was, a little
# later: git can no longer tell from size and time that it is unchanged,
# so it cleans it, through the filter, to compare.
subprocess.run([*own, "add", "-A", "--", ".", ":!.planted-git"], check=True)
for tracked in subprocess.run([*own, "ls-files", "-z"], capture_output=True, text=True,
                              check=True).stdout.split("\0"):
    path = here / tracked
    if tracked and path.is_file():
        path.write_bytes(path.read_bytes())
        later = path.stat().st_mtime + 10
        os.utime(path, (later, later))
ran = f"touch {marker}"
with open(planted / "config", "a") as config:
    # Quoted: a ';' would start a comment in a git config file.
    config.write(f"[core]\n\tfsmonitor = \"{ran}\"\n"
                 f"[filter \"planted\"]\n\tclean = \"sh -c '{ran}; cat'\"\n\tsmudge = \"sh -c '{ran}; cat'\"\n"
                 f"[diff \"planted\"]\n\ttextconv = \"sh -c '{ran}; cat \\\"$1\\\"' -\"\n")
hook = planted / "hooks" / "post-commit"
hook.write_text(f"#!/bin/sh\n{ran}\n")
hook.chmod(0o755)
dot_git = here / ".git"
if dot_git.is_dir():
    shutil.rmtree(dot_git)
else:
    dot_git.unlink()
dot_git.write_text(f"gitdir: {planted}\n")
(here / ".gitattributes").write_text("* filter=planted diff=planted\n")
with open(here / "lib.py", "a") as lib:
    lib.write("# changed\n")
'''


def plant_argv(marker: str, python: str = sys.executable) -> list[str]:
    """The command that plants it in the current directory (and changes lib.py)."""
    return [python, "-c", PLANT, marker]


def plant_rule(match: str, marker: str, *, python: str = sys.executable) -> str:
    """A scripted runtime rule (``tests.test_task_workers.task_rules``) whose task
    plants it, run by ``python`` (the daemon's user must be able to run it)."""
    return f'match = "{match}"\nrun = {orjson.dumps(plant_argv(marker, python)).decode()}\nreply = "planted"'
