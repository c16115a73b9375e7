"""Tasks from chat: the model action ``task.add`` with a brief from the
conversation's own session, a clarification question that stops it, one task
per chat event however often it is delivered, and the task chat commands."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from task_repos import make_repo

from enact.tasks.from_chat import BRIEF_MARKER, Brief, Question, parse_brief, task_key

from conftest import Daemon, DaemonFactory

LOCKED = '[chat]\nallowed_conversations = ["local:owner"]\n'

NO_WORKERS = {"ENACT_DAEMON_WORKERS": "0"}
"""The test plays the worker (it claims and finishes the task itself)."""


def rules(repo: Path) -> str:
    marker = BRIEF_MARKER.replace("[", "\\\\[").replace("]", "\\\\]")
    return textwrap.dedent(f"""
        [[rule]]
        match = "^{marker} .*unclear"
        reply = '{{"question": "Which file holds the typo?"}}'

        [[rule]]
        match = "^{marker}"
        reply = '{{"brief": "Outcome: the README typo is fixed. Ruled out: other edits."}}'

        [[rule]]
        match = "please (fix .+)"
        action = "task.add"
        args = {{text = "fix the README typo", repo = "{repo}"}}
        then = "{{receipt}}"

        [[rule]]
        match = "something unclear"
        action = "task.add"
        args = {{text = "something unclear", repo = "{repo}"}}
        then = "{{receipt}}"
        """)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def chat(daemons: DaemonFactory, repo: Path) -> Daemon:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(rules(repo))
    (home / "config.toml").write_text(LOCKED)
    return daemons.start(home, env=NO_WORKERS)


def send(daemon: Daemon, *args: str) -> dict[str, Any]:
    result = daemon.cli("send", "--conversation", "owner", "--json", *args)
    outcome: dict[str, Any] = orjson.loads(result.stdout)
    return outcome


def test_a_model_action_queues_a_task_with_the_sessions_brief(chat: Daemon, repo: Path) -> None:
    outcome = send(chat, "please fix the typo in the README")
    assert "queued task 1" in outcome["reply"]
    shown = chat.cli_json("task", "show", "1", "--json")
    assert shown["request"] == "fix the README typo" and shown["repo"] == str(repo)
    assert shown["brief"] == "Outcome: the README typo is fixed. Ruled out: other edits."
    assert shown["origin"] == "model-action"
    assert shown["conversation"] == {"channel": "local", "conversation": "owner", "session_key": "local:owner"}


def test_a_duplicate_delivery_of_the_chat_event_queues_one_task(chat: Daemon) -> None:
    first = send(chat, "--message-id", "m-1", "please fix the typo")
    again = send(chat, "--message-id", "m-1", "please fix the typo")
    assert "queued task 1" in first["reply"] and again["duplicate"] is True
    assert [t["id"] for t in chat.cli_json("task", "list", "--json")] == [1]


def test_a_clarification_question_stops_the_queueing_and_reaches_the_owner(chat: Daemon) -> None:
    outcome = send(chat, "something unclear")
    assert "Which file holds the typo?" in outcome["reply"] and "Not queued" in outcome["reply"]
    assert chat.cli_json("task", "list", "--json") == []


def test_task_chat_commands_list_show_and_cancel(chat: Daemon, repo: Path) -> None:
    send(chat, "please fix the typo")
    assert "task 1 queued" in send(chat, "/task.list")["reply"]
    assert "request: fix the README typo" in send(chat, "/task.show 1")["reply"]
    assert "task 1 cancelled" in send(chat, "/task.cancel 1")["reply"]
    assert "needs a task id" in send(chat, "/task.show one")["reply"]
    assert chat.cli_json("task", "show", "1", "--json")["state"] == "cancelled"


def test_the_sessions_answer_is_read_as_a_brief_or_a_question() -> None:
    assert parse_brief('{"brief": "do X"}') == Brief("do X")
    assert parse_brief('{"question": "which one?"}') == Question("which one?")
    assert parse_brief("plain words") == Brief("plain words")
    assert len(parse_brief("x" * 5000).text) == 3000


def test_the_idempotency_key_follows_the_event_and_the_request() -> None:
    assert task_key("e1", "fix it") == task_key("e1", "fix it")
    assert task_key("e1", "fix it") != task_key("e2", "fix it")
    assert task_key("e1", "fix it") != task_key("e1", "fix that")
    assert task_key("", "fix it") == ""


@pytest.fixture
def commands(tmp_path: Path) -> Any:
    """The task commands bound to the real queue rules on real LMDB (the
    queue's logic, called in this thread instead of through its actor)."""
    import time

    from enact.cancellation import CancellationToken
    from enact.commands import CommandCall, CommandContext, CommandRegistry
    from enact.fence import Fence
    from enact.messages.tasks import Submit
    from enact.storage import Storage
    from enact.tasks.from_chat import task_commands
    from enact.tasks.queue import TaskQueue
    from enact.tasks.tables import DATABASES

    home = tmp_path / "home"
    home.mkdir()
    storage = Storage(home / "state")
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    queue = TaskQueue(storage.grant("tasks", DATABASES), default_repo="/repo", lease_ttl_s=60)

    def ask(actor: str, message: Any) -> object:
        assert actor == "tasks" and isinstance(message, Submit)
        return queue.submit(message, time.time())

    def registry(agentic: bool = True) -> CommandRegistry:
        made = CommandRegistry()
        for command in task_commands():
            made.register(command)
        made.bind(CommandContext(fence=fence, status=lambda: "", ask=ask,
                                 converse=lambda key, prompt, *, owner_message, owners: '{"brief": "b"}',
                                 agentic=agentic))
        return made

    def call(request_id: str) -> CommandCall:
        return CommandCall(name="task.add", args={"text": "fix it"}, origin="model-action",
                           event_origin="chat:local", owners=True, cancel=CancellationToken(),
                           conversation="local:owner", request_id=request_id)

    yield registry, call, queue
    fence.release()
    storage.close()


def test_the_same_chat_event_run_twice_submits_one_task(commands: Any) -> None:
    registry, call, queue = commands
    made = registry()
    first, again = made.run(call("event-1")), made.run(call("event-1"))
    assert first.ok and "queued task 1" in first.text
    assert again.ok and "task 1 was already queued" in again.text
    assert "queued task 2" in made.run(call("event-2")).text
    assert [t.id for t in queue.list(None, 10, None).tasks] == [2, 1]


def test_task_add_is_refused_when_the_runtime_is_not_agentic(commands: Any) -> None:
    registry, call, queue = commands
    receipt = registry(agentic=False).run(call("event-1"))
    assert not receipt.ok and "not agentic" in receipt.text
    assert queue.list(None, 10, None).tasks == ()


def finish_the_task(daemon: Daemon) -> None:
    """Play the worker: claim task 1 and end it succeeded, with review r1."""
    from enact.messages.tasks import Claim, Claimed, Finish
    from enact.tasks.records import Outcome

    claimed = daemon.request(Claim(worker_id="w1"))
    assert isinstance(claimed, Claimed)
    daemon.request(Finish(task_id=1, worker_id="w1", attempt=claimed.task.attempt, outcome=Outcome.SUCCEEDED,
                          summary="fixed the typo", review_id="r1"))


def pending_notes(daemon: Daemon) -> list[str]:
    """The notes the sessions store keeps for the owner's conversation's next call."""
    found = daemon.cli_json("call", "sessions.Notes", '{"key": "local:owner"}')["body"]["notes"]
    return [note["text"] for note in found]


def turn_prompts(transcript: Path) -> list[str]:
    """The prompts of the owner's conversation's answered calls, oldest first (a resume the
    runtime refused is in the transcript too, its answer ``failed: …``)."""
    calls = [orjson.loads(line) for line in transcript.read_text().splitlines()] if transcript.exists() else []
    return [c["prompt"] for c in calls if c["session_key"] == "local:owner" and not c["answer"].startswith("failed:")]


OUTCOME_NOTE = "Task 1 (fix the README typo) succeeded: fixed the typo; review r1"


def chat_with_transcript(daemons: DaemonFactory, repo: Path) -> tuple[Path, Path]:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(rules(repo))
    transcript = home.parent / "transcript.jsonl"
    (home / "config.toml").write_text(LOCKED + f'[scripted]\ntranscript = "{transcript}"\n')
    return home, transcript


def test_the_owner_hears_the_outcome_and_the_next_turn_knows_it_once(daemons: DaemonFactory, repo: Path) -> None:
    from conftest import wait_for

    home, transcript = chat_with_transcript(daemons, repo)
    chat = daemons.start(home, env=NO_WORKERS)
    send(chat, "please fix the typo")
    finish_the_task(chat)

    def notices() -> list[dict[str, Any]]:
        turns = chat.cli_json("turns", "--json")
        return [t for t in turns if t["message_id"].startswith("notice:")]

    wait_for(lambda: notices(), what="the task's outcome notice")
    [notice] = notices()
    assert notice["conversation"] == "owner" and notice["outcome"] == "replied"
    assert notice["reply"].startswith("Task 1 succeeded: fixed the typo.") and "Review r1" in notice["reply"]
    wait_for(lambda: pending_notes(chat) == [OUTCOME_NOTE], what="the note kept for the next turn")
    calls_before = len(turn_prompts(transcript))  # the notice itself calls no model

    send(chat, "what happened?")
    send(chat, "and now?")
    first, second = turn_prompts(transcript)[calls_before:]
    assert OUTCOME_NOTE in first and first.index(OUTCOME_NOTE) < first.index("what happened?")
    assert "Task 1" not in second and pending_notes(chat) == []


def test_the_outcome_reaches_the_next_turn_once_across_a_restart(daemons: DaemonFactory, repo: Path) -> None:
    from conftest import wait_for

    home, transcript = chat_with_transcript(daemons, repo)
    first = daemons.start(home, env=NO_WORKERS)
    send(first, "please fix the typo")
    finish_the_task(first)
    wait_for(lambda: pending_notes(first) == [OUTCOME_NOTE], what="the note kept for the next turn")
    assert first.terminate() == 0
    calls_before = len(turn_prompts(transcript))

    second = daemons.start(home, env=NO_WORKERS)
    send(second, "what happened?")
    send(second, "and now?")
    # The scripted runtime forgot its sessions: the first turn starts a fresh one, the note in it.
    fresh, after = turn_prompts(transcript)[calls_before:]
    assert OUTCOME_NOTE in fresh and OUTCOME_NOTE not in after
    assert second.terminate() == 0
    third = daemons.start(home, env=NO_WORKERS)
    send(third, "anything new?")
    assert OUTCOME_NOTE not in turn_prompts(transcript)[-1]


def test_an_outcome_notice_a_crash_kept_from_the_inbox_is_told_at_the_next_start_once(
        daemons: DaemonFactory, repo: Path) -> None:
    import time

    from enact.messages.tasks import Claimed, Finish
    from enact.storage import Storage
    from enact.tasks.queue import TaskQueue
    from enact.tasks.records import Outcome
    from enact.tasks.tables import DATABASES

    from conftest import wait_for

    home = daemons.new_home()
    (home / "scripted.toml").write_text(rules(repo))
    (home / "config.toml").write_text(LOCKED)
    first = daemons.start(home, env=NO_WORKERS)
    send(first, "please fix the typo")
    assert first.terminate() == 0

    def planted(change: Any) -> Any:
        storage = Storage(home / "state")
        try:
            return change(TaskQueue(storage.grant("tasks", DATABASES), default_repo="", lease_ttl_s=60.0))
        finally:
            storage.close()

    # What a crash right after the task's final commit leaves: the task
    # ended, the inbox never told.
    def end_the_task(queue: TaskQueue) -> None:
        claimed = queue.claim("w1", time.time())
        assert isinstance(claimed, Claimed)
        queue.finish(Finish(task_id=claimed.task.id, worker_id="w1", attempt=claimed.task.attempt,
                            outcome=Outcome.SUCCEEDED, summary="fixed the typo", review_id="r1"), time.time())

    planted(end_the_task)
    second = daemons.start(home, env=NO_WORKERS)

    def notices() -> list[dict[str, Any]]:
        turns = second.cli_json("turns", "--json")
        return [t for t in turns if t["message_id"].startswith("notice:")]

    wait_for(lambda: notices(), what="the task's outcome notice")
    [notice] = notices()
    assert notice["conversation"] == "owner" and notice["reply"].startswith("Task 1 succeeded: fixed the typo.")
    # The inbox took it (its acknowledgement is a tell the tasks actor takes
    # in its own time): no longer held, so not told again.
    wait_for(lambda: planted(lambda queue: queue.notices.held()) == [], what="the notice no longer held")
    assert second.terminate() == 0
    assert planted(lambda queue: queue.notices.held()) == []


def test_a_held_notice_for_a_channel_this_daemon_lacks_is_dropped_with_a_log_line(daemons: DaemonFactory) -> None:
    from enact.messages.inbox import Notify
    from enact.storage import Storage
    from enact.tasks.queue import TaskQueue
    from enact.tasks.tables import DATABASES, TaskTables

    from conftest import wait_for

    home = daemons.new_home()
    gone = Notify(channel="gone", conversation="owner", notice_id="task:1:1:succeeded", text="Task 1 succeeded.",
                  session_note="", origin="human-cli", acknowledge_to="tasks")

    def held(change: Any = None) -> Any:
        storage = Storage(home / "state")
        try:
            store = storage.grant("tasks", DATABASES)
            if change is not None:
                store.write(change(TaskTables(store)), fenced=False)
            return TaskQueue(store, default_repo="", lease_ttl_s=60.0).notices.held()
        finally:
            storage.close()

    # Held by an earlier daemon that had that channel configured.
    assert held(lambda tables: lambda txn: tables.hold_notice(txn, gone)) == [gone]
    daemon = daemons.start(home, env=NO_WORKERS)
    wait_for(lambda: "unknown channel 'gone'" in daemon.log_text(), what="the notice to be turned down")
    # The inbox's acknowledgement is a tell the tasks actor takes in its own
    # time: read the store (a second reader of the environment) until it has.
    wait_for(lambda: held() == [], what="the tasks actor to drop the held notice")
    assert daemon.terminate() == 0
    assert "notice task:1:1:succeeded dropped" in daemon.log_text()
    assert held() == []  # acknowledged: not told again at every start
