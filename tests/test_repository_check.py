"""One check of a task's repository at every entry point, in the same words
(``enact.tasks.repositories``): ``task add``, ``backlog add`` and
``promote``, ``cron add``, ``evolve approve``, their chat commands and the
wire requests. ``--repo .`` from a subdirectory names the repository's top
level; a missing path, a directory outside git, an empty repository and a
detached HEAD are refused where the work enters, never later on a worker.
An approved candidate works on the checkout enact runs from unless
another is named. Real git repositories and a real daemon (no workers: a
queued task stays queued); cron's due times on a manual clock."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from actor_system import NO_WORKERS, ActorSystem, running_actors
from task_repos import git, make_repo

from enact.clock import ManualClock
from enact.evolution.candidates import Candidate, CandidateState, Draft
from enact.evolution.curator_actor import CANDIDATES
from enact.evolution.curator_actor import DATABASES as CURATOR_DATABASES
from enact.messages.commands import Receipt, Run
from enact.messages.common import Refused
from enact.messages.curator import Approve
from enact.messages.scheduler import AddItem, AddSchedule, ListSchedules, Promote
from enact.messages.tasks import List, Submit, Submitted
from enact.storage import RecordTable, Storage
from enact.tasks import repositories
from enact.tasks.repositories import UnusableRepository, checkout, checkout_of_package, usable

from conftest import Daemon, DaemonFactory

RULES = {  # what each kind of path is refused with
    "missing": "does not exist",
    "plain": "is not a git repository",
    "empty": "has no commit yet",
    "detached": "has a detached HEAD",
}
CANDIDATES_PLANTED = 8


def make_repos(base: Path) -> dict[str, Path]:
    good = make_repo(base / "good")
    (base / "plain").mkdir()
    empty = base / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    detached = make_repo(base / "detached")
    git(detached, "checkout", "-q", "--detach")
    return {"good": good, "missing": base / "missing", "plain": base / "plain", "empty": empty,
            "detached": detached}


# -- the check itself -------------------------------------------------------


def test_a_subdirectory_of_a_repository_stands_for_its_top_level(tmp_path: Path) -> None:
    repos = make_repos(tmp_path)
    found = checkout(repos["good"] / "tests")
    assert found.top == repos["good"] and found.branch == "main"
    assert found.head == git(repos["good"], "rev-parse", "HEAD").strip()
    assert usable(str(repos["good"] / "tests")) == str(repos["good"])


@pytest.mark.parametrize("kind", RULES)
def test_each_unusable_repository_is_refused_in_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    repos = make_repos(tmp_path)
    with pytest.raises(UnusableRepository) as raised:
        checkout(repos[kind])
    said = str(raised.value)
    assert said == f"{repos[kind]} {RULES[kind]}" or said.startswith(f"{repos[kind]} {RULES[kind]}:"), said
    refused = usable(str(repos[kind]))
    assert isinstance(refused, Refused) and refused.reason == said and refused.code == "invalid"


def test_a_relative_path_and_a_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UnusableRepository, match="is not an absolute path"):
        checkout("repo")
    (tmp_path / "file").write_text("")
    with pytest.raises(UnusableRepository, match="is not a directory"):
        checkout(tmp_path / "file")


def test_tasks_default_repo_is_checked_like_a_named_one_by_the_queue_and_cron(tmp_path: Path) -> None:
    repos = make_repos(tmp_path)
    environ = {**NO_WORKERS, "ENACT_TASKS_DEFAULT_REPO": str(repos["empty"])}
    with running_actors(tmp_path / "home", ManualClock(), environ) as system:
        for message in (Submit(request="x", origin="human-cli"), AddSchedule(spec="every 1h", request="x")):
            refused = system.ask("tasks" if isinstance(message, Submit) else "scheduler", message)
            assert isinstance(refused, Refused) and refused.reason == f"{repos['empty']} {RULES['empty']}: " \
                "commit on main first", refused
        assert system.ask("tasks", List(limit=10)).tasks == ()


def test_enacts_own_checkout_is_the_repository_that_tracks_its_package(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "checkout", files={"pkg/__init__.py": ""})
    assert checkout_of_package(repo / "pkg") == repo
    # A package below a repository that does not track it (a virtual
    # environment inside a checkout) or outside any: not running from one.
    (repo / "venv" / "pkg").mkdir(parents=True)
    (repo / "venv" / "pkg" / "__init__.py").write_text("")
    assert checkout_of_package(repo / "venv" / "pkg") is None
    (tmp_path / "site" / "pkg").mkdir(parents=True)
    assert checkout_of_package(tmp_path / "site" / "pkg") is None
    import enact

    assert repositories.own_checkout() == str(checkout_of_package(Path(enact.__file__).resolve().parent) or "")


# -- a real daemon: every entry point -----------------------------------------


def plant_candidates(home: Path, count: int) -> list[str]:
    """Active candidates in a stopped daemon's home (no signals: a brainstorm's)."""
    storage = Storage(home / "state")
    ids = [f"cand-{n:012x}" for n in range(1, count + 1)]
    try:
        store = storage.grant("curator", CURATOR_DATABASES)
        table = RecordTable(store.table(CANDIDATES), Candidate)
        for cid in ids:
            draft = Draft(source="brainstorm", evidence_ids=(), title=f"idea {cid}", rationale="r",
                          proposed_change="c", expected_benefit="b", risk="k", test_plan="t")
            stored = Candidate(id=cid, draft=draft, state=CandidateState.ACTIVE, score=0.5, created_at=1.0,
                               updated_at=1.0)
            store.write(lambda txn, key=cid, value=stored: table.put(txn, key.encode(), value), fenced=False)
    finally:
        storage.close()
    return ids


class Setup:
    def __init__(self, daemon: Daemon, repos: dict[str, Path], candidates: list[str]) -> None:
        self.daemon = daemon
        self.repos = repos
        self._candidates = iter(candidates)
        self.refused_candidate = next(self._candidates)
        """Stays active: every approval of it in these tests is refused."""

    def candidate(self) -> str:
        return next(self._candidates)

    def task(self, task_id: int) -> dict[str, Any]:
        shown: dict[str, Any] = self.daemon.cli_json("task", "show", str(task_id), "--json")
        return shown

    def task_count(self) -> int:
        return len(self.daemon.cli_json("task", "list", "--limit", "1000", "--json"))

    def item(self) -> int:
        added: dict[str, Any] = self.daemon.cli_json("backlog", "add", "some day", "--json")
        return int(added["id"])


@pytest.fixture(scope="module")
def setup(module_daemons: DaemonFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    repos = make_repos(tmp_path_factory.mktemp("repos"))
    home = module_daemons.new_home()
    (home / "config.toml").write_text('[chat]\nallowed_conversations = ["local:owner"]\n')
    first = module_daemons.start(home, env=NO_WORKERS)
    first.terminate()
    candidates = plant_candidates(home, CANDIDATES_PLANTED)
    yield Setup(module_daemons.start(home, env=NO_WORKERS), repos, candidates)


RepoOf = Callable[[dict[str, Any]], str]
"""Where an entry point's JSON answer says the work is bound."""


