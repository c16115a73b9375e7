"""An installed skill in use: placed in a task's worktree for the call of a
runtime that reads skills natively, and no part of the task's change; and
proposed for removal, by rule on the actors' clock, when it goes unused or
failures follow its last uses."""

from __future__ import annotations

from pathlib import Path

from actor_system import ActorSystem, running_actors
from skill_repos import GOOD, skill_repo
from task_repos import git, make_repo
from test_task_workers import UNCONFINED, add, branch, task_rules, wait_ended

from enact.clock import ManualClock
from enact.home import STATE_DIR
from enact.messages.common import HUMAN_CLI
from enact.messages.curator import Approve, Approved, CandidateList, Candidates
from enact.messages.skills import Read, ReviewUse
from enact.skills.installed import find, install
from enact.skills.manifest import checked
from enact.skills.removal import DAY_S
from enact.skills.settings import SkillLimits
from enact.skills.skills_actor import AUDIT, DATABASES
from enact.skills.sources import fetch_git
from enact.storage import Storage

from conftest import DaemonFactory


def install_tidy_notes(home: Path, tmp_path: Path, *, at: float) -> None:
    fetched = fetch_git(str(skill_repo(tmp_path / "skill-repo")), "skills/good", "main", mirrors=tmp_path / "mirrors",
                        limits=SkillLimits())
    install(home, checked(fetched.folder, SkillLimits()), fetched, at=at, by="human-cli")


def test_a_tasks_call_finds_the_skills_in_its_worktree_and_its_commit_does_not_carry_them(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    home = daemons.new_home()
    install_tidy_notes(home, tmp_path, at=1.0)
    # The scripted runtime reads skills where Claude Code does; its command copies what it found.
    (home / "scripted.toml").write_text(task_rules(
        'match = "note the skill"\nrun = ["sh", "-c", "cp .claude/skills/tidy-notes/SKILL.md seen.md"]\n'
        'reply = "done"'))
    daemon = daemons.start(home, env=UNCONFINED)
    repo = make_repo(tmp_path / "repo")
    task_id = add(daemon, repo, "note the skill you were given")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "succeeded", shown["summary"]
    assert git(repo, "show", f"{branch(daemon, task_id)}:seen.md") == GOOD
    changed = git(repo, "diff", "--name-only", f"{branch(daemon, task_id)}~1", branch(daemon, task_id)).split()
    assert changed == ["seen.md"]
    assert ".claude" not in daemon.cli("task", "show", str(task_id)).stdout


def rules(home: Path) -> None:
    """A turn that fails on the runtime (no retry: the owner is told), and one that goes well."""
    (home / "scripted.toml").write_text('[[rule]]\nmatch = "^tidy up"\nfail = "the model is down"\n'
                                        'fail_as = "unavailable"\n\n[[rule]]\nmatch = "^hello"\nreply = "hi"\n')


def candidates(system: ActorSystem) -> dict[str, str]:
    """The active skill candidates' titles, by id (a review may have been the clock's tick's, or the test's)."""
    page = system.ask("curator", Candidates(state="active", limit=20))
    assert isinstance(page, CandidateList)
    return {candidate.id: candidate.draft.title for candidate in page.candidates if candidate.draft.source == "skill"}


def test_a_skill_unused_for_thirty_days_is_proposed_once_and_removed_on_approval(tmp_path: Path) -> None:
    home, clock = tmp_path / "home", ManualClock()
    home.mkdir()
    rules(home)
    install_tidy_notes(home, tmp_path, at=clock.time())
    with running_actors(home, clock) as system:
        clock.advance(29 * DAY_S)
        system.ask("skills", ReviewUse())
        assert candidates(system) == {}
        clock.advance(1 * DAY_S)
        system.ask("skills", ReviewUse())
        [(proposed, title)] = candidates(system).items()
        assert title == "Remove the skill tidy-notes: unused for 30 days since it was installed"
        clock.advance(2 * DAY_S)  # the same state: nothing new, however often it is reviewed
        assert system.ask("skills", ReviewUse()).candidate_ids == ()
        assert list(candidates(system)) == [proposed]
        approved = system.ask("curator", Approve(candidate_id=proposed, origin=HUMAN_CLI))
        assert isinstance(approved, Approved) and approved.removed == "tidy-notes" and approved.task_id is None
        assert find(home, "tidy-notes") is None
        assert system.ask("skills", ReviewUse()).candidate_ids == ()
    storage = Storage(home / STATE_DIR)
    try:
        store = storage.grant("skills", DATABASES)
        audit = [event for _, event in store.read(lambda txn: list(store.log(AUDIT).read_from(txn, 0, 100)))]
    finally:
        storage.close()
    assert [event["kind"] for event in audit] == ["removal-proposed", "removed"]
    assert audit[-1]["candidate_id"] == proposed and audit[-1]["by"] == HUMAN_CLI


def test_a_skill_whose_last_three_uses_were_each_followed_by_a_failed_turn_is_proposed(tmp_path: Path) -> None:
    home, clock = tmp_path / "home", ManualClock()
    home.mkdir()
    rules(home)
    install_tidy_notes(home, tmp_path, at=clock.time())

    def use(then: str) -> None:
        clock.advance(60)
        system.ask("skills", Read(name="tidy-notes", used_by="local:cli"))
        clock.advance(1)
        system.send(then)

    with running_actors(home, clock) as system:
        use("tidy up the notes")
        use("hello")  # a use followed by a turn that went well
        use("tidy up the notes")
        use("tidy up the notes")
        system.ask("skills", ReviewUse())
        assert candidates(system) == {}
        use("tidy up the notes")
        system.ask("skills", ReviewUse())
        assert list(candidates(system).values()) == [
            "Remove the skill tidy-notes: each of its last 3 uses was followed by a failure"]
        use("tidy up the notes")  # the same run of failures, one more: nothing new
        assert system.ask("skills", ReviewUse()).candidate_ids == ()
        assert len(candidates(system)) == 1
