"""Every built-in runtime declares what it can do in one value
(``Runtime.capabilities``) and what a call waits for (``waits_for``), and the wrappers around it (the metered runtime,
the confined conversation calls) pass that value through as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from enact import components
from enact.metrics import Metrics
from enact.runtime import Capabilities, Runtime
from enact.runtime.claude import ClaudeRuntime
from enact.runtime.codex import CodexRuntime
from enact.runtime.metered import MeteredRuntime
from enact.runtime.openai import OpenAIRuntime
from enact.runtime.scripted import ScriptedRuntime
from enact.tasks.confined_calls import ConfinedCalls, confines_calls


def _claude(tmp_path: Path) -> ClaudeRuntime:
    executable = tmp_path / "tools" / "node_modules" / ".bin" / "claude"
    executable.parent.mkdir(parents=True)
    executable.touch(mode=0o755)
    return ClaudeRuntime(str(executable), conversation_dir=tmp_path / "claude",
                         environ={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config")})


def test_each_built_in_runtime_declares_its_capabilities(tmp_path: Path) -> None:
    claude = _claude(tmp_path).capabilities
    assert (claude.agentic, claude.keeps_history, claude.confines_subprocesses) == (True, True, True)
    assert claude.state_dirs == (tmp_path / "claude-config",)
    assert claude.program_dirs == ((tmp_path / "tools").resolve(),)
    assert claude.conversation_dir == tmp_path / "claude"
    assert "projects" in claude.own_state

    codex = CodexRuntime(lambda: "codex-not-installed", default_cwd=tmp_path,
                         env={"CODEX_HOME": str(tmp_path / "codex-home")}).capabilities
    assert (codex.agentic, codex.keeps_history, codex.confines_subprocesses) == (True, True, True)
    assert codex.state_dirs == (tmp_path / "codex-home",)
    assert codex.own_state and codex.conversation_dir is None

    openai = OpenAIRuntime("http://127.0.0.1:9/v1", model="m", history_chars=1234).capabilities
    assert openai == Capabilities(agentic=False, keeps_history=False, confines_subprocesses=False,
                                  history_chars=1234)

    scripted = ScriptedRuntime(tmp_path / "no-rules.toml").capabilities
    # It reads skills where Claude Code does, so a task rule's `run` can use them as Claude would.
    assert scripted == Capabilities(agentic=True, keeps_history=True, confines_subprocesses=True,
                                    native_skills=".claude/skills")
    assert ScriptedRuntime(tmp_path / "no-rules.toml").waits_for == "the scripted runtime"


def test_the_capabilities_value_is_frozen() -> None:
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=True)
    with pytest.raises(AttributeError):
        capabilities.agentic = False  # type: ignore[misc]


def test_the_wrappers_keep_the_capabilities_of_the_runtime_they_wrap(tmp_path: Path) -> None:
    settings = components.load().load_config(tmp_path, environ={})
    runtimes: list[Runtime] = [_claude(tmp_path), OpenAIRuntime("http://127.0.0.1:9/v1", model="m"),
                               ScriptedRuntime(tmp_path / "no-rules.toml")]
    for runtime in runtimes:
        metered = MeteredRuntime(runtime, Metrics())
        assert metered.capabilities == runtime.capabilities
        confined = ConfinedCalls(metered, settings)
        assert confined.capabilities == runtime.capabilities
        assert MeteredRuntime(confined, Metrics()).capabilities == runtime.capabilities
        assert metered.waits_for == confined.waits_for == runtime.waits_for
    # Only a runtime with state directories of a CLI has its conversation calls confined.
    assert [confines_calls(runtime) for runtime in runtimes] == [True, False, False]


def test_the_wrappers_forward_nothing_but_what_the_protocol_declares(tmp_path: Path) -> None:
    runtime = OpenAIRuntime("http://127.0.0.1:9/v1", model="m")
    with pytest.raises(AttributeError):
        MeteredRuntime(runtime, Metrics()).base_url  # type: ignore[attr-defined]  # noqa: B018
