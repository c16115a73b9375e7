"""Landing a review's branch into a real git repository (enact.tasks.landing)."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from git_repos import commit, git, make_repo, task_branch
from hostile_git import plant_argv

from enact.messages.reviews import LandRefusal
from enact.tasks.landing import LandPlan, land, merge_message


@dataclass(frozen=True)
class Verdict:
    passed: bool
    summary: str


def shell_doctor(command: str, seen: list[Path] | None = None) -> Callable[[Path, str], Verdict]:
    """A doctor that runs ``command`` in the checkout it is given."""

    def check(worktree: Path, target: str) -> Verdict:
        if seen is not None:
            seen.append(worktree)
        done = subprocess.run(["sh", "-c", command], cwd=worktree, capture_output=True, text=True)
        return Verdict(passed=done.returncode == 0, summary=f"`{command}` exit {done.returncode}")

    return check


def always() -> bool:
    return True


def test_land_fast_forwards_target_when_doctor_passes_on_the_result(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    _, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    seen: list[Path] = []
    outcome = land(LandPlan(repo=repo, head=head, message="land"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor("grep -q two app.txt", seen), current=always)
    assert outcome.landed and outcome.fast_forward and outcome.target == "main"
    assert outcome.revision == head == git(repo, "rev-parse", "main")
    assert (repo / "app.txt").read_text() == "two\n"  # the checkout moved with its branch
    assert seen == [tmp_path / "scratch"] and not seen[0].exists()  # checked apart, then removed
    assert str(tmp_path / "scratch") not in git(repo, "worktree", "list")


def test_a_doctor_that_plants_a_git_file_in_the_scratch_worktree_runs_nothing_on_the_host(tmp_path: Path) -> None:
    """The doctor runs the merged code, which may rewrite the scratch
    worktree's .git to a git directory whose filter, textconv, fsmonitor
    and hook would run when the host's git next looks there: the host does
    not look there again."""
    repo = make_repo(tmp_path / "repo")
    _, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n", "lib.py": ""})
    marker = tmp_path / "planted-ran"
    outcome = land(LandPlan(repo=repo, head=head, message="land"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor(shlex.join(plant_argv(str(marker)))), current=always)
    assert outcome.landed, outcome.reason
    assert not (tmp_path / "scratch").exists() and str(tmp_path / "scratch") not in git(repo, "worktree", "list")
    assert not marker.exists()


def test_land_refuses_on_failing_doctor_and_leaves_target_untouched(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    before = git(repo, "rev-parse", "main")
    _, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"}, deleted=("ok",))
    outcome = land(LandPlan(repo=repo, head=head, message="land"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor("test -f ok"), current=always)
    assert not outcome.landed and outcome.refusal is LandRefusal.DOCTOR_FAILED
    assert "exit 1" in outcome.reason
    assert git(repo, "rev-parse", "main") == before and (repo / "app.txt").read_text() == "one\n"
    assert (repo / "ok").exists() and not (tmp_path / "scratch").exists()


def test_land_refuses_a_dirty_target_without_running_the_doctor(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    _, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    (repo / "app.txt").write_text("owner's edit\n")
    seen: list[Path] = []
    outcome = land(LandPlan(repo=repo, head=head, message="land"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor("true", seen), current=always)
    assert outcome.refusal is LandRefusal.DIRTY_TARGET and "app.txt" in outcome.reason
    assert seen == [] and (repo / "app.txt").read_text() == "owner's edit\n"


def test_land_refuses_a_conflict_and_names_the_path(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    _, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    before = commit(repo, {"app.txt": "owner's two\n"}, "owner moved on")
    outcome = land(LandPlan(repo=repo, head=head, message="land"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor("true"), current=always)
    assert outcome.refusal is LandRefusal.CONFLICT and "app.txt" in outcome.reason
    assert git(repo, "rev-parse", "main") == before and git(repo, "status", "--porcelain") == ""
    assert not (tmp_path / "scratch").exists()


def test_land_merges_onto_a_target_that_moved_on_when_it_merges_cleanly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    _, head = task_branch(repo, "enact/task-1", {"feature.txt": "new\n"})
    moved = commit(repo, {"app.txt": "owner's two\n"}, "owner moved on")
    outcome = land(LandPlan(repo=repo, head=head, message="Land review 1"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor("test -f feature.txt && grep -q owner app.txt"), current=always)
    assert outcome.landed and not outcome.fast_forward
    assert git(repo, "rev-parse", "main") == outcome.revision
    assert git(repo, "log", "-1", "--format=%P", "main").split() == [moved, head]
    assert git(repo, "log", "-1", "--format=%s", "main") == "Land review 1"
    assert (repo / "feature.txt").exists()


def _merge_needed(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose main moved on after the task branched: landing it makes a merge commit."""
    repo = make_repo(tmp_path / "repo")
    _, head = task_branch(repo, "enact/task-7", {"feature.txt": "new\n"})
    commit(repo, {"app.txt": "owner's two\n"}, "owner moved on")
    return repo, head


