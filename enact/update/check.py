"""``enact update --check``: which revision runs, which is authoritative
(the head of ``update.branch`` in ``update.repository``), and whether an
update is possible: the repository's checkout is clean and the
authoritative revision descends from the running one."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from enact._app.revision import revision_now
from enact.frozen_dataclass import dataclass
from enact.tasks.host_git import WorktreeError, git
from enact.tasks.repositories import UnusableRepository, checkout, own_checkout
from enact.update import daemons
from enact.update.history import Journal
from enact.update.releases import Release
from enact.update.settings import UpdateSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateCheck:
    running: Release
    repository: str
    branch: str
    authoritative: str
    """The branch's head; "" when it could not be read."""
    why_not: str = ""
    """One line: why no update is possible; "" when one is."""

    @property
    def possible(self) -> bool:
        return not self.why_not

    def as_json(self) -> dict[str, Any]:
        return {"running": self.running.revision, "environment": self.running.environment,
                "repository": self.repository, "branch": self.branch, "authoritative": self.authoritative,
                "possible": self.possible, "why_not": self.why_not}


def running_release(home: Path) -> Release:
    """The release serving ``home``: the one the last update or rollback
    left serving; else the revision the serving daemon was started from
    (a commit in the checkout since then is not what runs); else this
    process's own (a checkout's head or a release's recorded revision; ""
    when neither)."""
    serving = Journal(home).serving()
    if serving is not None:
        return serving
    report = daemons.serving(home)
    revision = report.revision if report is not None and report.revision else revision_now()
    return Release(revision=revision, environment=sys.prefix)


def check(home: Path, settings: UpdateSettings) -> UpdateCheck:
    running = running_release(home)
    repository = settings.repository or own_checkout()
    if not repository:
        return UpdateCheck(running=running, repository="", branch=settings.branch, authoritative="",
                           why_not="update.repository is not set and enact does not run from a git checkout")
    try:
        found = checkout(repository)
    except UnusableRepository as error:
        return UpdateCheck(running=running, repository=repository, branch=settings.branch, authoritative="",
                           why_not=f"update.repository: {error}")
    branch = settings.branch or found.branch
    checked = UpdateCheck(running=running, repository=str(found.top), branch=branch, authoritative="")
    try:
        authoritative = git(found.top, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}").strip()
    except WorktreeError:
        return _with(checked, why_not=f"{found.top} has no branch {branch}")
    checked = _with(checked, authoritative=authoritative)
    if git(found.top, "status", "--porcelain", "--untracked-files=no").strip():
        return _with(checked, why_not=f"the checkout {found.top} has uncommitted changes")
    if not running.revision:
        return _with(checked, why_not="the running revision is unknown (enact runs from neither a release "
                                      "nor a git checkout)")
    if authoritative == running.revision:
        return _with(checked, why_not=f"already running {running.short}, the head of {branch}")
    try:
        git(found.top, "cat-file", "-e", f"{running.revision}^{{commit}}")
    except WorktreeError:
        return _with(checked, why_not=f"the running {running.short} is not in {found.top}")
    try:
        git(found.top, "merge-base", "--is-ancestor", running.revision, authoritative)
    except WorktreeError:
        return _with(checked, why_not=f"{authoritative[:12]} on {branch} does not descend from the running "
                                      f"{running.short}")
    return checked


def _with(checked: UpdateCheck, *, why_not: str = "", authoritative: str = "") -> UpdateCheck:
    return replace(checked, why_not=why_not, authoritative=authoritative or checked.authoritative)
