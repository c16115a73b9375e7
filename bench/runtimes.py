"""What each adapter adds around a call, against an instant loopback model,
and what starting a program adds (each way the daemon starts one, beside a
bare ``subprocess`` start of the same program: the floor; target ≤ 3 ms).
The codex and claude adapters run the real CLI (``sh`` in its own session,
Codex's temporary last-message file, the output parsed into a result) and
the same argv is run directly with ``subprocess.run``; the openai adapter
(retry loop, watchdog thread, parsing) is set beside one bare ``http.client``
POST of the same body. The model's own time is the same on both sides (the
server answers at once), so the difference is enact's. The CLI rows are
skipped when ``make tools`` has not installed the CLIs.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import orjson

from bench._table import Table, median, ratio
from enact.cancellation import CancellationToken
from enact.programs import run_program
from enact.runtime import RuntimeRequest
from enact.runtime._subprocess import run_command
from enact.runtime.claude import ClaudeRuntime, command_line
from enact.runtime.codex import CodexRuntime
from enact.runtime.openai import OpenAIRuntime
from enact.tasks.host_git import git

SPAWN_TARGET_MS = 3.0
"""What starting a program may add to a bare ``subprocess`` start (issue 24)."""

TITLE = "7. Runtime adapter overhead: each adapter vs the same call made directly"
ROOT = Path(__file__).resolve().parent.parent
CODEX = ROOT / ".tools" / "node_modules" / ".bin" / "codex"
CLAUDE = ROOT / ".tools" / "node_modules" / ".bin" / "claude"

Sample = tuple[list[float], list[float]]
"""(direct, adapter) durations of the same calls."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}"


def run(quick: bool) -> Table:
    table = Table(TITLE, ["call (median of N)", "direct ms", "enact ms", "enact ÷ direct", "added ms", "target"])
    calls = 1 if quick else 8
    starts = 20 if quick else 200
    for label, sample in _program_starts(starts):
        d, a = median(sample[0]), median(sample[1])
        verdict = "PASS" if (a - d) * 1e3 <= SPAWN_TARGET_MS else "MISS"
        table.add(f"{label}, N={starts}", _ms(d), _ms(a), ratio(a / d), _ms(a - d),
                  f"≤ {SPAWN_TARGET_MS:g} added: {verdict}")
    sys.path.insert(0, str(ROOT / "tests"))
    import model_anthropic  # noqa: F401  (registers /v1/messages)
    import model_chat  # noqa: F401  (registers /v1/chat/completions)
    from model_server import ModelServer, Reply

    with ModelServer(default=Reply("ok")) as server:
        _add(table, f"openai chat completion, N={calls * 10}", _openai(server.url, calls * 10))
        for cli, label, measure in ((CODEX, "isolated codex exec", _codex), (CLAUDE, "claude -p", _claude)):
            if cli.exists():
                _add(table, f"{label}, N={calls}", measure(server.url, calls))
            else:
                table.note(f"{label} row skipped: {cli} is missing (run `make tools`)")
    table.note("the model answers at once; a real model's seconds come on top of both sides alike")
    return table


def _add(table: Table, label: str, sample: Sample) -> None:
    d, a = median(sample[0]), median(sample[1])
    table.add(label, _ms(d), _ms(a), ratio(a / d), _ms(a - d), "")


def _alternate(calls: int, direct: Callable[[], object], adapter: Callable[[], object]) -> Sample:
    adapter()  # warm the caches of both sides
    directs, adapters = [], []
    for _ in range(calls):
        started = time.perf_counter()
        direct()
        directs.append(time.perf_counter() - started)
        started = time.perf_counter()
        adapter()
        adapters.append(time.perf_counter() - started)
    return directs, adapters


def _codex(url: str, calls: int) -> Sample:
    from codex_home import codex_env, scratch_codex_home

    with scratch_codex_home(url) as home:
        env = codex_env(home)
        runtime = CodexRuntime(lambda: str(CODEX), default_cwd=home, env=env)
        request = RuntimeRequest(session_key="", prompt="hi", timeout_s=60)
        argv = runtime.argv(str(CODEX), request, home / "last.txt")
        # As the adapter runs it: without a controlling terminal.
        return _alternate(calls, lambda: subprocess.run(argv, input="hi", capture_output=True, text=True, env=env,
                                                        cwd=home, check=True, start_new_session=True),
                          lambda: runtime.invoke(request))


def _claude(url: str, calls: int) -> Sample:
    with tempfile.TemporaryDirectory(prefix="enact-bench-claude-") as scratch:
        home = Path(scratch)
        env = {"PATH": os.environ["PATH"], "HOME": str(home),
               "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL": url,
               "ANTHROPIC_API_KEY": "sk-ant-bench", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        conversations = home / "conversations"
        runtime = ClaudeRuntime(str(CLAUDE), conversation_dir=conversations, environ=env)
        request = RuntimeRequest(session_key="", prompt="hi", timeout_s=60)
        argv = command_line(str(CLAUDE), request, model="")
        runtime.invoke(request)  # makes the conversation directory the direct calls run in too
        return _alternate(calls, lambda: subprocess.run(argv, input="hi", capture_output=True, text=True,
                                                        env={**env, "CLAUDE_CODE_MAX_RETRIES": "1"},
                                                        cwd=conversations, check=True, start_new_session=True),
                          lambda: runtime.invoke(request))


def _openai(url: str, calls: int) -> Sample:
    runtime = OpenAIRuntime(f"{url}/v1", model="bench")
    request = RuntimeRequest(session_key="", prompt="hi", timeout_s=60)
    body = orjson.dumps({"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": False})
    where = urllib.parse.urlsplit(url)

    def direct() -> str:
        connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=60)
        try:
            connection.request("POST", "/v1/chat/completions", body=body, headers={
                "Content-Type": "application/json", "Accept": "application/json"})
            answer: str = orjson.loads(connection.getresponse().read())["choices"][0]["message"]["content"]
            return answer
        finally:
            connection.close()

    return _alternate(calls, direct, lambda: runtime.invoke(request))


def _program_starts(count: int) -> list[tuple[str, Sample]]:
    """Each way the daemon starts a program, alternated with a bare
    ``subprocess.run`` of the same argv (pipes for all three streams)."""
    cancel = CancellationToken()
    with tempfile.TemporaryDirectory(prefix="enact-bench-spawn-") as scratch:

        def bare(argv: list[str]) -> Callable[[], object]:
            return lambda: subprocess.run(argv, input=b"", capture_output=True, check=True, cwd=scratch)

        return [
            ("`true` by run_command (runtime, doctor)", _alternate(count, bare(["true"]), lambda: run_command(
                ["true"], stdin_text="", cwd=None, env=None, timeout_s=10, cancel=cancel))),
            ("`git --version` by host git", _alternate(count, bare(["git", "--version"]),
                                                       lambda: git(scratch, "--version"))),
            ("`true` as a commands.toml program", _alternate(count, bare(["true"]), lambda: run_program(
                ["true"], b"{}", timeout_s=10, cancel=cancel, run_dir=Path(scratch) / "run"))),
        ]
