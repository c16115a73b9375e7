"""The doctor: a run of the repository's own checks in a checkout.

Which command runs, first found wins, always as the revision the change
is checked against has it (a task's base, a land's target; never the
change's own ``.enact.toml``):

1. ``.enact.toml`` at the repository root: ``[doctor] command = "…"`` and
   optionally ``timeout = <seconds>`` (``enact.tasks.repo_config``);
2. the setting ``tasks.doctor_command``;
3. ``python -m pytest -q`` when the repository has tests (a ``tests/`` or
   ``test/`` directory, or ``test_*.py`` at its root);
4. nothing: validation is the protected-path check alone.

The command runs through ``sh -c`` in the checkout (confined when the task
is), in its own process group, killed with it on timeout or cancellation,
without a terminal and with ``NO_COLOR=1``/``PY_COLORS=0``; what colour
codes are left are stripped. Every pytest it starts writes a JUnit XML
report to a private path (``PYTEST_ADDOPTS``; the last pytest to finish
wins), read into ``DoctorResult.tests``. Its full output is appended to the
log; the model gets at most ``HEAD_TAIL_LIMIT`` characters of it, head and
tail.
"""

from __future__ import annotations

import re
import shlex
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from enact.cancellation import CancellationToken
from enact.environment import task_environment
from enact.frozen_dataclass import dataclass
from enact.runtime import RuntimeTimeout, RuntimeUnavailable
from enact.runtime._subprocess import run_command
from enact.tasks import repo_config
from enact.tasks.confine import Confinement
from enact.tasks.settings import TasksSettings
from enact.tasks.test_report import ReportError, TestRun, read_junit

DEFAULT_COMMAND = "python -m pytest -q"
HEAD_TAIL_LIMIT = 24_000
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_COLOUR_FORCING = ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_FORCE_COLOR", "TTY_COMPATIBLE")


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorPlan:
    command: str
    """"" when the repository has no checks to run."""
    timeout_s: float
    source: str
    """Where the command came from, for the log and the summary."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorResult:
    passed: bool
    summary: str
    """One line: what ran and how it ended, or which protected paths changed."""
    head_tail: str
    """What the model is shown of the output (≤ HEAD_TAIL_LIMIT characters)."""
    protected_changed: tuple[str, ...] = ()
    tests: TestRun | None = None
    """What the test run ran, when it wrote a report."""
    report_problem: str = ""
    """Why a report there was could not be read."""
    completed: bool = True
    """False when the command timed out or could not start: nothing is known of its tests."""


def plan_at(repo: Path, revision: str, *, settings: TasksSettings) -> DoctorPlan:
    """The command the doctor runs for changes to ``revision`` of ``repo``.
    Raises RepoConfigError."""
    own = repo_config.read_at(repo, revision)
    timeout_s = own.doctor_timeout_s or settings.doctor_timeout_s
    if own.doctor_command is not None:
        return DoctorPlan(command=own.doctor_command, timeout_s=timeout_s, source=repo_config.REPO_CONFIG)
    if settings.doctor_command:
        return DoctorPlan(command=settings.doctor_command, timeout_s=timeout_s,
                          source="tasks.doctor_command")
    names = repo_config.root_names_at(repo, revision)
    if "tests" in names or "test" in names or any(re.fullmatch(r"test_.*\.py", name) for name in names):
        return DoctorPlan(command=DEFAULT_COMMAND, timeout_s=timeout_s, source="default")
    return DoctorPlan(command="", timeout_s=timeout_s, source="none")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escapes (colours, cursor moves): they cost
    a model's prompt and a reader's log, and say nothing."""
    return _ANSI.sub("", text).replace("\x1b", "")


