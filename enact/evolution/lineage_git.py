"""The parent's history, read from a private bare mirror under the home.

The parent (``lineage.parent``, a path or a URL) is fetched into
``<home>/lineage/parent.git`` through ``enact.tasks.host_git``, so every git
runs without hooks, fsmonitor or system configuration, and only the
``ext`` transport (which would run a command) is refused outright. The
mirror is ours: nothing of the parent's is checked out, so no planted
``.git`` or attribute of the parent's is ever read.

A change is one commit of the branch's first-parent history; a merge
carries the commits it brings in (``merged``), so the model reads them as
one change.
"""

from __future__ import annotations

from pathlib import Path

from enact.frozen_dataclass import dataclass
from enact.tasks.host_git import WorktreeError, git

MIRROR = Path("lineage") / "parent.git"
_SAFE = ("-c", "protocol.ext.allow=never", "-c", "core.askPass=/bin/false")
_DIFF = ("--no-color", "--no-ext-diff", "--no-textconv")


class LineageGitError(WorktreeError):
    """Fetching or reading the parent failed; the message is one line."""


class HistoryRewritten(LineageGitError):
    """The assessed revision is no longer an ancestor of the parent's branch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParentChange:
    commit: str
    """The first-parent commit (for a merge, the merge commit)."""
    merged: tuple[str, ...]
    """The commits a merge brought in, oldest first; () for a plain commit."""
    messages: str
    files: tuple[str, ...]
    diff: str
    """The change's diff against its first parent, clipped to the bound."""
    clipped: bool


def mirror(home: Path) -> Path:
    return home / MIRROR


def _git(repo: Path, *args: str) -> str:
    try:
        return git(repo, *args, options=_SAFE)
    except WorktreeError as error:
        raise LineageGitError(str(error)) from None


def fetch(home: Path, parent: str, branch: str) -> str:
    """Fetch the parent's branch into the mirror; its head commit."""
    path = mirror(home)
    if not (path / "HEAD").exists():
        path.mkdir(parents=True, exist_ok=True)
        _git(path, "init", "--bare", "--quiet")
    _git(path, "fetch", "--quiet", "--no-tags", "--force", "--", parent, f"refs/heads/{branch}:refs/heads/{branch}")
    return resolve(home, f"refs/heads/{branch}")


def resolve(home: Path, revision: str) -> str:
    """``revision`` as a full commit id in the mirror, or LineageGitError."""
    if revision.startswith("-"):
        raise LineageGitError(f"{revision!r} is not a revision")
    if not (mirror(home) / "HEAD").exists():
        raise LineageGitError("the parent was never fetched (`enact lineage scan` fetches it)")
    return _git(mirror(home), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()


def new_changes(home: Path, since: str, head: str, *, most: int, diff_bytes: int) -> tuple[list[ParentChange], int]:
    """The first ``most`` changes after ``since`` up to ``head``, oldest
    first, and how many more remain; HistoryRewritten when ``since`` is not
    an ancestor of ``head``."""
    path = mirror(home)
    try:
        _git(path, "merge-base", "--is-ancestor", since, head)
    except LineageGitError:
        raise HistoryRewritten(f"the parent's history was rewritten: {since[:12]} is no longer an ancestor of "
                               f"its branch (head {head[:12]}); `enact lineage reset REV` says where to go on "
                               "from") from None
    commits = _git(path, "rev-list", "--first-parent", "--reverse", f"{since}..{head}").split()
    return [_change(path, commit, diff_bytes) for commit in commits[:most]], max(0, len(commits) - most)


def _change(path: Path, commit: str, diff_bytes: int) -> ParentChange:
    parents = _git(path, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    merged = tuple(_git(path, "rev-list", "--reverse", f"{parents[0]}..{parents[1]}").split()) \
        if len(parents) > 1 else ()
    shown = (commit, *merged)
    messages = _git(path, "show", "--no-patch", "--format=%h %an: %B", *shown).strip()
    base = parents[0] if parents else _git(path, "hash-object", "-t", "tree", "/dev/null").strip()
    files = tuple(_git(path, "diff", *_DIFF, "--name-only", base, commit).split("\n"))
    diff = _git(path, "diff", *_DIFF, "--stat", "--patch", base, commit)
    encoded = diff.encode()
    clipped = len(encoded) > diff_bytes
    if clipped:
        diff = encoded[:diff_bytes].decode(errors="ignore") + "\n… (clipped)"
    return ParentChange(commit=commit, merged=merged, messages=messages, files=tuple(f for f in files if f),
                        diff=diff, clipped=clipped)
