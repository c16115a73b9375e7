"""The ``claude`` runtime: the Claude Code CLI in print mode.

``claude -p --output-format stream-json --verbose [--resume ID] [--model M]``
with the prompt on standard input prints one JSON object a line: the
session's messages as they happen (the tool uses and their results, which
the task log records) and, last, one result object (what ``--output-format
json`` prints alone). Claude Code keeps its sessions
per working directory, so a conversation (which has no directory of its own)
always runs in the same one, ``<home>/claude``, or a resume would not find
its session.

Measured with the real CLI (2.1.328): against a server answering 401 it
retries for minutes by default, so its retries are bounded
(``CLAUDE_CODE_MAX_RETRIES=1``: it exits 1 after about 4 s with
``api_error_status: 401``) and enact retries by its own policy. Without a key
it answers ``is_error`` with "Not logged in"; an unreachable server gives
"Can't reach the API server" or "Connection refused … (ECONNREFUSED)" and
no status; a resume of an unknown session
exits 1 with an empty stdout and "No conversation found with session ID" on
stderr.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import orjson

from enact.environment import cli_environment
from enact.runtime import (
    Capabilities,
    RuntimeFailure,
    RuntimeRequest,
    RuntimeResult,
    checked_sandbox,
)
from enact.runtime._claude_output import clip, parse_output
from enact.runtime._executable import install_root
from enact.runtime._subprocess import run_command

EDIT_TOOLS = ("Bash", "Edit", "Write", "NotebookEdit")
"""Claude Code's tools that change files or run commands."""

_SANDBOX_FLAGS: dict[str, tuple[str, ...]] = {
    # Not offered to the model at all (nor to its subagents).
    "read-only": ("--permission-mode", "dontAsk", "--disallowedTools", *EDIT_TOOLS),
    # acceptEdits lets it edit inside the working directory only; the listed
    # tools run without asking (print mode cannot ask).
    "workspace-write": ("--permission-mode", "acceptEdits", "--allowedTools", *EDIT_TOOLS),
    "full-access": ("--permission-mode", "bypassPermissions"),
}

NATIVE_SKILLS = ".claude/skills"
"""Where, under its working directory, Claude Code (measured: 2.1.328) finds a project's skills."""
CHECK_TIMEOUT_S = 15.0
"""``claude --version`` and ``claude auth status`` read local files only (about 0.6 s)."""

OWN_STATE = ("projects", "sessions", "todos", "shell-snapshots", "statsig", "history.jsonl", "file-history",
             "backups", "debug", "paste-cache", "session-env", "telemetry", "ide", "cache", "plans")
"""In the config directory, what claude writes as its own state (2.1.328:
transcripts and per-project memory under ``projects``, its session and
todo records, shell snapshots, history, backups of ``.claude.json``,
caches): a confined call starts without the owner's and keeps its own in
the task's private directory; everything else there (settings, login,
instructions, commands, plugins) it reads, read-only."""


def sandbox_flags(sandbox: str) -> tuple[str, ...]:
    return _SANDBOX_FLAGS[checked_sandbox(sandbox)]


def command_line(executable: str, request: RuntimeRequest, *, model: str) -> list[str]:
    argv = [executable, "-p", "--output-format", "stream-json", "--verbose", *sandbox_flags(request.sandbox)]
    if request.native_session is not None:
        argv += ["--resume", request.native_session]
    if model:
        argv += ["--model", model]
    # Variadic tool lists end here: what follows would be read as a tool name.
    return argv


def prompt_text(request: RuntimeRequest) -> str:
    if not request.images:
        return request.prompt
    # Claude Code reads an image from its path with its Read tool.
    paths = "\n".join(f"- {image}" for image in request.images)
    return f"{request.prompt}\n\nAttached images (read them from these paths):\n{paths}"


CLI_NEEDS = ("ANTHROPIC_*", "CLAUDE_*", "SSL_CERT_*", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY",
             "https_proxy", "http_proxy", "no_proxy")
"""What Claude Code needs of the environment to reach its model."""