def head_tail(text: str, limit: int = HEAD_TAIL_LIMIT) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n… {len(text) - limit} characters omitted (the full output is in the task log) …\n"
    keep = limit - len(marker) - 40  # room for the count's digits growing
    return text[: keep // 2] + marker + text[-(keep - keep // 2):]


def _environment(confine: Confinement, report_inside: Path, worktree: Path) -> dict[str, str]:
    env = {key: value for key, value in confine.env.items() if key not in _COLOUR_FORCING}
    env.update(NO_COLOR="1", PY_COLORS="0", TERM="dumb")
    # Its root the worktree's, even below a directory with a pytest config
    # of its own (a home inside a checkout): pytest names a test from its
    # root, and the base's worktree and the task's lie at different places.
    ours = (f"--junitxml={shlex.quote(str(report_inside))} -p no:cacheprovider "
            f"--rootdir={shlex.quote(str(worktree.resolve()))}")
    env["PYTEST_ADDOPTS"] = f"{env['PYTEST_ADDOPTS']} {ours}" if env.get("PYTEST_ADDOPTS") else ours
    # Bytecode of this run's own, beside the report: a file the model edited
    # within the second of an earlier run, at the same size, would otherwise
    # be run from that run's stale __pycache__ (seen: a repair from 41 to 42
    # still failed as 41).
    env["PYTHONPYCACHEPREFIX"] = str(report_inside.with_suffix(".pycache"))
    return env


def run_doctor(worktree: Path, plan: DoctorPlan, *, log_path: Path, cancel: CancellationToken,
               confine: Confinement | None = None) -> DoctorResult:
    """Run ``plan`` in ``worktree``. Raises RuntimeCancelled when ``cancel``
    fires (the command's process group is killed first)."""
    if not plan.command:
        append_log(log_path, "doctor: no test command and no tests found; nothing to run\n")
        return DoctorResult(passed=True, summary="no checks to run (no test command, no tests)", head_tail="")
    confine = confine or Confinement(env=task_environment(tmp=None, home=None), unconfined="not asked to confine")
    argv = confine.wrap(["sh", "-c", plan.command])
    append_log(log_path, f"doctor: $ {plan.command}   (from {plan.source}, timeout {plan.timeout_s:g} s, "
                         f"{'confined' if confine.confined else 'not confined'})\n")
    with tempfile.TemporaryDirectory(prefix="enact-doctor-") as own_tmp:
        # The report goes where the command may write: the confinement's
        # private /tmp (seen inside at /tmp), else a directory of our own.
        name = f"enact-doctor-report-{uuid.uuid4().hex}.xml"
        outside = (confine.tmp if confine.tmp is not None else Path(own_tmp)) / name
        inside = Path("/tmp") / name if confine.confined else outside
        result = _run(worktree, plan, argv, _environment(confine, inside, worktree), log_path=log_path, cancel=cancel)
        try:
            return replace(result, tests=read_junit(outside))
        except ReportError as error:
            append_log(log_path, f"doctor: {error}\n")
            return replace(result, report_problem=str(error))
        finally:
            outside.unlink(missing_ok=True)


def _run(worktree: Path, plan: DoctorPlan, argv: list[str], env: dict[str, str], *, log_path: Path,
         cancel: CancellationToken) -> DoctorResult:
    try:
        output = run_command(argv, stdin_text="", cwd=worktree, env=env, timeout_s=plan.timeout_s, cancel=cancel)
    except RuntimeTimeout:
        summary = f"`{plan.command}` timed out after {plan.timeout_s:g} s"
        append_log(log_path, f"doctor: {summary}\n")
        return DoctorResult(passed=False, summary=summary, head_tail=summary, completed=False)
    except RuntimeUnavailable as error:
        summary = f"`{plan.command}` could not start: {error}"
        append_log(log_path, f"doctor: {summary}\n")
        return DoctorResult(passed=False, summary=summary, head_tail=summary, completed=False)
    text = strip_ansi(output.stdout + (("\n" + output.stderr) if output.stderr else ""))
    verdict = "passed" if output.exit_code == 0 else f"failed (exit {output.exit_code})"
    summary = f"`{plan.command}` {verdict} in {output.duration_s:.1f} s"
    append_log(log_path, f"{text.rstrip()}\ndoctor: {summary}\n")
    return DoctorResult(passed=output.exit_code == 0, summary=summary, head_tail=head_tail(text))


def append_log(log_path: Path, text: str) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"[{stamp}] {text}" if not text.startswith("\n") else text)
