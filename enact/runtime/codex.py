"""The Codex CLI as a runtime: ``codex exec --json``, resumed by thread id.

What is sent: the prompt, on the CLI's standard input; Codex itself talks to
its model provider as its own configuration (``$CODEX_HOME/config.toml``,
its login) says. What comes back is read from its JSON lines and from the
file ``--output-last-message`` writes (``enact.runtime._codex_events``).
"""

from __future__ import annotations

import os
import tempfile
import threading
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson

from enact.environment import cli_environment
from enact.runtime import (
    Capabilities,
    RuntimeFailure,
    RuntimeRequest,
    RuntimeResult,
    RuntimeUnavailable,
    Usage,
    checked_sandbox,
)
from enact.runtime._codex_events import interpret, last_line, total, usage_of
from enact.runtime._executable import find_executable as find_program
from enact.runtime._executable import install_root
from enact.runtime._subprocess import run_command
from enact.safe_files import UnsafeFile, read_inside

SANDBOXES = {"read-only": "read-only", "workspace-write": "workspace-write", "full-access": "danger-full-access"}
"""enact's sandbox modes in Codex's words."""

INSTALL_HINT = "install it (npm install -g @openai/codex) or set ENACT_CODEX_BIN to its path"

OWN_STATE = ("sessions", "archived_sessions", "log", "history.jsonl", "*.sqlite", "*.sqlite-*", ".tmp", "tmp",
             "thread-writer-locks", "shell_snapshots", "models_cache.json", "version.json", "installation_id")
"""In ``CODEX_HOME``, what codex writes as its own state (0.169, measured:
rollouts under ``sessions``, its sqlite databases of threads, logs, goals,
memories and queue with their -wal/-shm, scratch, locks, caches): a confined
call starts without the owner's and keeps its own in the task's private
home; everything else there (config, login, instructions, skills) it reads,
read-only."""

