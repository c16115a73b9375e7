"""Runtime sessions, the startup context and command authority, through the
real actors in this process (real LMDB), with a runtime that records calls."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from roster_services import daemon_actors

from enact import components, config
from enact.actors.supervisor import Supervisor
from enact.cancellation import CancellationToken
from enact.channels import InboxInlet
from enact.channels.local import LocalChannel
from enact.chat.services import ChatServices, startup_context
from enact.chat.session_calls import SessionCalls
from enact.commands import (
    Authority,
    Command,
    CommandCall,
    CommandContext,
    CommandRegistry,
    builtin_commands,
)
from enact.fence import Fence
from enact.messages.commands import CommandOutcome
from enact.messages.common import HUMAN_CLI, MODEL_ACTION
from enact.messages.inbox import Outcome
from enact.messages.local import Send
from enact.messages.sessions import AddNote, Forget, Lookup, Note, Open, Opened, Session
from enact.metrics import Metrics
from enact.ownership import not_the_owners
from enact.programs import CommandsFileError, load_program_commands
from enact.runtime import Capabilities, RuntimeFailure, RuntimeRequest, RuntimeResult
from enact.runtime.scripted import RulesError, ScriptedRuntime, parse_rules
from enact.storage import Storage


class RecordingRuntime:
    """The scripted runtime, with every request kept for the test to read."""

    name = "recording"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=False)
    waits_for = "the recording runtime"

    def __init__(self, rules: Path) -> None:
        self.inner = ScriptedRuntime(rules)
        self.requests: list[RuntimeRequest] = []
        self.fail_next_resume = False

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        self.requests.append(request)
        if request.native_session is not None and self.fail_next_resume:
            self.fail_next_resume = False
            raise RuntimeFailure("session expired")
        return self.inner.invoke(request)


@dataclass
class Harness:
    supervisor: Supervisor
    channel: LocalChannel
    runtime: RecordingRuntime
    services: ChatServices

    def send(self, text: str, conversation: str = "cli") -> Outcome:
        outcome = self.channel.send(Send(text=text, conversation=conversation, origin=HUMAN_CLI))
        assert isinstance(outcome, Outcome)
        return outcome


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "scripted.toml").write_text('[[rule]]\nmatch = "status please"\naction = "status"\nthen = "ok"\n')
    settings = config.load(home, environ={}, settings=components.load().settings())
    storage = Storage(home / "state")
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    commands = CommandRegistry()
    for command in builtin_commands(commands):
        commands.register(command)
    runtime = RecordingRuntime(home / "scripted.toml")
    channel = LocalChannel()
    services = ChatServices(
        channels={"local": channel}, runtime=runtime, commands=commands, startup_context=startup_context(commands),
        origins={"local": HUMAN_CLI},
    )
    fatal = threading.Event()
    supervisor = Supervisor(
        daemon_actors(services, settings), home=home, config=settings, metrics=Metrics(), storage=storage, fence=fence,
        on_fatal=lambda _: fatal.set(),
    )
    commands.bind(CommandContext(fence=fence, status=lambda: "fine"))
    supervisor.start()
    channel.start(InboxInlet("local", lambda to, message: supervisor.ask(to, message, timeout=30), origin=HUMAN_CLI))
    try:
        yield Harness(supervisor=supervisor, channel=channel, runtime=runtime, services=services)
    finally:
        supervisor.stop(5)
        fence.release()
        storage.close()
    assert not fatal.is_set()


def test_startup_context_is_sent_once_per_native_session(harness: Harness) -> None:
    harness.send("one")
    harness.send("two")
    first, second = harness.runtime.requests
    assert first.native_session is None and first.prompt.startswith(harness.services.startup_context)
    assert second.native_session is not None and harness.services.startup_context not in second.prompt


def test_each_conversation_gets_its_own_session(harness: Harness) -> None:
    harness.send("one", conversation="a")
    harness.send("one", conversation="b")
    keys = [request.session_key for request in harness.runtime.requests]
    assert keys == ["local:a", "local:b"]
    assert all(request.native_session is None for request in harness.runtime.requests)


def test_failed_resume_forgets_the_session_and_retries_once_with_the_startup_context(harness: Harness) -> None:
    harness.send("one")
    before = harness.supervisor.ask("sessions", Lookup(key="local:cli", prompt_version=1), timeout=10)
    assert isinstance(before, Session)
    harness.runtime.fail_next_resume = True
    outcome = harness.send("two")
    assert outcome.reply == "(scripted runtime) You said: two"
    failed, fresh = harness.runtime.requests[1:]
    assert failed.native_session == before.native_id
    assert fresh.native_session is None and fresh.prompt.startswith(harness.services.startup_context)
    after = harness.supervisor.ask("sessions", Lookup(key="local:cli", prompt_version=1), timeout=10)
    assert isinstance(after, Session) and after.native_id != before.native_id and after.turns == 1


def test_a_commands_call_on_the_session_is_made_as_the_conversations_own_and_retries_a_failed_resume(
        harness: Harness) -> None:
    # The call task.add makes for a brief (CommandContext.converse): it resumes
    # the conversation's session, and a failed resume is forgotten and retried.
    harness.send("one")
    before = harness.supervisor.ask("sessions", Lookup(key="local:cli", prompt_version=1), timeout=10)
    assert isinstance(before, Session)
    calls = SessionCalls(harness.runtime, ask=lambda actor, message: harness.supervisor.ask(actor, message, timeout=10),
                         tell=harness.supervisor.tell, startup_context=harness.services.startup_context,
                         prompt_version=1, timeout_s=30, token=CancellationToken(), metrics=Metrics())
    harness.runtime.fail_next_resume = True

    calls.call("local:cli", "write the brief", owner_message="[task brief] do it", owners=True)

    failed, fresh = harness.runtime.requests[1:]
    assert failed.native_session == before.native_id and failed.owner_message == "[task brief] do it"
    assert fresh.native_session is None and fresh.prompt.startswith(harness.services.startup_context)
    after = harness.supervisor.ask("sessions", Lookup(key="local:cli", prompt_version=1), timeout=10)
    assert isinstance(after, Session) and after.native_id != before.native_id
    harness.send("two")
    assert harness.runtime.requests[-1].native_session == after.native_id  # the conversation goes on in it


def test_receipts_of_an_action_are_fed_back_in_the_same_session(harness: Harness) -> None:
    outcome = harness.send("status please")
    assert outcome.reply == "ok"
    _, second = harness.runtime.requests
    assert second.native_session is not None
    assert second.receipt == "fine" and "Receipt of action status" in second.prompt


def test_mapping_under_another_prompt_version_is_ignored(harness: Harness) -> None:
    harness.send("one")
    def lookup(prompt_version: int) -> object:
        return harness.supervisor.ask("sessions", Lookup(key="local:cli", prompt_version=prompt_version), timeout=10)

    assert isinstance(lookup(1), Session)
    assert not isinstance(lookup(7), Session)
    harness.supervisor.ask("sessions", Forget(key="local:cli"), timeout=10)
    assert not isinstance(lookup(1), Session)


def test_a_call_opens_its_session_with_the_mapping_and_the_notes_whether_asked_or_read_idle(
        harness: Harness) -> None:
    harness.send("one")
    supervisor = harness.supervisor
    supervisor.tell("sessions", AddNote(key="local:cli", note_id="n1", text="task 3 finished"))
    asked = supervisor.ask("sessions", Open(key="local:cli", prompt_version=1), timeout=10)
    slot = supervisor._slots["sessions"]  # the same request, read in this thread from what is committed
    assert slot.idle_reads is not None
    read = slot.idle_reads.answer(Open(key="local:cli", prompt_version=1))
    assert asked == read
    assert isinstance(asked, Opened) and asked.session is not None and asked.session.turns == 1
    assert asked.notes == (Note(note_id="n1", text="task 3 finished"),)
    other_version = supervisor.ask("sessions", Open(key="local:cli", prompt_version=7), timeout=10)
    assert other_version.session is None and other_version.notes == asked.notes


def test_isolated_calls_keep_no_session(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nmatch = "signals"\nreply = "[{\\"kind\\": \\"x\\"}]"\n')
    runtime = ScriptedRuntime(rules)
    assert runtime.invoke(RuntimeRequest(session_key="", prompt="find signals")).text == '[{"kind": "x"}]'
    result = runtime.invoke(RuntimeRequest(session_key="", prompt="anything else"))
    assert result.text == "[]" and result.native_session is None


# -- command authority -------------------------------------------------------------


def registry_with(command: Command) -> CommandRegistry:
    registry = CommandRegistry()
    registry.register(command)

    class _AlwaysCurrent:
        def is_current(self) -> bool:
            return True

    registry.bind(CommandContext(fence=_AlwaysCurrent(), status=lambda: ""))  # type: ignore[arg-type]
    return registry


def call(name: str, *, origin: str, event_origin: str, owners: bool) -> CommandCall:
    return CommandCall(name=name, args={}, origin=origin, event_origin=event_origin, owners=owners,
                       cancel=CancellationToken())


EFFECT = Command(name="poke", summary="changes a thing", authority=Authority.EFFECT, handler=lambda c, x: "poked")
HUMAN = Command(name="land", summary="lands a change", authority=Authority.HUMAN, handler=lambda c, x: "landed")


def test_without_a_lock_effects_need_the_owners_cli() -> None:
    registry = registry_with(EFFECT)
    assert registry.run(call("poke", origin=MODEL_ACTION, event_origin=HUMAN_CLI, owners=True)).ok
    refused = registry.run(call("poke", origin=MODEL_ACTION, event_origin="chat:telegram", owners=False))
    assert not refused.ok and "only the owner's CLI may cause effects" in refused.text
    assert registry.run(call("poke", origin=MODEL_ACTION, event_origin="chat:telegram", owners=True)).ok


def test_a_model_action_cannot_run_a_human_command() -> None:
    registry = registry_with(HUMAN)
    refused = registry.run(call("land", origin=MODEL_ACTION, event_origin=HUMAN_CLI, owners=True))
    assert not refused.ok and refused.text.startswith("refused: land needs a human")
    assert registry.run(call("land", origin=HUMAN_CLI, event_origin=HUMAN_CLI, owners=True)).ok


LOOK = Command(name="look", summary="shows the owner's work", handler=lambda c, x: "the owner's tasks")


def test_a_read_command_shows_the_owners_work_to_the_owners_conversations_only() -> None:
    registry = registry_with(LOOK)
    for origin in ("chat:telegram", MODEL_ACTION):
        refused = registry.run(dataclasses.replace(call("look", origin=origin, event_origin="chat:telegram",
                                                        owners=False), conversation="telegram:5151"))
        assert not refused.ok and refused.outcome is CommandOutcome.REFUSED
        assert refused.text == not_the_owners("what look shows", "telegram:5151")
        assert refused.text == ("what look shows is the owner's, and this conversation is not the owner's; to make "
                                'this chat the owner\'s, lock it to the owner: chat.allowed_conversations = '
                                '["telegram:5151"] in config.toml')
        assert "the owner's tasks" not in refused.text
    assert registry.run(call("look", origin="chat:telegram", event_origin="chat:telegram", owners=True)).ok
    assert registry.run(call("look", origin=MODEL_ACTION, event_origin=HUMAN_CLI, owners=True)).ok


def test_only_the_harmless_built_in_commands_are_public() -> None:
    from enact.evolution.commands import evolve_commands
    from enact.evolution.mode_commands import mode_commands
    from enact.memory.commands import memory_commands
    from enact.tasks.backlog_commands import backlog_commands
    from enact.tasks.from_chat import task_commands
    from enact.tasks.review_commands import review_commands

    registry = CommandRegistry()
    commands = (*builtin_commands(registry), *memory_commands(), *task_commands(), *review_commands(),
                *backlog_commands(), *evolve_commands(), *mode_commands())
    public = sorted(c.name for c in commands if c.authority is Authority.PUBLIC)
    assert public == ["help", "status"]
    reads = {c.name for c in commands if c.authority is Authority.READ}
    assert {"task.list", "task.show", "review.list", "review.show", "evolve.candidates", "evolve.show",
            "backlog.list", "cron.list", "memory"} == reads
    for command in commands:
        registry.register(command)
    registry.bind(CommandContext(fence=_Fenced(), status=lambda: "up"))  # type: ignore[arg-type]
    stranger = dataclasses.replace(call("help", origin="chat:telegram", event_origin="chat:telegram",
                                        owners=False), conversation="telegram:5151")
    for command in (c for c in commands if c.authority is Authority.READ):
        name, args = command.name, {"text": "1"} if "text" in command.params else {}
        refused = registry.refusal(dataclasses.replace(stranger, name=name, args=args))
        assert refused is not None and refused.text.endswith("is the owner's, and this conversation is not the "
                                                              "owner's; to make this chat the owner's, lock it to "
                                                              'the owner: chat.allowed_conversations = '
                                                              '["telegram:5151"] in config.toml'), name
    # The public ones run anywhere, a fenced daemon too: they change nothing.
    assert registry.run(stranger).ok and registry.run(dataclasses.replace(stranger, name="status")).text == "up"


class _Fenced:
    def is_current(self) -> bool:
        return False


def test_commands_file_errors_name_the_command(tmp_path: Path) -> None:
    path = tmp_path / "commands.toml"
    path.write_text('[[command]]\nname = "x"\nrun = "not a list"\n')
    with pytest.raises(CommandsFileError, match=r"command #1 \(x\): 'run' must be a non-empty list"):
        load_program_commands(path)
    path.write_text('[[command]]\nname = "x"\nrun = ["true"]\nauthority = "god"\n')
    with pytest.raises(CommandsFileError, match="'authority' must be public, read, effect or human"):
        load_program_commands(path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[[rule]]\nreply = "x"\n', "'match' must be a string"),
        ('[[rule]]\nmatch = "x"\n', "exactly one of 'reply', 'action' or 'fail'"),
        ('[[rule]]\nmatch = "x"\nreply = "a"\naction = "b"\n', "exactly one of"),
        ('[[rule]]\nmatch = "x"\nreply = "a"\nthen = "b"\n', "'args' and 'then' belong to an action rule"),
        ('[[rule]]\nmatch = "x"\nreply = "a"\ncolour = "b"\n', "unknown key 'colour'"),
        ('title = "x"\n', "unknown key 'title'"),
    ],
)
def test_bad_rules_are_refused_with_the_rule_named(text: str, problem: str) -> None:
    with pytest.raises(RulesError, match=problem):
        parse_rules(text, source="rules.toml")


# -- the step journal ---------------------------------------------------------------


def test_journal_steps_move_planned_running_done_and_never_back(harness: Harness) -> None:
    from enact.messages.common import RefusalCode, Refused
    from enact.messages.journal import Finish, Plan, Recorded, Start, StepList, Steps

    def ask(actor: str, message: Any) -> object:
        return harness.supervisor.ask(actor, message, timeout=10)
    assert isinstance(ask("journal", Plan(request_id="r", index=0, command="a", args={})), Recorded)
    # Planned but never started: it may be planned again with another command.
    replanned = ask("journal", Plan(request_id="r", index=0, command="b", args={"x": 1}))
    assert isinstance(replanned, Recorded) and replanned.step.command == "b"
    assert isinstance(ask("journal", Start(request_id="r", index=0)), Recorded)
    assert ask("journal", Plan(request_id="r", index=0, command="c", args={})) == Refused(
        reason="step 0 of this request is already running", code=RefusalCode.WRONG_STATE)
    assert ask("journal", Start(request_id="r", index=0)) == Refused(reason="step 0 is running, not planned",
                                                                      code=RefusalCode.WRONG_STATE)
    done = ask("journal", Finish(request_id="r", index=0, receipt="ok", ok=True))
    assert isinstance(done, Recorded) and done.step.state == "done"
    steps = ask("journal", Steps(request_id="r"))
    assert isinstance(steps, StepList)
    assert [(s.command, s.state, s.receipt) for s in steps.steps] == [("b", "done", "ok")]
    other = ask("journal", Steps(request_id="r2"))
    assert isinstance(other, StepList) and other.steps == ()
