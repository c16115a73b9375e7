"""Files the host reads from a repository or a worktree (AGENTS.md,
.enact.toml): only regular files inside the tree, bounded in size."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from task_repos import git, make_repo
from unprivileged import WHO, place_for

from enact import components, config
from enact.safe_files import UnsafeFile, read_inside
from enact.tasks import doctor
from enact.tasks.prompts import task_prompt
from enact.tasks.protected import Guards
from enact.tasks.records import Phase, Task, TaskState
from enact.tasks.repo_config import RepoConfigError
from enact.tasks.settings import TasksSettings
from enact.tasks.validation import Validation
from enact.tasks.worktrees import Worktree

from conftest import DaemonFactory, wait_for

SECRET = "123456:telegram-token-that-must-stay-home"


def test_a_regular_file_inside_the_tree_is_read_and_a_missing_one_is_none(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("hello")
    assert read_inside(tmp_path, "docs/notes.md", limit=100) == "hello"
    assert read_inside(tmp_path, "missing.md", limit=100) is None


def test_a_link_that_stays_inside_the_tree_is_followed(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("shared notes")
    (tmp_path / "AGENTS.md").symlink_to("CLAUDE.md")
    assert read_inside(tmp_path, "AGENTS.md", limit=100) == "shared notes"


def test_a_link_or_a_linked_directory_leading_outside_the_tree_is_refused(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (outside / "token").write_text(SECRET)
    (tree / "AGENTS.md").symlink_to(outside / "token")
    (tree / "docs").symlink_to(outside)
    for relative in ("AGENTS.md", "docs/token", "../outside/token", str(outside / "token")):
        with pytest.raises(UnsafeFile, match="leads outside"):
            read_inside(tree, relative, limit=100)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_inside(tmp_path, "AGENTS.md", limit=100)
        except UnsafeFile as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO hung"
    assert "not a regular file" in str(outcome[0])


def test_a_file_over_the_limit_or_a_hard_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_bytes(b"x" * 101)
    with pytest.raises(UnsafeFile, match="larger than 100 bytes"):
        read_inside(tmp_path, "big.md", limit=100)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "token").write_text(SECRET)
    os.link(tmp_path / "other" / "token", tmp_path / "linked.md")
    with pytest.raises(UnsafeFile, match="hard link"):
        read_inside(tmp_path / "other", "token", limit=100)


def test_a_repository_config_linked_outside_is_refused_in_one_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", doctor=None)
    (tmp_path / "elsewhere.toml").write_text('[doctor]\ncommand = "cat /etc/shadow"\n')
    (repo / ".enact.toml").symlink_to(tmp_path / "elsewhere.toml")
    git(repo, "add", ".enact.toml")
    git(repo, "commit", "-q", "-m", "link the config")
    settings = config.load(tmp_path / "home", environ={}, settings=components.load().settings()).typed(TasksSettings)
    with pytest.raises(RepoConfigError) as refused:
        doctor.plan_at(repo, "HEAD", settings=settings)
    assert str(refused.value) == ".enact.toml at HEAD is not a regular file"


def _task() -> Task:
    return Task(id=1, request="fix it", brief="", repo="/r", origin="human-cli", idempotency_key="k", repairs=0,
                deadline_s=60, attempt=1, parent=None, state=TaskState.RUNNING, phase=Phase.NONE, repair=0,
                confined=None, review_id="", worktree="", conversation=None, worker="", lease_expires_at=None,
                cancel_requested=False, not_before=0.0, failure_class=None, summary="", created_at=0.0,
                updated_at=0.0, started_at=None, finished_at=None)


def _prompt(tree: Path) -> str:
    worktree = Worktree(task_id=1, path=tree, repo=tree, branch="enact/task-1", base_branch="main", base="0" * 40,
                        git_dir=tree / ".git", objects=tree / ".git" / "objects")
    validation = Validation(home=tree, settings=None, plan=doctor.DoctorPlan(command="", timeout_s=1, source="none"),
                            guards=Guards(repo=tree, base="0" * 40, patterns=("tests/",)))
    return task_prompt(_task(), worktree, validation)


def test_an_oversized_or_fifo_notes_file_is_left_out_of_the_prompt_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"y" * (1 << 20))
    prompt = _prompt(tmp_path)
    assert "yyyy" not in prompt
    assert "Repository notes (AGENTS.md):\n(none: AGENTS.md is not read: it is larger than" in prompt
    (tmp_path / "AGENTS.md").unlink()
    os.mkfifo(tmp_path / "AGENTS.md")
    assert "(none: AGENTS.md is not read: it is not a regular file)" in _prompt(tmp_path)


def _transcript(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.mark.parametrize("who", WHO)
def test_a_committed_agents_md_linked_to_a_secret_never_reaches_the_model(daemons: DaemonFactory,
                                                                          tmp_path: Path, who: str) -> None:
    with place_for(who, daemons, tmp_path) as place:
        token = place.base / "telegram.token"
        token.write_text(SECRET)
        repo = make_repo(place.base / "repo", doctor=None)
        (repo / "AGENTS.md").symlink_to(token)
        git(repo, "add", "AGENTS.md")
        git(repo, "commit", "-q", "-m", "notes")
        calls = place.base / "transcript.jsonl"
        (place.home / "scripted.toml").write_text('[[rule]]\npurpose = "task"\nmatch = "look"\n'
                                                  'run = ["true"]\nreply = "nothing to do"\n')
        daemon = place.start(daemons, {"ENACT_TASKS_CONFINEMENT": "off", "ENACT_SCRIPTED_TRANSCRIPT": str(calls)})
        added = daemon.cli_json("task", "add", "--repo", str(repo), "--json", "look around")
        wait_for(lambda: any(call["session_key"].startswith("task") for call in _transcript(calls)),
                 timeout=60, what="the task's model call")
        prompts = [call["prompt"] for call in _transcript(calls)]
    assert not any(SECRET in prompt for prompt in prompts)
    [task_prompt_sent] = [p for p in prompts if f"task {added['id']}" in p]
    assert "(none: AGENTS.md is not read: it leads outside" in task_prompt_sent
