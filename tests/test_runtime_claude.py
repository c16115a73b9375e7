"""The claude runtime through the real Claude Code CLI, against the scripted
model server's Anthropic Messages route."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import model_anthropic  # noqa: F401  (registers /v1/messages)
import pytest
from claude_home import claude_env
from model_server import ModelServer, Reply, Stall, Status, Tokens, ToolCall

from enact.components import ComponentError, Components
from enact.runtime import (
    RuntimeAuthFailed,
    RuntimeFailure,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeSessionUnknown,
    RuntimeTimeout,
)
from enact.runtime._claude_output import parse_output
from enact.runtime._subprocess import CommandOutput
from enact.runtime.claude import ClaudeRuntime, command_line
from enact.runtime.claude_component import ClaudeRuntimeComponent, find_executable
from enact.runtime.codex import CodexRuntime

from conftest import real_cli, wait_for


@pytest.fixture
def server() -> ModelServer:
    with ModelServer() as running:
        yield running  # type: ignore[misc]


def claude_environ(tmp_path: Path, server: ModelServer, marker: str = "") -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "RUNTIME_TEST_MARKER": marker, **claude_env(tmp_path / "home", server.url)}


def runtime_for(tmp_path: Path, server: ModelServer, marker: str = "") -> ClaudeRuntime:
    return ClaudeRuntime(real_cli("claude"), conversation_dir=tmp_path / "conversations",
                         environ=claude_environ(tmp_path, server, marker))


def tools_offered(server: ModelServer, index: int = 0) -> set[str]:
    return {tool["name"] for tool in server.model_requests()[index].json().get("tools", [])}


def test_a_reply_is_parsed_with_session_usage_and_cost(tmp_path: Path, server: ModelServer) -> None:
    server.script(Reply("hello from the model", tokens=Tokens(input=20, cached_input=5, output=9)))
    result = runtime_for(tmp_path, server).invoke(RuntimeRequest(session_key="k", prompt="say hello please"))
    assert result.text == "hello from the model"
    assert uuid.UUID(result.native_session or "")
    assert (result.usage.input_tokens, result.usage.cached_input_tokens, result.usage.output_tokens) == (25, 5, 9)
    assert result.usage.cost_usd is not None and result.usage.cost_usd > 0
    (sent,) = server.model_requests()
    assert sent.path == "/v1/messages?beta=true"
    assert b"say hello please" in sent.body
    # read-only: nothing that edits files or runs commands is offered
    assert "Read" in tools_offered(server) and not {"Bash", "Edit", "Write"} & tools_offered(server)


def test_a_resumed_session_sends_the_earlier_turn(tmp_path: Path, server: ModelServer) -> None:
    runtime = runtime_for(tmp_path, server)
    server.script(Reply("first answer"), Reply("second answer"))
    first = runtime.invoke(RuntimeRequest(session_key="k", prompt="the first question"))
    second = runtime.invoke(RuntimeRequest(session_key="k", prompt="the second question",
                                           native_session=first.native_session))
    assert (second.text, second.native_session) == ("second answer", first.native_session)
    resumed = server.model_requests()[-1].body
    assert b"the first question" in resumed and b"first answer" in resumed and b"the second question" in resumed


def test_resuming_an_unknown_session_is_session_unknown(tmp_path: Path, server: ModelServer) -> None:
    with pytest.raises(RuntimeSessionUnknown, match="No conversation found"):
        runtime_for(tmp_path, server).invoke(
            RuntimeRequest(session_key="k", prompt="x", native_session=str(uuid.uuid4())))
    assert server.model_requests() == []


def test_a_tool_call_edits_a_file_in_the_workspace(tmp_path: Path, server: ModelServer) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    server.script(ToolCall("printf 'written by the model' > out.txt"), Reply("done"))
    result = runtime_for(tmp_path, server).invoke(
        RuntimeRequest(session_key="", prompt="write the file", sandbox="workspace-write", cwd=workspace))
    assert result.text == "done"
    assert (workspace / "out.txt").read_text() == "written by the model"
    assert {"Bash", "Edit", "Write"} <= tools_offered(server)
    [ran] = result.commands
    assert ran.command == "printf 'written by the model' > out.txt" and ran.exit_code == 0


def test_each_command_the_model_ran_comes_back_with_its_exit_status(tmp_path: Path, server: ModelServer) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    server.script(ToolCall("printf x > out.txt"), ToolCall("ls no-such-file"), Reply("done"))
    result = runtime_for(tmp_path, server).invoke(
        RuntimeRequest(session_key="", prompt="look around", sandbox="workspace-write", cwd=workspace))
    assert [(c.command, c.exit_code) for c in result.commands] == [("printf x > out.txt", 0), ("ls no-such-file", 2)]
    assert "No such file or directory" in result.commands[1].output and result.commands[1].failed
    assert b"tool_result" in server.model_requests()[1].body


def test_a_skill_its_skill_tool_loaded_comes_back_as_used_and_one_it_could_not_does_not(
        tmp_path: Path, server: ModelServer) -> None:
    workspace = tmp_path / "work"
    (workspace / ".claude" / "skills" / "tidy-notes").mkdir(parents=True)
    (workspace / ".claude" / "skills" / "tidy-notes" / "SKILL.md").write_text(
        "---\nname: tidy-notes\ndescription: Keep notes tidy.\n---\nDate every note.\n")
    server.script(ToolCall("no-such-skill", tool="Skill"), ToolCall("tidy-notes", tool="Skill"), Reply("done"))
    result = runtime_for(tmp_path, server).invoke(
        RuntimeRequest(session_key="k", prompt="tidy up", cwd=workspace))
    assert result.text == "done" and result.skills_used == ("tidy-notes",)
    assert b"Date every note." in server.model_requests()[-1].body  # the skill's instructions reached the model
    assert any(line.startswith("Skill ") and "no-such-skill" in line and "failed" in line for line in result.progress)


def test_a_refused_key_is_an_auth_failure(tmp_path: Path, server: ModelServer) -> None:
    server.default = Status(401, "invalid x-api-key")
    with pytest.raises(RuntimeAuthFailed, match="401"):
        runtime_for(tmp_path, server).invoke(RuntimeRequest(session_key="k", prompt="x"))
    assert len(server.model_requests()) <= 2  # its own retries are bounded


def test_a_429_then_an_answer_succeeds_and_two_429s_are_rate_limited(tmp_path: Path, server: ModelServer) -> None:
    runtime = runtime_for(tmp_path, server)
    server.script(Status(429, "slow down"), Reply("after the wait"))
    assert runtime.invoke(RuntimeRequest(session_key="k", prompt="x")).text == "after the wait"
    server.default = Status(429, "slow down")
    with pytest.raises(RuntimeRateLimited):
        runtime.invoke(RuntimeRequest(session_key="k", prompt="y"))


def test_a_stall_past_the_timeout_leaves_no_process(tmp_path: Path, server: ModelServer) -> None:
    marker = uuid.uuid4().hex
    server.default = Stall()
    with pytest.raises(RuntimeTimeout):
        runtime_for(tmp_path, server, marker).invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=4))
    assert server.model_requests(), "the CLI reached the model before the timeout"
    wait_for(lambda: not processes_with(marker), timeout=8, what="the claude processes to be gone")


def processes_with(marker: str) -> list[int]:
    """Processes whose environment holds the marker."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                environ = Path(entry.path, "environ").read_bytes()
            except OSError:
                continue
            if f"RUNTIME_TEST_MARKER={marker}".encode() in environ:
                found.append(int(entry.name))
    return found


