"""Learning a skill, for the skills actor: read and check the folder at an
exact revision, have a model assess it (off the actor's thread), and offer
the assessment to the curator as a candidate; what approval will install
is kept in ``skills.learnings`` by candidate id.

One learning at a time, bounded by ``skills.learn_timeout_s`` from the
start of the fetch to the end of the model call (``skills.Learn`` is a long
request: the control socket waits that long, plus ``control.request_timeout_s``
for the offer). The git mirrors (``<home>/skill-sources``) a learning
fetched are kept only while a candidate they hold may still be approved
(``prunable_mirrors``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

import lmdb

from enact.actors._base import ActorContext
from enact.actors._batching import Deferred
from enact.actors._long_work import OffThread
from enact.cancellation import CancellationToken
from enact.config import RuntimeSettings
from enact.evolution.candidates import Draft
from enact.frozen_dataclass import dataclass
from enact.messages.common import RefusalCode, Refused, is_human
from enact.messages.curator import CandidateList, Candidates, Offer, Offered
from enact.messages.memory import GetIdentity, Identity
from enact.messages.skills import Learn, Learned
from enact.runtime import Runtime, RuntimeRequest
from enact.skills import assessment, installed
from enact.skills.manifest import Skill, SkillRefused, checked
from enact.skills.settings import LearnSettings, SkillLimits
from enact.skills.sources import MIRRORS_DIR, Fetched, fetch_git, mirror_of, read_local
from enact.storage import RecordTable, Store

log = logging.getLogger(__name__)

LEARNINGS = "skills.learnings"


@dataclass(frozen=True, slots=True, kw_only=True)
class Learning:
    """What a skill candidate installs: its source at the assessed revision."""

    name: str
    source: str
    path: str
    revision: str
    git: bool
    allow_scripts: bool


Audit = Callable[[lmdb.Transaction, dict[str, Any]], object]
"""Append an event to ``skills.audit`` in the given write."""


class Learner:
    """The learning half of the skills actor: its one running learning, the
    learnings table, and the fetch both learning and installing use."""

    def __init__(self, context: ActorContext, store: Store, runtime: Runtime, *, audit: Audit) -> None:
        self._context = context
        self._store = store
        self._runtime = runtime
        self._audit = audit
        self.table = RecordTable(store.table(LEARNINGS), Learning)
        self.limits = context.config.typed(SkillLimits)
        self.running = False
        """A learning is under way (its mirror is fetched or read): no mirror is pruned meanwhile."""

    @property
    def mirrors(self) -> Path:
        return self._context.home / MIRRORS_DIR

    def fetch(self, source: str, path: str, revision: str, git: bool, *, fetch: bool = True) -> Fetched:
        if git:
            return fetch_git(source, path, revision or "HEAD", mirrors=self.mirrors, limits=self.limits, fetch=fetch)
        return read_local(Path(source), self.limits)

    def learning(self, candidate_id: str) -> Learning | None:
        return self._store.read(lambda txn: self.table.get(txn, candidate_id.encode()))

    def learn(self, message: Learn, off_thread: OffThread) -> Deferred | Refused:
        if not is_human(message.origin):
            return Refused(reason="learning a skill needs a human (the owner's CLI or chat)",
                           code=RefusalCode.NOT_HUMAN)
        if self.running:
            return Refused(reason="a skill is being learned; ask again when it is done", code=RefusalCode.BUSY)
        source = message.source.strip()
        if source.startswith("~"):
            source = str(Path(source).expanduser())
        # A folder of its own, not a repository's: read as it is now. Anything
        # else (a repository, a URL, with or without --path and --rev) is git's.
        local = Path(source).is_absolute() and Path(source).is_dir() and not (Path(source) / ".git").exists() \
            and not message.path and not message.revision
        context = self._context_lines()
        reply = Deferred()
        budget_s = self._context.config.typed(LearnSettings).timeout_s
        call_s = self._context.config.typed(RuntimeSettings).timeout_s

        def work(cancel: CancellationToken) -> tuple[Fetched, Skill, Draft] | Refused:
            deadline = time.monotonic() + budget_s
            try:
                fetched = self.fetch(source, message.path, message.revision, git=not local)
                skill = checked(fetched.folder, self.limits, allow_scripts=message.allow_scripts)
            except SkillRefused as error:
                return Refused(reason=f"the skill is refused: {error}".replace("\n", "; "),
                               code=RefusalCode.INVALID)
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                return Refused(reason=f"reading the skill took all of skills.learn_timeout_s ({budget_s:g} s); "
                                      "nothing was assessed", code=RefusalCode.WRONG_STATE)
            origin = f"{fetched.source}" + (f" {fetched.path}" if fetched.path else "")
            request = RuntimeRequest(session_key="", sandbox="read-only", purpose=assessment.PURPOSE,
                                     timeout_s=min(call_s, left_s), cancel=cancel,
                                     prompt=assessment.prompt(skill, origin=origin, **context))
            try:
                answer = self._runtime.invoke(request).text
                return fetched, skill, assessment.parse(answer, skill, origin=origin, revision=fetched.revision)
            except Exception as error:  # a model failure or an unusable reply: nothing is stored
                return Refused(reason=f"the assessment failed: {error}", code=RefusalCode.WRONG_STATE)

        def done(outcome: tuple[Fetched, Skill, Draft] | Refused) -> None:
            self.running = False
            reply.resolve(outcome if isinstance(outcome, Refused) else self._offer(*outcome, message, git=not local))

        def failed(error: Exception) -> None:
            self.running = False
            reply.resolve(Refused(reason=f"learning failed: {error}", code=RefusalCode.WRONG_STATE))

        self.running = True
        off_thread(work, then=done, failed=failed)
        return reply

    def _offer(self, fetched: Fetched, skill: Skill, draft: Draft, message: Learn, *, git: bool) -> Learned | Refused:
        """The assessed skill as the curator's candidate, and what approval will install."""
        offered = self._context.ask("curator", Offer(draft=draft, origin=message.origin))
        if not isinstance(offered, Offered):
            return Refused(reason=f"the curator kept no candidate: {offered.reason}", code=offered.code)
        learning = Learning(name=skill.name, source=fetched.source, path=fetched.path, revision=fetched.revision,
                            git=git, allow_scripts=message.allow_scripts)
        event = {"at": self._context.clock.time(), "kind": "learned", "skill": skill.name,
                 "candidate_id": offered.candidate_id, "revision": fetched.revision, "by": message.origin}

        def write(txn: lmdb.Transaction) -> None:
            self.table.put(txn, offered.candidate_id.encode(), learning)
            self._audit(txn, event)

        self._store.write(write)
        return Learned(candidate_id=offered.candidate_id, name=skill.name, revision=fetched.revision,
                       summary=draft.expected_benefit, existing=offered.existing)

    def _context_lines(self) -> dict[str, Any]:
        """The mission, the installed skills and the open candidates, for the assessment."""
        mission = ""
        try:
            identity = self._context.ask("memory", GetIdentity())
            if isinstance(identity, Identity) and identity.private is not None:
                mission = identity.private.mission.strip()
        except Exception as error:  # memory's absence costs the prompt its mission, not the learning
            log.warning("no mission for the skill assessment: %s", error)
        open_candidates: list[str] = []
        try:
            page = self._context.ask("curator", Candidates(state="active", limit=30))
            if isinstance(page, CandidateList):
                open_candidates = [f"{c.draft.title} ({c.draft.source})" for c in page.candidates]
        except Exception as error:
            log.warning("no candidates for the skill assessment: %s", error)
        return {"mission": mission, "candidates": open_candidates,
                "installed": [f"{r.name}: {r.description}" for r in installed.installed(self._context.home)]}

    # -- the mirrors ------------------------------------------------------------

    def git_learnings(self) -> dict[str, str]:
        """The learnings from a git source: their sources, by candidate id."""
        return {key.decode(): learning.source
                for key, learning in self._store.read(lambda txn: list(self.table.items(txn))) if learning.git}

    def prune_mirrors(self, decided: Collection[str]) -> list[Path]:
        """Remove the mirrors no candidate still needs: every learning from
        their source has a ``decided`` candidate (adopted, rejected or
        removed: none can be approved again); a mirror of a source that made
        no candidate (refused, its assessment failed) goes too. Nothing while
        a learning runs (its mirror may be one of those). The mirrors removed."""
        if self.running or not self.mirrors.is_dir():
            return []
        return list(_remove(prunable_mirrors(self.mirrors, self.git_learnings(), decided)))


def prunable_mirrors(mirrors: Path, learnings: dict[str, str], decided: Collection[str]) -> list[Path]:
    """The mirrors under ``mirrors`` whose every learning (``learnings``:
    source by candidate id) is ``decided``, and those no learning names."""
    needed = {mirror_of(mirrors, source) for candidate_id, source in learnings.items() if candidate_id not in decided}
    return sorted(path for path in mirrors.glob("*.git") if path not in needed)


def _remove(paths: Iterable[Path]) -> Iterable[Path]:
    import shutil

    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
        log.info("skill mirror %s pruned: no candidate needs it", path.name)
        yield path
