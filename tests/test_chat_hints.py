"""Hints speak the reader's language: what reaches a chat (the local channel
too, through ``enact send``) names chat commands and says a command's usage;
what reaches a shell names CLI commands. A real daemon; the test plays the
worker where a task has to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from task_repos import make_repo

from enact.messages.common import HUMAN_CLI, MODEL_ACTION
from enact.messages.tasks import Claim, Claimed, Finish
from enact.spoken import Audience, command
from enact.tasks.records import FailureClass, Outcome

from conftest import Daemon, DaemonFactory, wait_for

LOCKED = '[chat]\nallowed_conversations = ["local:owner"]\n'
NO_WORKERS = {"ENACT_DAEMON_WORKERS": "0"}
"""The test plays the worker (it claims and finishes the task itself)."""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")  # with a commit: an empty repository is refused


def start(daemons: DaemonFactory, config: str = "") -> Daemon:
    home = daemons.new_home()
    (home / "config.toml").write_text(LOCKED + config)
    return daemons.start(home, env=NO_WORKERS)


def said(daemon: Daemon, text: str) -> str:
    result = daemon.cli("send", "--conversation", "owner", "--json", text)
    reply: str = orjson.loads(result.stdout)["reply"]
    return reply


def notices(daemon: Daemon) -> list[dict[str, Any]]:
    return [turn for turn in daemon.cli_json("turns", "--json") if turn["message_id"].startswith("notice:")]


def test_a_command_is_said_with_a_slash_in_chat_and_as_enact_at_a_shell() -> None:
    show = command("review.show", "review show", 5)
    assert (show.to(Audience.CHAT), show.to(Audience.MODEL), show.to(Audience.CLI)) == \
        ("/review.show 5", "/review.show 5", "enact review show 5")
    # The local channel's origin is the owner's CLI, yet its user typed a chat command.
    asked = [("chat:telegram", True), (HUMAN_CLI, True), (MODEL_ACTION, True), (HUMAN_CLI, False), ("scheduler", False)]
    assert [Audience.of(origin, in_conversation=in_conversation) for origin, in_conversation in asked] == \
        [Audience.CHAT, Audience.CHAT, Audience.MODEL, Audience.CLI, Audience.CLI]


def test_a_chat_command_missing_its_argument_says_its_usage_in_chat_words(daemons: DaemonFactory) -> None:
    daemon = start(daemons)
    assert said(daemon, "/review.land") == "/review.land needs a review id — usage: /review.land ID"
    assert said(daemon, "/evolve.remove") == (
        "/evolve.remove needs a candidate id, then the reason — usage: /evolve.remove ID REASON")
    assert said(daemon, "/remember") == "/remember needs the fact — usage: /remember TEXT"


def test_help_in_chat_shows_how_each_command_is_typed(daemons: DaemonFactory) -> None:
    daemon = start(daemons)
    lines = said(daemon, "/help").splitlines()
    assert any(line.startswith("/review.land ID — ") for line in lines), lines
    assert any(line.startswith("/memory [TAG] — ") for line in lines), lines
    assert any(line.startswith("/status — ") for line in lines), lines
    assert not any("(text)" in line for line in lines)


def test_a_chat_command_that_takes_no_arguments_says_so(daemons: DaemonFactory) -> None:
    daemon = start(daemons)
    assert said(daemon, "/status now") == "/status takes no arguments"
    assert said(daemon, "/review.list all") == "/review.list takes no arguments"


def test_task_add_from_chat_without_a_repository_names_the_setting_and_the_cli_names_its_option(
        daemons: DaemonFactory) -> None:
    daemon = start(daemons)
    assert said(daemon, "/task.add fix the typo") == (
        "not queued: no repository named: set tasks.default_repo in config.toml")
    at_a_shell = daemon.cli("task", "add", "fix the typo")
    assert at_a_shell.stderr == "enact: no repository named: pass --repo PATH or set tasks.default_repo\n"


def finish(daemon: Daemon, **outcome: Any) -> None:
    claimed = daemon.request(Claim(worker_id="w1"))
    assert isinstance(claimed, Claimed), claimed
    daemon.request(Finish(task_id=claimed.task.id, worker_id="w1", attempt=claimed.task.attempt, **outcome))


def test_a_task_notice_names_its_review_as_a_chat_command(daemons: DaemonFactory, repo: Path) -> None:
    daemon = start(daemons, f'[tasks]\ndefault_repo = "{repo}"\n')
    assert said(daemon, "/task.add fix the typo").startswith("queued task 1 on ")
    finish(daemon, outcome=Outcome.SUCCEEDED, summary="fixed the typo", review_id="5")
    wait_for(lambda: notices(daemon), what="the task's outcome notice")
    [notice] = notices(daemon)
    assert notice["reply"] == "Task 1 succeeded: fixed the typo. Review 5: `/review.show 5`."


def test_a_paused_chat_task_is_told_to_resume_with_the_chat_command(daemons: DaemonFactory, repo: Path) -> None:
    daemon = start(daemons, f'[tasks]\ndefault_repo = "{repo}"\n')
    said(daemon, "/task.add fix the typo")
    finish(daemon, outcome=Outcome.FAILED, failure_class=FailureClass.AUTH,
           summary="the runtime refused its credentials")
    wait_for(lambda: notices(daemon), what="the task's pause notice")
    [notice] = notices(daemon)
    assert notice["reply"].startswith(
        "Task 1 paused: the runtime refused its credentials; run `/task.resume 1` once the runtime's "
        "credentials work again")


def test_a_task_notice_shows_in_turns_as_a_notice_not_as_an_empty_message(daemons: DaemonFactory,
                                                                            repo: Path) -> None:
    daemon = start(daemons, f'[tasks]\ndefault_repo = "{repo}"\n')
    said(daemon, "/task.add fix the typo")
    finish(daemon, outcome=Outcome.SUCCEEDED, summary="fixed the typo", review_id="5")
    wait_for(lambda: notices(daemon), what="the task's outcome notice")
    printed = daemon.cli("turns").stdout.splitlines()
    told = printed.index("  < Task 1 succeeded: fixed the typo. Review 5: `/review.show 5`.")
    assert printed[told - 1] == "  (notice from enact)"
    assert "  > " not in printed and "  >" not in printed