def test_output_that_is_no_result_object_is_classified() -> None:
    def output(stdout: str, stderr: str = "", code: int = 0) -> CommandOutput:
        return CommandOutput(exit_code=code, stdout=stdout, stderr=stderr, duration_s=0.1)

    from enact.runtime import RuntimeMalformedOutput, RuntimeUnavailable

    with pytest.raises(RuntimeMalformedOutput):
        parse_output(output("{not json"), resumed=None)
    with pytest.raises(RuntimeFailure, match="exited with 2: boom"):
        parse_output(output("", "boom", 2), resumed=None)
    unreachable = ('{"type": "result", "is_error": true, "api_error_status": null, "terminal_reason": "api_error", '
                   '"result": "API Error: Can\'t reach the API server (ENOTFOUND)", "session_id": "s"}')
    with pytest.raises(RuntimeUnavailable):
        parse_output(output(unreachable, code=1), resumed=None)
    not_logged_in = '{"type": "result", "is_error": true, "result": "Not logged in · Please run /login"}'
    with pytest.raises(RuntimeAuthFailed, match="ANTHROPIC_API_KEY"):
        parse_output(output(not_logged_in, code=1), resumed=None)


def test_an_explicit_executable_that_is_missing_is_an_error(tmp_path: Path) -> None:
    installed = Components(items=(ClaudeRuntimeComponent(),))
    settings = installed.load_config(tmp_path, environ={"ENACT_CLAUDE_BIN": str(tmp_path / "no-claude")})
    with pytest.raises(ComponentError, match="no-claude is not an executable file"):
        ClaudeRuntimeComponent().validate_environment(settings)
    settings = installed.load_config(tmp_path, environ={"ENACT_CLAUDE_BIN": real_cli("claude"),
                                                        "ENACT_CLAUDE_MODEL": "claude-x"})
    runtime = ClaudeRuntimeComponent().make_runtime(settings, None)
    assert (runtime.executable, runtime.model, runtime.capabilities.agentic) == (real_cli("claude"), "claude-x", True)


