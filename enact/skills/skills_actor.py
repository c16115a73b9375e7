"""The skills actor: learning a skill into a candidate, installing it when
the owner approves that candidate, the installed skills and their use.

Owns ``skills.learnings`` (by candidate id: where the assessed skill came
from and at which revision, so approval installs exactly what was assessed),
``skills.usage`` (an append log: which turn or task read which skill, by
``skill.read`` or through the runtime's own skill tool, ``Used``; the
evidence scanner reads it), ``skills.removals`` (by candidate id: the skill
a removal candidate proposes removing) and ``skills.audit`` (learned,
installed, removal proposed, removed). The files of an installed skill are in ``<home>/skills``
(``enact.skills.installed``).

Learning (``enact.skills.learning``) reads the source and calls the model
off the actor's thread; the candidate is offered to the curator, which
alone keeps candidates. On approval the source is read again at the recorded revision and installed
only if it is the same (a local folder that changed since is refused), then
placed where the runtime reads skills natively (``Capabilities.native_skills``) in
its conversations' directory, and in a task's worktree for each call of its
worker (``Place``, then ``Withdraw`` before the change is looked at).

Every ``REVIEW_EVERY_S`` on its clock (and on ``ReviewUse``) the use of the
installed skills is reviewed by rule (``enact.skills.removal``): a skill
unused too long, or whose last uses were each followed by a failure, is
offered to the curator as a removal candidate; its approval comes back as
``Install`` of that candidate and removes the skill. The same review
prunes the git mirrors no candidate needs any more.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lmdb

from enact.actors._base import ActorContext
from enact.actors._batching import Deferred
from enact.actors._ticking import TickingActor
from enact.cancellation import CancellationToken
from enact.frozen_dataclass import dataclass
from enact.messages.common import NotFound, RefusalCode, Refused, is_human
from enact.messages.curator import MAX_LIST, CandidateList, Candidates, Offer, Offered
from enact.messages.skills import (
    Body,
    FileDigest,
    Install,
    Installed,
    Learn,
    List,
    Listing,
    Place,
    Placed,
    Read,
    Remove,
    Removed,
    ReviewUse,
    SkillView,
    Startup,
    StartupText,
    Used,
    UseRecorded,
    UseReviewed,
    Withdraw,
    Withdrawn,
)
from enact.runtime import Runtime
from enact.skills import installed, removal
from enact.skills.learning import LEARNINGS, Learner
from enact.skills.manifest import Skill, SkillRefused, checked
from enact.skills.settings import RemovalRule
from enact.storage import RecordTable

log = logging.getLogger(__name__)

USAGE = "skills.usage"
AUDIT = "skills.audit"
REMOVALS = "skills.removals"
DATABASES = (LEARNINGS, USAGE, AUDIT, REMOVALS)
REVIEW_EVERY_S = 3_600.0
"""How often the use of the installed skills is reviewed for removal candidates."""
ORIGIN = "skills"
"""Who offers a removal candidate (the rule, not a person)."""
STARTUP_SKILLS = 20
"""Installed skills named in a new session's startup context, at most."""
STARTUP_CHARS = 2_000
"""Characters of the startup context's skills part, at most."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """What a removal candidate removes: the skill at the revision its use was reviewed at."""

    name: str
    revision: str
    reason: str


class _Tick:
    pass


class SkillsActor(TickingActor):
    fenced_note = "it reviews no skill's use"

    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context, every_s=REVIEW_EVERY_S, tick=_Tick())
        self._runtime = runtime
        self._store = context.own_store()
        self._usage = self._store.log(USAGE)
        self._audit = self._store.log(AUDIT)
        self._removals = RecordTable(self._store.table(REMOVALS), Proposal)
        self._learner = Learner(context, self._store, runtime, audit=self._audit.append)
        self._reviewing: list[Deferred] | None = None
        """While a review runs: the asks waiting for the next one (reviews never overlap)."""

    @property
    def _home(self) -> Path:
        return self.context.home

    def on_start(self) -> None:
        super().on_start()
        self._place()

    def tick(self) -> None:
        if self._reviewing is None:
            self._review([])

    def handle(self, message: Any) -> Any:
        match message:
            case Learn():
                return self._learner.learn(message, lambda work, *, then, failed=None: self.off_thread(
                    work, then=then, failed=failed, name="skill-learn"))
            case Install():
                return self._install(message)
            case List():
                uses = self._uses()
                return Listing(skills=tuple(self._view(record, uses) for record in installed.installed(self._home)))
            case Read():
                return self._read(message)
            case Used():
                return self._used(message)
            case Remove():
                return self._remove(message)
            case Startup():
                return StartupText(text=self._startup_text())
            case Place():
                return Placed(names=tuple(installed.placed(self._home, Path(message.directory), message.under)))
            case _Tick():
                self.ticked()
                return None
            case ReviewUse():
                reply = Deferred()
                if self._reviewing is None:
                    self._review([reply])
                else:
                    self._reviewing.append(reply)
                return reply
            case Withdraw():
                installed.withdrawn(Path(message.directory), message.under, list(message.names))
                return Withdrawn()
        return super().handle(message)

    # -- installing and removing --------------------------------------------

    def _install(self, message: Install) -> Installed | NotFound | Refused:
        if not is_human(message.origin):
            return Refused(reason="installing a skill needs a human's approval", code=RefusalCode.NOT_HUMAN)
        proposal = self._store.read(lambda txn: self._removals.get(txn, message.candidate_id.encode()))
        if proposal is not None:
            return self._remove_proposed(message, proposal)
        learning = self._learner.learning(message.candidate_id)
        if learning is None:
            return NotFound(kind="skill candidate", id=message.candidate_id)
        try:
            fetched = self._learner.fetch(learning.source, learning.path, learning.revision, learning.git,
                                          fetch=False)
            skill: Skill = checked(fetched.folder, self._learner.limits, allow_scripts=learning.allow_scripts)
        except SkillRefused as error:
            return Refused(reason=f"the skill is refused now: {error}".replace("\n", "; "), code=RefusalCode.INVALID)
        if fetched.revision != learning.revision or skill.name != learning.name:
            return Refused(reason=f"{learning.source} changed since it was assessed (now {fetched.revision}); "
                                  "learn it again", code=RefusalCode.WRONG_STATE)
        now = self.context.clock.time()
        record = installed.install(self._home, skill, fetched, at=now, by=message.origin)
        self._store.write(lambda txn: self._audit.append(txn, {
            "at": now, "kind": "installed", "skill": skill.name, "candidate_id": message.candidate_id,
            "revision": fetched.revision, "by": message.origin}))
        self._place()
        return Installed(skill=self._view(record))

    def _remove(self, message: Remove) -> Removed | NotFound | Refused:
        if not is_human(message.origin):
            return Refused(reason="removing a skill needs a human (the owner's CLI or chat)",
                           code=RefusalCode.NOT_HUMAN)
        record = self._removed(message.name, by=message.origin)
        return NotFound(kind="installed skill", id=message.name) if record is None else Removed(name=record.name)

    def _remove_proposed(self, message: Install, proposal: Proposal) -> Installed | NotFound | Refused:
        """A removal candidate approved: the skill goes, if it is still the one whose use was reviewed."""
        record = installed.find(self._home, proposal.name)
        if record is None:
            return NotFound(kind="installed skill", id=proposal.name)
        if record.revision != proposal.revision:
            return Refused(reason=f"{proposal.name} was installed again since its removal was proposed",
                           code=RefusalCode.WRONG_STATE)
        self._removed(proposal.name, by=message.origin, candidate_id=message.candidate_id)
        return Installed(skill=self._view(record), removed=True)

    def _removed(self, name: str, *, by: str, candidate_id: str = "") -> installed.Installed | None:
        record = installed.remove(self._home, name)
        if record is None:
            return None
        self._store.write(lambda txn: self._audit.append(txn, {
            "at": self.context.clock.time(), "kind": "removed", "skill": record.name, "revision": record.revision,
            "by": by, **({"candidate_id": candidate_id} if candidate_id else {})}))
        self._place(removed=record.name)
        return record

    # -- reviewing the use ----------------------------------------------------

    def _review(self, replies: list[Deferred]) -> None:
        """Offer a removal candidate for each installed skill the rule finds,
        once per state (a candidate offered before is not offered again);
        ``replies`` are told the candidates offered."""
        self._reviewing = []
        now, rule = self.context.clock.time(), self.context.config.typed(RemovalRule)
        records, uses = installed.installed(self._home), self._use_records()
        offered = self._store.read(lambda txn: {key.decode() for key, _ in self._removals.items(txn)})
        learnings = self._learner.git_learnings()  # one recorded after this is not pruned by this review

        def work(cancel: CancellationToken) -> tuple[list[tuple[str, removal.Removal]], set[str]]:
            made = []
            for found in removal.removals(records, uses, now=now, unused_days=rule.unused_days,
                                          failures=rule.failures,
                                          failed=lambda use: removal.followed_by_failure(self.context.ask, use)):
                draft = removal.draft(found)
                if draft.id in offered:
                    continue
                answer = self.context.ask("curator", Offer(draft=draft, origin=ORIGIN))
                if isinstance(answer, Offered):
                    made.append((answer.candidate_id, found))
                else:
                    log.warning("the removal of skill %s was not offered: %s", found.name, answer.reason)
            return made, self._decided(learnings)

        def done(outcome: tuple[list[tuple[str, removal.Removal]], set[str]]) -> None:
            made, decided = outcome
            def write(txn: lmdb.Transaction) -> None:
                for candidate_id, found in made:
                    self._removals.put(txn, candidate_id.encode(),
                                       Proposal(name=found.name, revision=found.revision, reason=found.reason))
                    self._audit.append(txn, {"at": now, "kind": "removal-proposed", "skill": found.name,
                                             "candidate_id": candidate_id, "reason": found.reason})

            if made:  # nothing offered, nothing to commit
                self._store.write(write)
            self._learner.prune_mirrors(decided)
            self._reviewed(replies, UseReviewed(candidate_ids=tuple(candidate_id for candidate_id, _ in made)))

        def failed(error: Exception) -> None:
            log.warning("the skills' use was not reviewed: %s", error)
            self._reviewed(replies, UseReviewed(candidate_ids=()))

        self.off_thread(work, then=done, failed=failed, name="skill-review")

    def _decided(self, learnings: dict[str, str]) -> set[str]:
        """Of ``learnings``' candidates, those no longer active nor approved
        (none when the curator cannot say them all)."""
        undecided: set[str] = set()
        for state in ("active", "approved"):
            try:
                page = self.context.ask("curator", Candidates(state=state, limit=MAX_LIST))
            except Exception as error:  # the mirrors wait for the next review
                log.warning("no skill mirror pruned: %s", error)
                return set()
            if not isinstance(page, CandidateList) or len(page.candidates) >= MAX_LIST:
                return set()
            undecided.update(candidate.id for candidate in page.candidates)
        return set(learnings) - undecided

    def _reviewed(self, replies: list[Deferred], reviewed: UseReviewed) -> None:
        for reply in replies:
            reply.resolve(reviewed)
        waiting, self._reviewing = self._reviewing or [], None
        if waiting:  # asked while this review ran, perhaps after what it read changed: one more
            self._review(waiting)

    def _place(self, *, removed: str = "") -> None:
        """The installed skills, where a runtime that reads skills natively
        looks in its conversations' directory; a ``removed`` one taken out."""
        directory = self._runtime.capabilities.conversation_dir
        under = self._runtime.capabilities.native_skills
        if directory is not None and under:
            directory.mkdir(parents=True, exist_ok=True)
            if removed:
                installed.withdrawn(directory, under, [removed])
            installed.placed(self._home, directory, under)

    # -- reading ------------------------------------------------------------

    def _read(self, message: Read) -> Body | NotFound:
        record = installed.find(self._home, message.name)
        text = installed.body(self._home, message.name) if record is not None else None
        if record is None or text is None:
            return NotFound(kind="installed skill", id=message.name)
        self._store.write(lambda txn: self._usage.append(txn, {
            "at": self.context.clock.time(), "skill": record.name, "revision": record.revision,
            "used_by": message.used_by, "how": "read"}))
        return Body(skill=self._view(record), text=text)

    def _used(self, message: Used) -> UseRecorded:
        """Skills the runtime's own skill tool loaded: recorded as reads are,
        for those installed (the runtime has skills of its own, too)."""
        found = [installed.find(self._home, name) for name in message.names]
        records = [record for record in found if record is not None]
        now = self.context.clock.time()

        def write(txn: lmdb.Transaction) -> None:
            for record in records:
                self._usage.append(txn, {"at": now, "skill": record.name, "revision": record.revision,
                                         "used_by": message.used_by, "how": "native"})

        if records:
            self._store.write(write)
        return UseRecorded(names=tuple(record.name for record in records))

    def _use_records(self) -> list[dict[str, Any]]:
        return [usage for _, usage in self._store.read(lambda txn: self._usage.read_from(txn, 0, 100_000))]

    def _uses(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for usage in self._use_records():
            counts[usage["skill"]] = counts.get(usage["skill"], 0) + 1
        return counts

    def _view(self, record: installed.Installed, uses: dict[str, int] | None = None) -> SkillView:
        return SkillView(name=record.name, description=record.description, source=record.source, path=record.path,
                         revision=record.revision, digests=tuple(FileDigest(path=path, sha256=digest)
                                                                  for path, digest in sorted(record.digests.items())),
                         installed_at=record.installed_at, by=record.by,
                         uses=(self._uses() if uses is None else uses).get(record.name, 0))

    def _startup_text(self) -> str:
        records = installed.installed(self._home)
        if not records:
            return ""
        lines = ["Installed skills (ask for one's instructions with the action skill.read before following it):"]
        for record in records[:STARTUP_SKILLS]:
            line = f"- {record.name}: {record.description}"
            if sum(len(text) + 1 for text in lines) + len(line) > STARTUP_CHARS:
                break
            lines.append(line)
        return "\n".join(lines)
