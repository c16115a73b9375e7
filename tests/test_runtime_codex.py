"""The codex adapter, through the real Codex CLI against the scripted model
server; the JSON-lines reading also on canned output."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from codex_home import codex_env, scratch_codex_home
from model_server import Malformed, ModelServer, Reply, Stall, Status, Tokens, ToolCall

from enact.cancellation import CancellationToken
from enact.runtime import (
    CommandRun,
    RuntimeAuthFailed,
    RuntimeCancelled,
    RuntimeFailure,
    RuntimeMalformedOutput,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeSessionUnknown,
    RuntimeTimeout,
    RuntimeUnavailable,
    Usage,
)
from enact.runtime._codex_events import interpret, parse_events
from enact.runtime._subprocess import CommandOutput, group_alive
from enact.runtime.codex import CodexRuntime, find_executable

from conftest import real_cli, wait_for


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


@pytest.fixture
def home(server: ModelServer) -> Iterator[Path]:
    with scratch_codex_home(server.url) as directory:
        yield directory


@pytest.fixture
def codex(home: Path, tmp_path: Path) -> CodexRuntime:
    binary = real_cli("codex")
    return CodexRuntime(lambda: binary, default_cwd=tmp_path, env=codex_env(home))


def ask(codex: CodexRuntime, prompt: str, **fields: object) -> RuntimeRequest:
    fields.setdefault("session_key", "conv")
    fields.setdefault("timeout_s", 60)
    return RuntimeRequest(prompt=prompt, **fields)  # type: ignore[arg-type]


def _texts(body: object) -> str:
    return orjson.dumps(body).decode()


def test_a_reply_comes_back_with_its_thread_id_and_usage(codex: CodexRuntime, server: ModelServer) -> None:
    server.script(Reply("Hello from the fake model", tokens=Tokens(input=120, cached_input=20, output=9, reasoning=4)))
    result = codex.invoke(ask(codex, "What is the capital of Peru?"))
    assert result.text == "Hello from the fake model"
    assert result.native_session and len(result.native_session) == 36
    assert result.usage == Usage(input_tokens=120, cached_input_tokens=20, output_tokens=9, reasoning_tokens=4)
    assert result.duration_s > 0
    (sent,) = server.model_requests()
    assert sent.json()["model"] == "fake-model"
    assert "What is the capital of Peru?" in _texts(sent.json()["input"])


def test_a_resume_continues_the_thread_with_its_history(codex: CodexRuntime, server: ModelServer) -> None:
    server.script(Reply("first answer"), Reply("second answer"))
    first = codex.invoke(ask(codex, "remember the word walnut"))
    second = codex.invoke(ask(codex, "which word?", native_session=first.native_session))
    assert second.text == "second answer"
    assert second.native_session == first.native_session
    resumed = _texts(server.model_requests()[1].json()["input"])
    assert "remember the word walnut" in resumed and "first answer" in resumed and "which word?" in resumed


def test_a_resumed_turn_reports_its_own_tokens_not_the_threads_total(codex: CodexRuntime, server: ModelServer,
                                                                     home: Path, tmp_path: Path) -> None:
    server.script(Reply("a", tokens=Tokens(input=100, cached_input=40, output=10, reasoning=5)),
                  Reply("b", tokens=Tokens(input=200, cached_input=150, output=20, reasoning=0)),
                  Reply("c", tokens=Tokens(input=1000, cached_input=0, output=1, reasoning=1)))
    first = codex.invoke(ask(codex, "one"))
    second = codex.invoke(ask(codex, "two", native_session=first.native_session))
    assert second.usage == Usage(input_tokens=200, cached_input_tokens=150, output_tokens=20, reasoning_tokens=0)
    # A new adapter (the daemon restarted) reads the thread's total from Codex's rollout file.
    restarted = CodexRuntime(lambda: real_cli("codex"), default_cwd=tmp_path, env=codex_env(home))
    third = restarted.invoke(ask(restarted, "three", native_session=first.native_session))
    assert third.usage == Usage(input_tokens=1000, cached_input_tokens=0, output_tokens=1, reasoning_tokens=1)


def test_an_isolated_call_is_ephemeral_and_has_no_session(codex: CodexRuntime, server: ModelServer,
                                                          home: Path) -> None:
    server.script(Reply("[]"))
    result = codex.invoke(ask(codex, "scan this", session_key=""))
    assert (result.text, result.native_session) == ("[]", None)
    assert not list(home.glob("sessions/**/*.jsonl"))


def test_a_tool_call_edits_a_file_in_the_working_directory(codex: CodexRuntime, server: ModelServer,
                                                          tmp_path: Path) -> None:
    work = tmp_path / "repo"
    work.mkdir()
    server.script(ToolCall("printf 'edited by codex\\n' > note.txt"), Reply("I wrote note.txt"))
    result = codex.invoke(ask(codex, "write the note", sandbox="workspace-write", cwd=work))
    assert result.text == "I wrote note.txt"
    assert (work / "note.txt").read_text() == "edited by codex\n"
    [ran] = result.commands
    assert "note.txt" in ran.command and ran.exit_code == 0 and not ran.failed
    assert "function_call_output" in _texts(server.model_requests()[1].json()["input"])


def test_each_command_the_model_ran_comes_back_with_its_exit_status(codex: CodexRuntime, server: ModelServer,
                                                                    tmp_path: Path) -> None:
    work = tmp_path / "repo"
    work.mkdir()
    server.script(ToolCall("printf x > note.txt"), ToolCall("ls no-such-file"), Reply("done"))
    result = codex.invoke(ask(codex, "look around", sandbox="workspace-write", cwd=work))
    assert [(("ls no-such-file" in c.command), c.exit_code) for c in result.commands] == [(False, 0), (True, 2)]
    failed = result.commands[1]
    assert failed.failed and "No such file or directory" in failed.output
    assert failed.describe().endswith("(exit 2): " + " ".join(failed.output.split()))


def test_a_read_only_call_cannot_edit_the_working_directory(codex: CodexRuntime, server: ModelServer,
                                                           tmp_path: Path) -> None:
    work = tmp_path / "repo"
    work.mkdir()
    server.script(ToolCall("printf x > note.txt"), Reply("tried"))
    assert codex.invoke(ask(codex, "write the note", sandbox="read-only", cwd=work)).text == "tried"
    assert not (work / "note.txt").exists()


def test_a_401_is_an_auth_failure(codex: CodexRuntime, server: ModelServer) -> None:
    server.default = Status(401, "invalid key")
    with pytest.raises(RuntimeAuthFailed, match="401"):
        codex.invoke(ask(codex, "hi"))


def test_a_429_with_retry_after_is_retried_by_codex_and_the_200_wins(codex: CodexRuntime,
                                                                      server: ModelServer) -> None:
    server.script(Status(429, retry_after=1), Reply("later"))
    assert codex.invoke(ask(codex, "hi")).text == "later"
    assert len(server.model_requests()) == 2


def test_a_429_without_retry_after_is_rate_limited(codex: CodexRuntime, server: ModelServer) -> None:
    server.default = Status(429, "slow down")
    with pytest.raises(RuntimeRateLimited, match="429"):
        codex.invoke(ask(codex, "hi"))


def test_three_500s_are_retried_by_codex_and_the_fourth_answer_wins(codex: CodexRuntime,
                                                                    server: ModelServer) -> None:
    server.script(Status(500), Status(500), Status(500), Reply("finally"))
    assert codex.invoke(ask(codex, "hi")).text == "finally"
    assert len(server.model_requests()) == 4


def test_a_malformed_stream_fails_the_call(codex: CodexRuntime, server: ModelServer) -> None:
    server.default = Malformed()
    with pytest.raises(RuntimeFailure, match="stream") as failure:
        codex.invoke(ask(codex, "hi"))
    assert failure.value.kind == "failed"


def test_resuming_an_unknown_session_is_session_unknown(codex: CodexRuntime) -> None:
    with pytest.raises(RuntimeSessionUnknown):
        codex.invoke(ask(codex, "hi", native_session="0199a213-81c0-7800-8aa1-bbab2a035a53"))


def _codex_groups(home: Path) -> set[int]:
    """Process groups of the processes running with this CODEX_HOME."""
    marker = f"CODEX_HOME={home}".encode()
    groups = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if marker in Path(entry.path, "environ").read_bytes().split(b"\0"):
                    groups.add(os.getpgid(int(entry.name)))
            except OSError:
                continue
    return groups


@pytest.mark.parametrize("ending", ["timeout", "cancel"])
def test_a_stalled_model_ends_the_call_and_leaves_no_process(codex: CodexRuntime, server: ModelServer,
                                                             home: Path, ending: str) -> None:
    server.default = Stall()
    cancel = CancellationToken()
    outcome: dict[str, object] = {}

    def call() -> None:
        try:
            codex.invoke(ask(codex, "hi", timeout_s=4 if ending == "timeout" else 60, cancel=cancel))
        except RuntimeFailure as failure:
            outcome["failure"], outcome["at"] = failure, time.monotonic()

    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: server.model_requests(), what="codex to reach the model")
    groups = _codex_groups(home)
    assert groups
    if ending == "cancel":
        cancelled_at = time.monotonic()
        cancel.cancel("the owner cancelled")
    thread.join(timeout=30)
    assert "failure" in outcome, "the call did not end"
    assert isinstance(outcome["failure"], RuntimeTimeout if ending == "timeout" else RuntimeCancelled)
    if ending == "cancel":
        assert float(outcome["at"]) - cancelled_at < 1.0  # type: ignore[arg-type]
    wait_for(lambda: not any(group_alive(g) for g in groups), timeout=10, what="codex's process group to end")
    assert not _codex_groups(home)


# --- without the CLI -----------------------------------------------------------------


def test_codex_settings_live_in_a_runtime_codex_table_and_the_environment_wins(tmp_path: Path) -> None:
    from enact import components

    (tmp_path / "config.toml").write_text('[runtime]\nadapter = "codex"\n[runtime.codex]\nmodel = "gpt-x"\n'
                                          'reasoning_effort = "low"\n')
    settings = components.builtin().load_config(tmp_path, environ={"ENACT_CODEX_REASONING_EFFORT": "high"})
    runtime = components.builtin().runtime(settings).make_runtime(settings, None)
    assert isinstance(runtime, CodexRuntime)
    assert (runtime.model, runtime.reasoning_effort) == ("gpt-x", "high")
    argv = runtime.argv("codex", RuntimeRequest(session_key="k", prompt="p", sandbox="full-access"), Path("/x"))
    assert argv[:7] == ["codex", "exec", "--cd", str(tmp_path), "--sandbox", "danger-full-access", "--color"]
    assert argv[argv.index("--model"):argv.index("--model") + 2] == ["--model", "gpt-x"]
    assert 'model_reasoning_effort="high"' in argv and argv[-1] == "-"
    resume = runtime.argv("codex", RuntimeRequest(session_key="k", prompt="p", native_session="t-1"), Path("/x"))
    assert resume[:4] == ["codex", "exec", "resume", "t-1"] and 'sandbox_mode="read-only"' in resume


def test_a_tasks_own_git_directory_is_a_place_codex_may_write_and_nothing_else_is(tmp_path: Path) -> None:
    """Codex keeps a writable place's .git read-only; a task's is its own
    (``enact.tasks.task_git``), given as ``writable``, and only with
    ``workspace-write``, on a first call and on a resumed one."""
    runtime = CodexRuntime(lambda: "codex", default_cwd=tmp_path)
    own = tmp_path / "task-1" / ".git"
    for native in (None, "t-1"):
        task = RuntimeRequest(session_key="task:1", prompt="p", sandbox="workspace-write", cwd=tmp_path / "task-1",
                              native_session=native, writable=(own,))
        argv = runtime.argv("codex", task, Path("/x"))
        assert argv[argv.index(f'sandbox_workspace_write.writable_roots=["{own}"]') - 1] == "-c"
    for request in (RuntimeRequest(session_key="k", prompt="p", sandbox="workspace-write"),
                    RuntimeRequest(session_key="k", prompt="p", writable=(own,))):
        assert not [arg for arg in runtime.argv("codex", request, Path("/x")) if "writable_roots" in arg]


def test_an_explicit_codex_path_that_is_missing_stops_the_daemon_at_start(tmp_path: Path) -> None:
    from enact import components
    from enact.components import ComponentError

    installed = components.builtin()
    settings = installed.load_config(tmp_path, environ={"ENACT_RUNTIME_ADAPTER": "codex",
                                                         "ENACT_CODEX_BIN": str(tmp_path / "nope")})
    with pytest.raises(ComponentError, match="ENACT_CODEX_BIN"):
        installed.validate_environment(settings)


def test_an_explicit_executable_that_is_missing_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    with pytest.raises(RuntimeUnavailable, match=r"ENACT_CODEX_BIN: .*not an executable file"):
        find_executable(str(tmp_path / "codex"), where="ENACT_CODEX_BIN")


def test_codex_missing_from_path_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeUnavailable, match="npm install -g @openai/codex"):
        find_executable("", where="runtime.codex.executable")


def _lines(*events: dict[str, object]) -> str:
    return "\n".join(orjson.dumps(e).decode() for e in events) + "\n"


def _output(stdout: str, exit_code: int = 0, stderr: str = "") -> CommandOutput:
    return CommandOutput(exit_code=exit_code, stdout=stdout, stderr=stderr, duration_s=0.1)


def test_retries_and_error_items_are_diagnostics_when_the_turn_completes() -> None:
    stdout = _lines(
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "item.completed", "item": {"type": "error", "message": "Model metadata not found"}},
        {"type": "error", "message": "Reconnecting... 1/5 (unexpected status 500)"},
        {"type": "something.new", "payload": 1},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls", "exit_code": 0}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "the answer"}},
        {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 2}},
    )
    result = interpret(RuntimeRequest(session_key="k", prompt="p"), _output(stdout), last_message="")
    assert (result.text, result.native_session) == ("the answer", "t-1")
    assert result.commands == (CommandRun(command="ls", exit_code=0),) and result.progress == ()
    assert result.usage == Usage(input_tokens=5, output_tokens=2)


def test_codexs_warnings_on_stderr_reach_the_progress() -> None:
    stdout = _lines({"type": "item.completed", "item": {"type": "agent_message", "text": "done"}},
                    {"type": "turn.completed", "usage": {}})
    warning = ("WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper "
               'binaries under temporary dir "/tmp"')
    result = interpret(RuntimeRequest(session_key="", prompt="p"), _output(stdout, stderr=warning + "\nother"),
                       last_message="")
    assert result.progress == (f"codex warned: {warning}",)


def test_the_last_message_file_wins_over_the_agent_message_item() -> None:
    stdout = _lines({"type": "item.completed", "item": {"type": "agent_message", "text": "draft"}},
                    {"type": "turn.completed", "usage": {}})
    result = interpret(RuntimeRequest(session_key="k", prompt="p"), _output(stdout), last_message="final\n")
    assert result.text == "final"


def test_a_crash_after_some_output_is_a_failure_naming_the_signal() -> None:
    stdout = _lines({"type": "thread.started", "thread_id": "t-1"},
                    {"type": "item.completed", "item": {"type": "error", "message": "Model metadata not found"}})
    with pytest.raises(RuntimeFailure, match="killed by signal 9") as failure:
        interpret(RuntimeRequest(session_key="k", prompt="p"), _output(stdout, -9), last_message="")
    assert failure.value.kind == "failed"


def test_output_that_is_not_json_lines_is_malformed() -> None:
    with pytest.raises(RuntimeMalformedOutput, match="2 unreadable lines"):
        interpret(RuntimeRequest(session_key="k", prompt="p"), _output("hello\nworld\n"), last_message="")


def test_a_failed_turn_says_not_logged_in_as_auth() -> None:
    stdout = _lines({"type": "turn.failed", "error": {"message": "You are not logged in; run codex login"}})
    with pytest.raises(RuntimeAuthFailed, match="not logged in"):
        interpret(RuntimeRequest(session_key="k", prompt="p"), _output(stdout, 1), last_message="")
    assert parse_events(stdout).failure == "You are not logged in; run codex login"