class ClaudeRuntime:
    name = "claude"
    cli_needs = CLI_NEEDS

    def __init__(self, executable: str, *, model: str = "", conversation_dir: Path,
                 environ: Mapping[str, str] | None = None) -> None:
        self.executable = executable
        self.model = model
        self.conversation_dir = conversation_dir
        self._environ = environ

    @property
    def config_dir(self) -> Path:
        """``CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
        environ = os.environ if self._environ is None else self._environ
        named = environ.get("CLAUDE_CONFIG_DIR")
        return (Path(named) if named else Path(environ.get("HOME") or Path.home()) / ".claude").expanduser()

    own_state = OWN_STATE

    @property
    def waits_for(self) -> str:
        """What a call waits for, as ``runtime check --probe`` names it."""
        environ = os.environ if self._environ is None else self._environ
        api = environ.get("ANTHROPIC_BASE_URL") or "Anthropic's API"
        return f"{self.executable} -p, which waits for its model at {api}"

    @property
    def state_dirs(self) -> tuple[Path, ...]:
        """What claude writes besides the worktree, replaced by a private one
        when a task is confined: its config directory (sessions, credentials,
        settings). Measured (2.1.328): with ``CLAUDE_CONFIG_DIR`` set it
        writes only there; without, in ``~/.claude`` and ``~/.claude.json``,
        which it rewrites through a temporary file beside it renamed over
        it; unwritable (read-only to a confined call, as a read-only bind
        inside the directory is), it is left as it was and the call still
        succeeds. Its scratch files go to /tmp (the task's private one)."""
        return (self.config_dir,)

    @property
    def program_dirs(self) -> tuple[Path, ...]:
        """Where claude runs from (its npm prefix), kept visible to a
        confined call even when it lies under the private /tmp's place."""
        return (install_root(Path(self.executable)),)

    @property
    def capabilities(self) -> Capabilities:
        """Agentic, keeps its sessions; a confined call runs claude under the prefix."""
        return Capabilities(agentic=True, keeps_history=True, confines_subprocesses=True,
                            state_dirs=self.state_dirs, own_state=self.own_state, program_dirs=self.program_dirs,
                            conversation_dir=self.conversation_dir, native_skills=NATIVE_SKILLS)

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        cwd = request.cwd
        if cwd is None:
            self.conversation_dir.mkdir(parents=True, exist_ok=True)
            cwd = self.conversation_dir
        environ = os.environ if self._environ is None else self._environ
        # Its commands get what it gets: Claude Code (2.1.328, measured) keeps
        # its key from them only with CLAUDE_CODE_SUBPROCESS_ENV_SCRUB, which
        # requires its own sandbox (socat, bwrap) or refuses every command.
        env = dict(environ) if request.env is None else cli_environment(request.env, CLI_NEEDS, environ)
        output = run_command(
            [*request.confine, *command_line(self.executable, request, model=self.model)],
            stdin_text=prompt_text(request),
            cwd=cwd,
            env={**env, "CLAUDE_CODE_MAX_RETRIES": "1"},
            timeout_s=request.timeout_s,
            cancel=request.cancel,
        )
        return parse_output(output, resumed=request.native_session)


def login_state(executable: str) -> tuple[bool | None, str]:
    """``claude auth status --json``, which reads only local state: whether
    Claude Code has a login or a key (None when it cannot tell), and how.
    Its output must be a pipe: on a terminal it prints its JSON with cursor moves."""
    from enact.cancellation import CancellationToken

    try:
        output = run_command([executable, "auth", "status", "--json"], stdin_text="", cwd=None, env=None,
                             timeout_s=CHECK_TIMEOUT_S, cancel=CancellationToken())
        document = orjson.loads(output.stdout)
    except (RuntimeFailure, orjson.JSONDecodeError) as error:
        return None, f"`claude auth status` did not say: {clip(str(error))}"
    if not isinstance(document, dict) or not isinstance(document.get("loggedIn"), bool):
        return None, f"`claude auth status` did not say: {clip(output.stdout) or 'no output'}"
    how = str(document.get("authMethod", ""))
    source = document.get("apiKeySource")
    return document["loggedIn"], f"{how} from {source}" if isinstance(source, str) else how


def version_of(executable: str) -> str:
    """``claude --version`` (``2.1.328 (Claude Code)``); raises RuntimeFailure."""
    from enact.cancellation import CancellationToken

    output = run_command([executable, "--version"], stdin_text="", cwd=None, env=None,
                         timeout_s=CHECK_TIMEOUT_S, cancel=CancellationToken())
    version = output.stdout.strip()
    if output.exit_code != 0 or not version:
        raise RuntimeFailure(f"{executable} --version exited with {output.exit_code}: "
                             f"{clip(output.stderr) or 'no output'}")
    return version
