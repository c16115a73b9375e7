"""Which revision of enact this process runs: the head of enact's own
checkout when it runs from one (an editable install), else the revision
recorded by the release it was installed as (``enact.update.releases``).

The daemon reads it once, at start: a commit in the checkout afterwards
does not change the code it runs, so it must not change what it reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from enact.tasks.host_git import WorktreeError, git
from enact.tasks.repositories import own_checkout

RELEASE_FILE = "release.json"
"""Beside a release's environment: the revision it was installed from."""


def revision_of_environment(environment: Path) -> str | None:
    """The revision of a release's environment; None for an environment
    that is no release (the one enact was installed in by hand)."""
    try:
        return str(json.loads((environment.parent / RELEASE_FILE).read_text())["revision"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def revision_now() -> str:
    """This process's revision, read now; "" when it is neither from a
    checkout nor a release."""
    top = own_checkout()
    if top:
        try:
            return git(Path(top), "rev-parse", "--verify", "-q", "HEAD^{commit}").strip()
        except WorktreeError:
            return ""
    return revision_of_environment(Path(sys.prefix)) or ""