def _task_add(s: Setup, repo: str, cwd: Path | None) -> tuple[Any, RepoOf]:
    return s.daemon.cli("task", "add", "--repo", repo, "--json", "fix it", cwd=cwd), lambda out: out["repo"]


def _backlog_add(s: Setup, repo: str, cwd: Path | None) -> tuple[Any, RepoOf]:
    return s.daemon.cli("backlog", "add", "fix it", "--repo", repo, "--json", cwd=cwd), lambda out: out["repo"]


def _backlog_promote(s: Setup, repo: str, cwd: Path | None) -> tuple[Any, RepoOf]:
    result = s.daemon.cli("backlog", "promote", str(s.item()), "--repo", repo, "--json", cwd=cwd)
    return result, lambda out: s.task(out["task_id"])["repo"]


def _cron_add(s: Setup, repo: str, cwd: Path | None) -> tuple[Any, RepoOf]:
    return s.daemon.cli("cron", "add", "every 1h", "fix it", "--repo", repo, "--json", cwd=cwd), \
        lambda out: out["repo"]


def _evolve_approve(s: Setup, repo: str, cwd: Path | None) -> tuple[Any, RepoOf]:
    # A refusal leaves the candidate active: one serves every refused case.
    cid = s.refused_candidate if repo != "." else s.candidate()
    result = s.daemon.cli("evolve", "approve", cid, "--repo", repo, "--json", cwd=cwd)
    return result, lambda out: s.task(out["task_id"])["repo"]