CLI_NEEDS = ("CODEX_HOME", "CODEX_*", "OPENAI_*", "AZURE_OPENAI_*", "SSL_CERT_*", "HTTPS_PROXY", "HTTP_PROXY",
             "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
"""What codex needs of the environment to reach its model, besides each
``env_key`` its configuration names (a model provider's key variable)."""

LAST_MESSAGE_LIMIT = 4 * 1024 * 1024
"""The most of Codex's answer file that is read (far above any reply)."""


def env_keys(codex_home: Path) -> tuple[str, ...]:
    """The ``env_key`` of each model provider in ``config.toml``: where
    codex reads a provider's key from."""
    import tomllib

    try:
        config = tomllib.loads((codex_home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    providers = config.get("model_providers")
    if not isinstance(providers, dict):
        return ()
    return tuple(str(p["env_key"]) for p in providers.values() if isinstance(p, dict) and p.get("env_key"))


class ThreadTotals:
    """The token totals of each thread as of its last turn. Codex 0.169
    reports in ``turn.completed`` the *thread's* running total, not the
    turn's, so a resumed turn's own spending is the difference. Kept in
    memory for the threads seen since start; for another one (after a
    restart) the total is read from the last ``token_count`` event of the
    thread's rollout file under ``$CODEX_HOME/sessions`` (for a confined
    call, the task's private home in its place)."""

    def __init__(self, codex_home: Path, *, keep: int = 1024) -> None:
        self.codex_home = codex_home
        self._keep = keep
        self._known: OrderedDict[str, Usage] = OrderedDict()
        self._lock = threading.Lock()

    def before(self, thread_id: str, *, codex_home: Path | None = None) -> Usage:
        with self._lock:
            known = self._known.get(thread_id)
        return known if known is not None else self._from_rollout(thread_id, codex_home or self.codex_home)

    def after(self, thread_id: str, total: Usage) -> None:
        with self._lock:
            self._known[thread_id] = total
            self._known.move_to_end(thread_id)
            while len(self._known) > self._keep:
                self._known.popitem(last=False)

    def _from_rollout(self, thread_id: str, codex_home: Path) -> Usage:
        total = Usage()
        for rollout in (codex_home / "sessions").rglob(f"rollout-*{thread_id}.jsonl"):
            try:
                lines = rollout.read_bytes().splitlines()
            except OSError:
                continue
            for line in reversed(lines):
                if b'"token_count"' not in line:
                    continue
                try:
                    info = orjson.loads(line)["payload"]["info"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    continue
                if isinstance(info, dict):
                    return usage_of(info.get("total_token_usage"))
        return total


def home_under_temp(home: Path, environ: Mapping[str, str]) -> bool:
    """Whether ``home`` lies under the temporary directory Codex would use
    (its TMPDIR, else /tmp): Codex 0.169 then refuses to create its helper
    binaries ("Refusing to create helper binaries under temporary dir")."""
    temp = Path(environ.get("TMPDIR") or "/tmp")
    return any(path.is_relative_to(under) for path in (home, home.resolve()) for under in (temp, temp.resolve()))


def find_executable(explicit: str, *, where: str) -> str:
    """An explicit path must exist (never a silent fallback to PATH); else
    ``codex`` on PATH. Raises RuntimeUnavailable saying what to do."""
    return find_program(explicit, program="codex", where=where, not_on_path=f"codex is not on PATH: {INSTALL_HINT}")


NATIVE_SKILLS = ".agents/skills"
"""Where, under its working directory, Codex (measured: 0.169) finds a
project's skills (``.codex/skills`` too), lists them and, asked for one,
opens its ``SKILL.md`` with a shell command: even in a project it does not
trust, and outside a git repository."""


class CodexRuntime:
    name = "codex"

    def __init__(
        self,
        executable: Callable[[], str],
        *,
        model: str = "",
        reasoning_effort: str = "",
        default_cwd: Path,
        conversation_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._executable = executable
        self.model = model
        self.reasoning_effort = reasoning_effort
        self.default_cwd = default_cwd
        self.conversation_dir = conversation_dir
        self._env = env
        environ = os.environ if env is None else env
        self.totals = ThreadTotals(Path(environ.get("CODEX_HOME") or Path.home() / ".codex"))

    own_state = OWN_STATE

    @property
    def waits_for(self) -> str:
        """What a call waits for, as ``runtime check --probe`` names it: the
        base URL of the model provider its config.toml selects, when it names one."""
        [home] = self.state_dirs
        try:
            config = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
            provider = config["model_providers"][config["model_provider"]]
            api = f"its model provider {config['model_provider']!r} at {provider['base_url']}"
        except (OSError, UnicodeError, tomllib.TOMLDecodeError, KeyError, TypeError):
            api = "its model provider (OpenAI's API unless its config.toml names another)"
        return f"codex exec, which waits for {api}"

    @property
    def state_dirs(self) -> tuple[Path, ...]:
        """What codex writes besides the worktree: its home (sessions, logs),
        replaced by a private one when a task is confined."""
        environ = self._env if self._env is not None else os.environ
        return (Path(environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser(),)

    @property
    def program_dirs(self) -> tuple[Path, ...]:
        """Where codex runs from (its npm prefix), kept visible to a
        confined call even when it lies under the private /tmp's place."""
        try:
            return (install_root(Path(self._executable())),)
        except RuntimeUnavailable:
            return ()

    @property
    def capabilities(self) -> Capabilities:
        """Agentic, keeps its sessions; a confined call runs codex under the prefix."""
        return Capabilities(agentic=True, keeps_history=True, confines_subprocesses=True,
                            state_dirs=self.state_dirs, own_state=self.own_state, program_dirs=self.program_dirs,
                            conversation_dir=self.conversation_dir, native_skills=NATIVE_SKILLS)

    @property
    def cli_needs(self) -> tuple[str, ...]:
        [home] = self.state_dirs
        return (*CLI_NEEDS, *env_keys(home))

    def argv(self, executable: str, request: RuntimeRequest, last_message: Path) -> list[str]:
        sandbox = SANDBOXES[checked_sandbox(request.sandbox)]
        common = ["--json", "--output-last-message", str(last_message), "--skip-git-repo-check"]
        if request.env is not None:  # what codex needs, its commands do not get
            kept = ", ".join(f'"{name}"' for name in self.cli_needs if name != "CODEX_HOME")
            common += ["-c", f"shell_environment_policy.exclude=[{kept}]"]
        if request.writable and sandbox == "workspace-write":
            # Codex keeps the .git of each place it may write read-only (and
            # the git directory a .git file names), unless it is such a place
            # itself: a task's own git directory is the task's to write.
            roots = ", ".join(orjson.dumps(str(path.resolve())).decode() for path in request.writable)
            common += ["-c", f"sandbox_workspace_write.writable_roots=[{roots}]"]
        if self.model:
            common += ["--model", self.model]
        if self.reasoning_effort:
            common += ["-c", f'model_reasoning_effort="{self.reasoning_effort}"']
        for image in request.images:
            common += ["--image", str(image)]
        if request.native_session and request.session_key:
            return [executable, "exec", "resume", request.native_session, *common,
                    "-c", f'sandbox_mode="{sandbox}"', "-"]
        cwd = request.cwd or self.default_cwd
        isolated = [] if request.session_key else ["--ephemeral"]
        return [executable, "exec", "--cd", str(cwd), "--sandbox", sandbox, "--color", "never", *common,
                *isolated, "-"]

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        executable = self._executable()
        [home] = self.state_dirs
        private_home = dict(request.private_state).get(home)  # confined: where its home really is
        resumed = request.native_session if request.session_key else None
        # Read before the turn adds to it.
        before = self.totals.before(resumed, codex_home=private_home) if resumed else Usage()
        # Confined, codex sees a private /tmp: its answer file goes to its
        # home (a task's private one, or a conversation's own, bound as it is),
        # named by its real path, where the home is mounted (codex fails to
        # open it through a symlinked parent: measured, 0.169).
        parent = private_home or (home if request.confine else None)
        with tempfile.TemporaryDirectory(prefix="enact-codex-", dir=parent) as scratch:
            scratch_seen_as = home.resolve() / Path(scratch).name if parent else Path(scratch)
            last_message = Path(scratch) / "last-message.txt"
            output = run_command(
                [*request.confine, *self.argv(executable, request, scratch_seen_as / last_message.name)],
                stdin_text=request.prompt,
                cwd=request.cwd or self.default_cwd,
                env=self._call_env(request, home, scratch_seen_as),
                timeout_s=request.timeout_s,
                cancel=request.cancel,
            )
            # Read as a file the call's commands could have replaced (a link
            # to a host file, a FIFO): only a regular one, inside, bounded.
            try:
                written = read_inside(Path(scratch), last_message.name, limit=LAST_MESSAGE_LIMIT) or ""
            except (UnsafeFile, OSError):
                written = ""
        result = interpret(request, output, written, spent_before=before)
        if result.native_session:
            self.totals.after(result.native_session, total(before, result.usage))
        return result

    def _call_env(self, request: RuntimeRequest, home: Path, scratch: Path) -> Mapping[str, str]:
        """The environment of one call: the runtime's (a confined call's reduced
        to what Codex needs, ``cli_environment``), but for a home under
        Codex's temporary directory, where Codex will not lay out its sandbox
        helper (every shell call then fails with ``bwrap: execvp
        codex-linux-sandbox``): there it is given the call's scratch
        directory (which its home does not lie under) as TMPDIR."""
        environ = os.environ if self._env is None else self._env
        env = environ if request.env is None else cli_environment(request.env, self.cli_needs, environ)
        if not home_under_temp(home, environ):
            return env
        return {**env, "TMPDIR": str(scratch)}

    def logged_in(self) -> bool:
        """``codex login status``, which reads only its home: 0 when it has a
        login (ChatGPT's, or a key saved by ``codex login --with-api-key``)."""
        from enact.cancellation import CancellationToken

        output = run_command([self._executable(), "login", "status"], stdin_text="", cwd=None, env=self._env,
                             timeout_s=30, cancel=CancellationToken())
        return output.exit_code == 0

    def version(self) -> str:
        """``codex --version``'s answer; raises RuntimeFailure."""
        from enact.cancellation import CancellationToken

        output = run_command([self._executable(), "--version"], stdin_text="", cwd=None, env=self._env,
                             timeout_s=30, cancel=CancellationToken())
        if output.exit_code != 0:
            raise RuntimeFailure(f"codex --version exited {output.exit_code}: {last_line(output.stderr)}")
        return output.stdout.strip()
