"""The bundles a remote attempt travels in, and the daemon's checks of the
change bundle a node sends back, on real git repositories and without Ray
(``enact.tasks.ray_bundles``, ``enact.tasks.remote_attempt``)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from task_repos import git, make_repo

from enact.config import Config
from enact.messages.common import RefusalCode, Refused
from enact.messages.reviews import List as ListReviews
from enact.messages.reviews import Open
from enact.messages.tasks import Claimed, Heartbeat
from enact.tasks.protected import Guards
from enact.tasks.ray_bundles import BundleRefused, bundle_base, bundle_change, check_change, clone_base, take_change
from enact.tasks.records import Phase, Task, TaskState, task_log_path
from enact.tasks.remote_attempt import ChangeForReview, Relay
from enact.tasks.remote_mailbox import ATTEMPT_OVER, Answer, Envelope, Mailbox
from enact.tasks.settings import SETTINGS, TasksSettings

PROTECTED = ("tests/", ".enact.toml")


def node_change(repo: Path, tmp_path: Path, edits: dict[str, str]) -> tuple[str, bytes, str]:
    """What an honest node does: clone the base bundle, commit ``edits`` on a
    task branch, bundle the commits since the base. (base, change bundle, its head)"""
    _, base = bundle_base(repo, tmp_path / "scratch")
    clone = clone_base(base, tmp_path / "node" / "repo")
    git(clone, "checkout", "-q", "-b", "task")
    for name, text in edits.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(text)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "the task's change")
    change = bundle_change(clone, "task", base.base)
    assert change is not None
    return base.base, change, git(clone, "rev-parse", "HEAD").strip()


def guards(repo: Path, base: str, allowed: tuple[str, ...] = ()) -> Guards:
    return Guards(repo=repo, base=base, patterns=PROTECTED, allowed=allowed)


def test_a_change_bundle_from_the_base_becomes_the_task_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base, change, head = node_change(repo, tmp_path, {"lib.py": "def answer():\n    return 43\n"})
    home = tmp_path / "home"
    taken = take_change(change, home=home, task_id=7, repo=repo, base=base, guards=guards(repo, base),
                        scratch=tmp_path / "scratch")
    assert taken.changed == ("lib.py",) and taken.head == head
    assert git(repo, "rev-parse", f"refs/heads/{taken.branch}").strip() == taken.head
    assert "return 43" in git(repo, "show", f"{taken.branch}:lib.py")
    assert "lib.py" in taken.diffstat
    assert git(repo, "rev-parse", "HEAD").strip() == base  # the owner's branch is untouched


def test_a_change_bundle_that_touches_tests_is_refused_and_changes_no_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base, change, _head = node_change(repo, tmp_path, {"tests/test_lib.py": "def test_answer():\n    pass\n"})
    before = git(repo, "for-each-ref")
    with pytest.raises(BundleRefused, match=r"protected paths .*tests/test_lib.py"):
        take_change(change, home=tmp_path / "home", task_id=7, repo=repo, base=base, guards=guards(repo, base),
                    scratch=tmp_path / "scratch")
    assert git(repo, "for-each-ref") == before
    # The owner's unlock for the task lets it through.
    _, changed = check_change(change, repo=repo, base=base, guards=guards(repo, base, allowed=("tests/",)),
                                scratch=tmp_path / "scratch")
    assert changed == ("tests/test_lib.py",)


def test_a_change_to_the_test_sections_of_pyproject_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"pyproject.toml": "[tool.pytest.ini_options]\naddopts = \"-q\"\n"})
    edit = {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = \"-k x\"\n"}
    base, change, _head = node_change(repo, tmp_path, edit)
    with pytest.raises(BundleRefused, match=r"pyproject\.toml"):
        check_change(change, repo=repo, base=base, guards=guards(repo, base), scratch=tmp_path / "scratch")


def test_a_change_bundle_that_does_not_descend_from_the_base_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    other = make_repo(tmp_path / "other", files={"extra.py": "x = 1\n"})
    _, change, _ = node_change(other, tmp_path, {"lib.py": "changed\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(BundleRefused, match="does not descend from the base"):
        check_change(change, repo=repo, base=base, guards=guards(repo, base), scratch=tmp_path / "scratch")


def test_a_change_bundle_whose_head_is_not_the_one_the_node_named_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base, change, _head = node_change(repo, tmp_path, {"lib.py": "changed\n"})
    with pytest.raises(BundleRefused, match="is not the commit the node named"):
        check_change(change, repo=repo, base=base, guards=guards(repo, base), scratch=tmp_path / "scratch",
                     head="0" * 40)
    with pytest.raises(BundleRefused, match="not a git bundle"):
        check_change(b"not a bundle", repo=repo, base=base, guards=guards(repo, base), scratch=tmp_path / "s")


def test_the_mailbox_hands_each_answer_to_its_ask_and_each_attempt_only_its_own() -> None:
    mailbox = Mailbox()
    mailbox.open("a")
    mailbox.open("b")
    answers: dict[tuple[str, int], Answer | None] = {}

    def ask(key: str, seq: int) -> None:
        answers[key, seq] = mailbox.ask(Envelope(key=key, seq=seq, target="tasks", message=seq), wait_s=10)

    askers = [threading.Thread(target=ask, args=(key, seq)) for key in ("a", "b") for seq in (1, 2)]
    for thread in askers:
        thread.start()
    taken: dict[str, list[Envelope]] = {"a": [], "b": []}
    while len(taken["a"]) + len(taken["b"]) < 4:
        for key in taken:
            taken[key] += mailbox.take(key, wait_s=0.05)
    assert {key: sorted((item.key, item.seq) for item in items) for key, items in taken.items()} == {
        "a": [("a", 1), ("a", 2)], "b": [("b", 1), ("b", 2)]}
    for key, items in taken.items():
        for envelope in items:
            mailbox.answer(key, envelope.seq, Answer(reply=f"{key}{envelope.message}"))
    for thread in askers:
        thread.join(10)
    assert {asked: answer.reply if answer else None for asked, answer in answers.items()} == {
        ("a", 1): "a1", ("a", 2): "a2", ("b", 1): "b1", ("b", 2): "b2"}
    assert mailbox.held() == {"a": (0, 0), "b": (0, 0)}
    assert mailbox.ask(Envelope(key="a", seq=3, target="tasks", message=3), wait_s=0.01) is None  # nobody answered
    mailbox.answer("a", 3, Answer(reply="too late"))  # its ask gave up: not kept
    assert mailbox.held() == {"a": (1, 0), "b": (0, 0)}


def test_a_closed_attempt_leaves_nothing_in_the_mailbox_and_its_node_is_told_at_once() -> None:
    mailbox = Mailbox()
    mailbox.open("ended")
    mailbox.open("running")
    waiting: list[Answer | None] = []
    asker = threading.Thread(target=lambda: waiting.append(
        mailbox.ask(Envelope(key="ended", seq=1, target="tasks", message="beat"), wait_s=30)))
    asker.start()
    while mailbox.held()["ended"] == (0, 0):
        mailbox.take("running", wait_s=0.01)  # (nothing: another attempt's message is not this one's)
    mailbox.ask(Envelope(key="ended", seq=2, target="tasks", message="late"), wait_s=0)
    mailbox.close("ended")
    asker.join(10)
    assert waiting == [Answer(unavailable=ATTEMPT_OVER)]  # woken by the close, not by its 30 s
    assert mailbox.held() == {"running": (0, 0)}
    # Its node, still asking, is answered at once; nothing it sends or is sent is kept.
    assert mailbox.ask(Envelope(key="ended", seq=3, target="tasks", message="x"), wait_s=30) == Answer(
        unavailable=ATTEMPT_OVER)
    mailbox.answer("ended", 1, Answer(reply="after the end"))
    assert mailbox.take("ended", wait_s=0) == []
    assert mailbox.held() == {"running": (0, 0)}


def relay(tmp_path: Path, asked: list[tuple[str, Any]], *, may_write: bool = True) -> Relay:
    repo = make_repo(tmp_path / "repo")
    task = Task(id=5, request="mark it", brief="", repo=str(repo), origin="human-cli", idempotency_key="k",
                repairs=0, deadline_s=60, attempt=2, parent=None, state=TaskState.RUNNING, phase=Phase.NONE,
                repair=0, confined=None, review_id="", worktree="", conversation=None, worker="worker:0@g1",
                lease_expires_at=None, cancel_requested=False, not_before=0.0, failure_class=None, summary="",
                created_at=0.0, updated_at=0.0, started_at=None, finished_at=None)
    values = {setting.key: setting.default for setting in SETTINGS}
    settings = dataclasses.replace(TasksSettings.from_config(Config(home=tmp_path, values=values)),
                                   protected_paths=PROTECTED)

    def ask(target: str, message: Any) -> Any:
        asked.append((target, message))
        return Refused(reason="recorded", code=RefusalCode.INVALID)

    return Relay(Claimed(task=task, lease_expires_at=0.0, lease_ttl_s=60.0), worker_id="worker:0@g1",
                 home=tmp_path / "home", settings=settings, ask=ask, repo=repo,
                 base=git(repo, "rev-parse", "HEAD").strip(), may_write=lambda: may_write)


def test_the_relay_asks_only_for_its_own_attempt(tmp_path: Path) -> None:
    asked: list[tuple[str, Any]] = []
    remote = relay(tmp_path, asked)
    ours = Heartbeat(task_id=5, worker_id="worker:0@g1", attempt=2)
    assert remote.handle(Envelope(key="k", seq=1, target="tasks", message=ours, log=b"a line\n")).reply is not None
    for stranger in (Heartbeat(task_id=6, worker_id="worker:0@g1", attempt=2),
                     Heartbeat(task_id=5, worker_id="worker:1@g1", attempt=2),
                     Heartbeat(task_id=5, worker_id="worker:0@g1", attempt=1)):
        answer = remote.handle(Envelope(key="k", seq=2, target="tasks", message=stranger))
        assert "may not send Heartbeat" in answer.unavailable
    assert "skills" in remote.handle(Envelope(key="k", seq=3, target="skills", message=ListReviews())).unavailable
    listed = Envelope(key="k", seq=4, target="reviews", message=ListReviews(task_id=5))
    assert remote.handle(listed, cancel="stop").cancel == "stop"
    assert asked == [("tasks", ours), ("reviews", ListReviews(task_id=5))]
    assert task_log_path(tmp_path / "home", 5).read_text() == "a line\n"  # the node's log, appended


def test_the_relay_refuses_a_forged_change_and_a_fenced_daemon_takes_none(tmp_path: Path) -> None:
    asked: list[tuple[str, Any]] = []
    remote = relay(tmp_path, asked)
    repo = tmp_path / "repo"
    base, change, head = node_change(repo, tmp_path / "node", {"tests/test_lib.py": "def test_answer():\n    pass\n"})
    forged = Envelope(key="k", seq=1, target="reviews", message=ChangeForReview(
        open=Open(task_id=5, repo="/node/repo", branch="task", base=base, head=head), bundle=change))
    answer = remote.handle(forged)
    assert isinstance(answer.reply, Refused) and "protected paths" in answer.reply.reason
    assert asked == []  # no review was asked for
    fenced = relay(tmp_path / "fenced", asked, may_write=False)
    answer = fenced.handle(forged)
    assert "fenced" in answer.unavailable and asked == []


def test_the_ray_backend_refuses_a_resource_not_of_the_form_name_amount(tmp_path: Path) -> None:
    from enact.components import ComponentError
    from enact.config import SETTINGS as CORE_SETTINGS
    from enact.config import load
    from enact.tasks.component import TasksComponent

    def configured(resources: str) -> Config:
        return load(tmp_path, environ={"ENACT_TASKS_BACKEND": "ray", "ENACT_TASKS_RAY_RESOURCES": resources},
                    settings=(*CORE_SETTINGS, *SETTINGS))

    TasksComponent().validate_environment(configured("repo-a=1,gpu=0.5"))
    with pytest.raises(ComponentError, match=r"NAME=AMOUNT.*'gpu'"):
        TasksComponent().validate_environment(configured("repo-a=1,gpu"))


def test_a_local_daemon_and_the_cli_never_import_ray() -> None:
    import subprocess
    import sys

    code = ("import sys, enact.cli, enact.daemon, enact.tasks.workers_actor, enact.tasks.remote_attempt; "
            "print('ray' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_a_nodes_runtime_calls_are_admitted_and_counted_by_the_daemon(tmp_path: Path) -> None:
    from enact.cancellation import CancellationToken
    from enact.runtime import RuntimeOverBudget, RuntimeRequest, Usage
    from enact.runtime.scripted import ScriptedRuntime
    from enact.tasks.remote_attempt import METER, MeterCall, MeteredOnTheDaemon

    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\npurpose = "task"\nmatch = "."\nreply = "done"\n')
    told: list[MeterCall] = []
    verdict: list[tuple[str, str] | None] = [("over_budget", "the task budget of 10 tokens is spent")]

    def ask(target: str, message: Any) -> Any:
        assert target == METER
        told.append(message)
        return verdict[0] if not message.outcome else None

    runtime = MeteredOnTheDaemon(ScriptedRuntime(rules), ask)
    request = RuntimeRequest(session_key="task:1", prompt="go", purpose="task", cancel=CancellationToken(),
                             timeout_s=10)
    with pytest.raises(RuntimeOverBudget, match="budget of 10 tokens"):
        runtime.invoke(request)
    assert [call.outcome for call in told] == [""]  # refused before the call: nothing to count
    verdict[0] = None
    assert runtime.invoke(request).text.startswith("(scripted runtime)")  # the call was made
    assert [(call.purpose, call.outcome) for call in told[1:]] == [("task", ""), ("task", "ok")]
    assert isinstance(told[-1].usage, Usage)