CLI_ENTRY_POINTS = {"task add": _task_add, "backlog add": _backlog_add, "backlog promote": _backlog_promote,
                    "cron add": _cron_add, "evolve approve": _evolve_approve}


@pytest.mark.parametrize("entry", CLI_ENTRY_POINTS)
def test_repo_dot_from_a_subdirectory_names_the_repositorys_top_level_at_every_cli_entry_point(
        setup: Setup, entry: str) -> None:
    result, repo_of = CLI_ENTRY_POINTS[entry](setup, ".", setup.repos["good"] / "tests")
    assert result.returncode == 0, result.stderr
    assert repo_of(orjson.loads(result.stdout)) == str(setup.repos["good"])


@pytest.mark.parametrize("kind", RULES)
@pytest.mark.parametrize("entry", CLI_ENTRY_POINTS)
def test_an_unusable_repository_is_refused_in_the_same_words_at_every_cli_entry_point(
        setup: Setup, entry: str, kind: str) -> None:
    tasks_before = setup.task_count()
    result, _ = CLI_ENTRY_POINTS[entry](setup, str(setup.repos[kind]), None)
    refused = orjson.loads(result.stdout)
    assert result.returncode == 2 and (refused["status"], refused["code"]) == ("refused", "invalid"), result
    assert f"{setup.repos[kind]} {RULES[kind]}" in refused["error"]
    assert setup.task_count() == tasks_before


def test_cron_and_backlog_store_nothing_they_refused(setup: Setup) -> None:
    schedules = setup.daemon.cli_json("cron", "list", "--json")
    items = setup.daemon.cli_json("backlog", "list", "--json")
    assert all(entry["repo"] == str(setup.repos["good"]) for entry in schedules), schedules
    assert all(item["repo"] in ("", str(setup.repos["good"])) for item in items), items


def test_an_approved_candidate_works_on_enacts_own_checkout_wherever_the_cli_stands(setup: Setup) -> None:
    expected = usable(repositories.own_checkout())
    elsewhere = setup.repos["good"]  # a repository of its own: not the one that counts
    result = setup.daemon.cli("evolve", "approve", setup.candidate(), "--json", cwd=elsewhere)
    if isinstance(expected, Refused):  # this checkout itself cannot take tasks (a detached CI checkout)
        assert result.returncode == 2 and expected.reason in orjson.loads(result.stdout)["error"]
        return
    assert result.returncode == 0, result.stderr
    assert setup.task(orjson.loads(result.stdout)["task_id"])["repo"] == expected


def chat(setup: Setup, text: str) -> str:
    sent = setup.daemon.cli_json("send", "--conversation", "owner", "--json", text)
    reply: str = sent["reply"]
    return reply


def run_command(setup: Setup, name: str, args: dict[str, Any]) -> Receipt:
    receipt = setup.daemon.request(Run(name=name, args=args))
    assert isinstance(receipt, Receipt)
    return receipt


@pytest.mark.parametrize("kind", RULES)
def test_chat_commands_refuse_an_unusable_repository_in_the_same_words(setup: Setup, kind: str) -> None:
    path, words = setup.repos[kind], f"{setup.repos[kind]} {RULES[kind]}"
    assert words in chat(setup, f"/backlog.promote {setup.item()} {path}")
    assert words in chat(setup, f"/evolve.approve {setup.refused_candidate} {path}")
    for name, args in (("task.add", {"text": "fix it", "repo": str(path)}),
                       ("backlog.promote", {"text": str(setup.item()), "repo": str(path)}),
                       ("evolve.approve", {"text": setup.refused_candidate, "repo": str(path)})):
        receipt = run_command(setup, name, args)
        assert not receipt.ok and words in receipt.text, (name, receipt)