def _land_merge(repo: Path, head: str, tmp_path: Path) -> tuple[str, str, str]:
    """Land ``head`` with review 3's message: (the outcome's merged_by and
    identity_note, asserted landed), and the merge commit's author, committer
    and Landed-by trailer."""
    outcome = land(LandPlan(repo=repo, head=head, message=merge_message(3, 7, "enact/task-7")),
                   scratch=tmp_path / "scratch", doctor=shell_doctor("true"), current=always)
    assert outcome.landed and not outcome.fast_forward, outcome.reason
    made = git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%(trailers:key=Landed-by,valueonly,separator=)")
    assert made.split("|")[0] == made.split("|")[1] == outcome.merged_by  # author and committer alike
    return outcome.merged_by, outcome.identity_note, made.split("|")[2]


def test_a_merge_commit_is_the_repositorys_configured_identity_with_a_landed_by_enact_trailer(
        tmp_path: Path) -> None:
    repo, head = _merge_needed(tmp_path)
    git(repo, "config", "user.name", "Ada Owner")
    git(repo, "config", "user.email", "ada@example.invalid")
    merged_by, note, trailer = _land_merge(repo, head, tmp_path)
    assert (merged_by, note) == ("Ada Owner <ada@example.invalid>", "")
    assert trailer == "enact (review 3, task 7)"
    assert git(repo, "log", "-1", "--format=%s") == "Land review 3 (task 7, enact/task-7)"


def test_a_merge_commit_takes_the_owners_global_identity_and_else_enacts_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No identity in the repository nor in the owner's global configuration:
    enact's, and the outcome says why. The global one, as the repository sees it."""
    owner_home = tmp_path / "owner-home"
    owner_home.mkdir()
    monkeypatch.setenv("HOME", str(owner_home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    repo, head = _merge_needed(tmp_path / "unset")
    merged_by, note, trailer = _land_merge(repo, head, tmp_path)
    assert merged_by == "enact <enact@localhost>" and trailer == "enact (review 3, task 7)"
    assert note == f"{repo} has no user.name and user.email configured: the merge commit is enact's"

    (owner_home / ".gitconfig").write_text("[user]\n\tname = Ada Global\n\temail = ada@global.invalid\n")
    repo, head = _merge_needed(tmp_path / "global")
    merged_by, note, _ = _land_merge(repo, head, tmp_path)
    assert (merged_by, note) == ("Ada Global <ada@global.invalid>", "")


def test_land_changes_nothing_once_the_daemon_is_fenced(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    before = git(repo, "rev-parse", "main")
    _, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    outcome = land(LandPlan(repo=repo, head=head, message="land"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor("true"), current=lambda: False)
    assert outcome.refusal is LandRefusal.FENCED
    assert git(repo, "rev-parse", "main") == before


def test_land_refuses_an_unknown_revision(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    outcome = land(LandPlan(repo=repo, head="0" * 40, message="land"), scratch=tmp_path / "scratch",
                   doctor=shell_doctor("true"), current=always)
    assert outcome.refusal is LandRefusal.GIT_FAILED and "0000000" in outcome.reason