def test_claude_missing_from_path_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    settings = Components(items=(ClaudeRuntimeComponent(),)).load_config(tmp_path, environ={})
    with pytest.raises(ComponentError, match=r"^the claude CLI is not on PATH: install it \(npm install -g "
                                             r"@anthropic-ai/claude-code\)"):
        find_executable(settings)


def test_an_unknown_sandbox_mode_is_refused_by_each_adapter_in_the_same_words(tmp_path: Path) -> None:
    request = RuntimeRequest(session_key="", prompt="p", sandbox="yolo")
    words = r"^unknown sandbox mode 'yolo'; expected one of read-only, workspace-write, full-access$"
    with pytest.raises(RuntimeFailure, match=words):
        command_line("claude", request, model="")
    with pytest.raises(RuntimeFailure, match=words):
        CodexRuntime(lambda: "codex", default_cwd=tmp_path).argv("codex", request, tmp_path / "last")


def test_a_confined_call_gets_the_config_dir_replaced_and_the_install_root_visible(tmp_path: Path) -> None:
    prefix = tmp_path / "tools"
    executable = prefix / "node_modules" / ".bin" / "claude"
    executable.parent.mkdir(parents=True)
    executable.touch(mode=0o755)

    def runtime(environ: dict[str, str]) -> ClaudeRuntime:
        return ClaudeRuntime(str(executable), conversation_dir=tmp_path / "c", environ=environ)

    assert runtime({}).capabilities.confines_subprocesses is True
    assert runtime({}).capabilities.program_dirs == (prefix.resolve(),)
    named = tmp_path / "config"
    assert runtime({"CLAUDE_CONFIG_DIR": str(named)}).state_dirs == (named,)
    home = tmp_path / "home"
    assert runtime({"HOME": str(home)}).state_dirs == (home / ".claude",)  # unnamed, it is ~/.claude
    assert not named.exists() and not home.exists()  # naming them makes nothing
    # Its transcripts are its own state, left out of a confined call's view; its settings are not.
    assert {"projects", "sessions", "todos", "history.jsonl"} <= set(runtime({}).own_state)
    assert not {"settings.json", "CLAUDE.md", "commands", ".claude.json"} & set(runtime({}).own_state)
