"""The git bundles a remote attempt travels in: the task's base out to the
node, its change back to the daemon (``enact.tasks.remote_attempt``).

Only host git (``enact.tasks.host_git``) makes and reads them. The daemon
trusts nothing in a change bundle: it must hold one branch whose head
descends from the base the daemon sent, and the paths it changes are held
to the task's protected-path rules (``enact.tasks.protected``) as the
daemon reads them at the base, whatever the node's own doctor said. Only
then does the head become the task's branch in the owner's repository.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.tasks import repositories, task_branches
from enact.tasks.host_git import WorktreeError, git
from enact.tasks.protected import Guards


class BundleRefused(EnactError):
    """A change bundle the daemon does not take; the message is the attempt's reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseBundle:
    """The task's base as it travels to the node."""

    data: bytes
    branch: str
    """The owner's checked-out branch, which the node's clone checks out."""
    base: str
    """The commit the bundle's branch is at: the task's base."""


def _scratch_file(scratch: Path, name: str) -> Path:
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch / f"{name}-{uuid.uuid4().hex[:12]}.bundle"


def _heads(repo: Path, bundle: Path) -> dict[str, str]:
    """The refs a bundle holds, name to commit."""
    listed = git(repo, "bundle", "list-heads", str(bundle))
    heads = {}
    for line in listed.splitlines():
        sha, _, ref = line.strip().partition(" ")
        if sha and ref:
            heads[ref] = sha
    return heads


def bundle_base(repo: Path, scratch: Path) -> tuple[Path, BaseBundle]:
    """The repository's checked-out branch as a bundle (its top level, and
    the bundle); the base is what the bundle holds, so a commit made
    meanwhile is either in it or not, never half. Raises UnusableRepository
    or WorktreeError."""
    found = repositories.checkout(repo)
    path = _scratch_file(scratch, "base")
    try:
        git(found.top, "bundle", "create", "--quiet", str(path), f"refs/heads/{found.branch}")
        base = _heads(found.top, path)[f"refs/heads/{found.branch}"]
        return found.top, BaseBundle(data=path.read_bytes(), branch=found.branch, base=base)
    finally:
        path.unlink(missing_ok=True)


def clone_base(bundle: BaseBundle, into: Path) -> Path:
    """On the node: a clone of the base bundle at ``into``, its base branch
    checked out at the base (where ``enact.tasks.worktrees.prepare`` makes
    the task's worktree from). Raises WorktreeError."""
    path = _scratch_file(into.parent, "base")
    try:
        path.write_bytes(bundle.data)
        git(into.parent, "clone", "--quiet", "--branch", bundle.branch, str(path), str(into))
    finally:
        path.unlink(missing_ok=True)
    head = git(into, "rev-parse", "HEAD").strip()
    if head != bundle.base:
        raise WorktreeError(f"the base bundle's {bundle.branch} is at {head[:12]}, not the base {bundle.base[:12]}")
    return into


def bundle_change(repo: Path, branch: str, base: str) -> bytes | None:
    """On the node: the task branch's commits since the base, as a bundle;
    None when there are none."""
    head = git(repo, "rev-parse", f"refs/heads/{branch}").strip()
    if head == base:
        return None
    path = _scratch_file(repo.parent, "change")
    try:
        git(repo, "bundle", "create", "--quiet", str(path), f"refs/heads/{branch}", f"^{base}")
        return path.read_bytes()
    finally:
        path.unlink(missing_ok=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class TakenChange:
    branch: str
    """The task's branch in the owner's repository, now at ``head``."""
    head: str
    changed: tuple[str, ...]
    diffstat: str


def _descends(repo: Path, base: str, head: str) -> bool:
    try:
        git(repo, "merge-base", "--is-ancestor", base, head)
    except WorktreeError:
        return False
    return head != base


def check_change(data: bytes, *, repo: Path, base: str, guards: Guards, scratch: Path,
                 head: str | None = None) -> tuple[str, tuple[str, ...]]:
    """The head commit of a change bundle and the paths it changes, once
    its objects are in ``repo``; BundleRefused says why it is not taken
    (``head``: the commit the node said it made). No ref of the repository
    changes: a refused bundle leaves only unreachable objects, which git's
    gc removes."""
    path = _scratch_file(scratch, "change")
    try:
        path.write_bytes(data)
        try:
            heads = _heads(repo, path)
        except WorktreeError as error:
            raise BundleRefused(f"the change is not a git bundle: {error}") from None
        if len(heads) != 1:
            raise BundleRefused(f"the change bundle must hold one branch; it holds {len(heads)}")
        [(ref, sha)] = heads.items()
        if head is not None and sha != head:
            raise BundleRefused(f"the change bundle's head {sha[:12]} is not the commit the node named {head[:12]}")
        try:
            git(repo, "bundle", "verify", "--quiet", str(path))
            git(repo, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", str(path), ref)
        except WorktreeError as error:
            raise BundleRefused(f"the change bundle does not descend from the base {base[:12]}: {error}") from None
    finally:
        path.unlink(missing_ok=True)
    if not _descends(repo, base, sha):
        raise BundleRefused(f"the change {sha[:12]} does not descend from the base {base[:12]}")
    changed = tuple(item for item in git(repo, "diff", "--name-only", "-z", "--no-renames", base, sha).split("\0")
                    if item)
    verdict = guards.check_commit(sha, changed)
    if verdict.blocked:
        raise BundleRefused("the change touches protected paths without the owner's leave (`enact task add "
                            f"--allow-path`): {', '.join(verdict.blocked)}")
    return sha, changed


def take_change(data: bytes, *, home: Path, task_id: int, repo: Path, base: str, guards: Guards, scratch: Path,
                head: str | None = None) -> TakenChange:
    """Check a change bundle (``check_change``) and put its head on the
    task's branch in ``repo``, as a local attempt's capture would have it.
    Raises BundleRefused or WorktreeError."""
    sha, changed = check_change(data, repo=repo, base=base, guards=guards, scratch=scratch, head=head)
    branch, _ = task_branches.claim(home, repo, task_id)
    git(repo, "update-ref", f"refs/heads/{branch}", sha)
    stat = ""
    with contextlib.suppress(WorktreeError):
        stat = git(repo, "diff", "--stat", "--no-textconv", "--no-ext-diff", base, sha).strip()
    return TakenChange(branch=branch, head=sha, changed=changed, diffstat=stat)