def test_chat_commands_take_a_repository_and_a_relative_one_is_refused(setup: Setup) -> None:
    good = setup.repos["good"]
    promoted = chat(setup, f"/backlog.promote {setup.item()} {good / 'tests'}")
    assert promoted.startswith("backlog item") and "is task" in promoted, promoted
    task_id = int(promoted.rsplit(" ", 1)[1])
    assert setup.task(task_id)["repo"] == str(good)
    approved = chat(setup, f"/evolve.approve {setup.candidate()} {good}")
    assert "approved: task" in approved, approved
    assert "is not an absolute path" in chat(setup, f"/backlog.promote {setup.item()} good")


@pytest.mark.parametrize("kind", RULES)
def test_wire_requests_are_checked_by_the_daemon_itself(setup: Setup, kind: str) -> None:
    path, words = str(setup.repos[kind]), f"{setup.repos[kind]} {RULES[kind]}"
    for message in (Submit(request="fix it", repo=path, origin=""), AddItem(text="x", repo=path),
                    AddSchedule(spec="every 1h", request="x", repo=path),
                    Promote(item_id=setup.item(), repo=path),
                    Approve(candidate_id=setup.refused_candidate, repo=path)):
        reply = setup.daemon.request(message)
        assert isinstance(reply, Refused) and words in reply.reason, (message, reply)
    relative = setup.daemon.request(Submit(request="fix it", repo="good", origin=""))
    assert isinstance(relative, Refused) and "is not an absolute path" in relative.reason


def test_without_a_repository_or_a_default_backlog_promote_and_cron_add_name_both(setup: Setup) -> None:
    for args in (("backlog", "promote", str(setup.item())), ("cron", "add", "every 1h", "x")):
        result = setup.daemon.cli(*args)
        assert result.returncode == 2 and "pass --repo PATH or set tasks.default_repo" in result.stderr, result
        assert len(result.stderr.strip().splitlines()) == 1


# -- cron: a repository that goes bad after the schedule was added --------------


def tick(system: ActorSystem, seconds: int = 1) -> None:
    for _ in range(seconds):
        system.clock.advance(1)
        system.ask("scheduler", ListSchedules())


def test_a_schedule_whose_repository_went_away_queues_nothing_says_so_once_and_resumes_when_it_is_back(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    repo = make_repo(tmp_path / "repo")
    environ = {**NO_WORKERS, "ENACT_SCHEDULER_TICK_S": "1"}
    with running_actors(tmp_path / "home", ManualClock(), environ) as system:
        system.ask("scheduler", AddSchedule(spec="every 1s", request="tidy", repo=str(repo / "tests")))
        shutil.rmtree(repo)
        with caplog.at_level(logging.DEBUG, logger="enact.tasks.scheduler_actor"):
            tick(system, 20)
        assert system.ask("tasks", List(limit=100)).tasks == ()
        warned = [r for r in caplog.records if r.levelno == logging.WARNING and "refused" in r.getMessage()]
        assert len(warned) == 1 and f"{repo} does not exist" in warned[0].getMessage()
        [entry] = system.ask("scheduler", ListSchedules()).schedules
        assert entry.schedule.refused == f"{repo} does not exist"
        make_repo(repo)
        tick(system, 1)
        [task] = system.ask("tasks", List(limit=100)).tasks
        assert task.repo == str(repo)
        [entry] = system.ask("scheduler", ListSchedules()).schedules
        assert entry.schedule.refused == "" and entry.schedule.last_task == task.id


def test_a_key_already_used_finds_its_task_after_the_repository_went_away(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with running_actors(tmp_path / "home", ManualClock()) as system:
        first = system.ask("tasks", Submit(request="x", repo=str(repo), origin="human-cli", idempotency_key="k"))
        shutil.rmtree(repo)
        again = system.ask("tasks", Submit(request="x", repo=str(repo), origin="human-cli", idempotency_key="k"))
        assert isinstance(first, Submitted) and isinstance(again, Submitted)
        assert again.existing and again.task.id == first.task.id
