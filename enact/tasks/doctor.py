"""The doctor: validation of a task's worktree by the repository's own checks.

Which command runs, first found wins:

1. ``.enact.toml`` at the repository root: ``[doctor] command = "…"`` and
   optionally ``timeout = <seconds>``;
2. the setting ``tasks.doctor_command``;
3. ``python -m pytest -q`` when the repository has tests (a ``tests/`` or
   ``test/`` directory, or ``test_*.py`` at its root);
4. nothing: validation is the protected-path check alone.

The command runs through ``sh -c`` in the worktree (confined when the task
is), in its own process group, killed with it on timeout or cancellation.
Its full output is appended to the task's log; the model gets at most
``HEAD_TAIL_LIMIT`` characters of it, head and tail.

Protected paths (``tasks.protected_paths``) are the repository's own
guards (its tests, its CI, this file): a task that changes one fails
validation unless its request or brief names that path.
"""

from __future__ import annotations

import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from enact.cancellation import CancellationToken
from enact.runtime import RuntimeTimeout, RuntimeUnavailable
from enact.runtime._subprocess import run_command
from enact.tasks.confine import Confinement
from enact.tasks.environment import task_environment

REPO_CONFIG = ".enact.toml"
DEFAULT_COMMAND = "python -m pytest -q"
DEFAULT_PROTECTED = ("tests/", ".ci/", ".github/", REPO_CONFIG)
HEAD_TAIL_LIMIT = 24_000


class DoctorConfigError(ValueError):
    """The repository's ``.enact.toml`` cannot be used; one line naming it."""


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


def _has_tests(root: Path) -> bool:
    return (root / "tests").is_dir() or (root / "test").is_dir() or any(root.glob("test_*.py"))


def plan(root: Path, *, settings: Any) -> DoctorPlan:
    """The command the doctor runs for the repository at ``root``;
    ``settings`` is the daemon's Config. Raises DoctorConfigError."""
    timeout_s = float(settings["tasks.doctor_timeout_s"])
    path = root / REPO_CONFIG
    if path.is_file():
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise DoctorConfigError(f"{REPO_CONFIG} cannot be read: {error}") from None
        section = document.get("doctor", {})
        if not isinstance(section, dict):
            raise DoctorConfigError(f"{REPO_CONFIG}: [doctor] must be a table")
        command, timeout = section.get("command"), section.get("timeout", timeout_s)
        if command is not None and (not isinstance(command, str) or not command.strip()):
            raise DoctorConfigError(f"{REPO_CONFIG}: [doctor] command must be a non-empty string")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise DoctorConfigError(f"{REPO_CONFIG}: [doctor] timeout must be a positive number of seconds")
        if command is not None:
            return DoctorPlan(command=command, timeout_s=float(timeout), source=REPO_CONFIG)
    if settings["tasks.doctor_command"]:
        return DoctorPlan(command=settings["tasks.doctor_command"], timeout_s=timeout_s,
                          source="tasks.doctor_command")
    if _has_tests(root):
        return DoctorPlan(command=DEFAULT_COMMAND, timeout_s=timeout_s, source="default")
    return DoctorPlan(command="", timeout_s=timeout_s, source="none")


def protected_changes(changed: Sequence[str], protected: Sequence[str], asked: str) -> tuple[str, ...]:
    """The changed paths under a protected path (a prefix ending in ``/``
    is a directory, anything else one file) that ``asked`` (the request and
    brief) does not name."""
    hits = []
    for path in changed:
        for guard in protected:
            inside = path.startswith(guard) if guard.endswith("/") else path == guard
            if inside and guard not in asked and path not in asked:
                hits.append(path)
                break
    return tuple(hits)


def head_tail(text: str, limit: int = HEAD_TAIL_LIMIT) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n… {len(text) - limit} characters omitted (the full output is in the task log) …\n"
    keep = limit - len(marker) - 40  # room for the count's digits growing
    return text[: keep // 2] + marker + text[-(keep - keep // 2):]


def run_doctor(
    worktree: Path,
    *,
    settings: Any,
    log_path: Path,
    cancel: CancellationToken,
    confine: Confinement | None = None,
    changed: Sequence[str] = (),
    asked: str = "",
) -> DoctorResult:
    """Validate ``worktree``. ``changed`` and ``asked`` (request and brief)
    feed the protected-path check; a caller landing a merged result passes
    neither. Raises RuntimeCancelled when ``cancel`` fires (the command's
    process group is killed first) and DoctorConfigError for a bad
    ``.enact.toml``."""
    protected = protected_changes(changed, tuple(settings["tasks.protected_paths"]), asked)
    if protected:
        listed = ", ".join(protected)
        summary = f"protected paths changed without being asked: {listed}"
        _append(log_path, f"doctor: {summary}\n")
        return DoctorResult(passed=False, summary=summary, head_tail=summary, protected_changed=protected)
    chosen = plan(worktree, settings=settings)
    if not chosen.command:
        _append(log_path, "doctor: no test command and no tests found; nothing to run\n")
        return DoctorResult(passed=True, summary="no checks to run (no test command, no tests)", head_tail="")
    confine = confine or Confinement(env=task_environment(tmp=None, home=None), unconfined="not asked to confine")
    argv = confine.wrap(["sh", "-c", chosen.command])
    _append(log_path, f"doctor: $ {chosen.command}   (from {chosen.source}, timeout {chosen.timeout_s:g} s, "
                      f"{'confined' if confine.confined else 'not confined'})\n")
    try:
        output = run_command(argv, stdin_text="", cwd=worktree, env=confine.env, timeout_s=chosen.timeout_s,
                             cancel=cancel)
    except RuntimeTimeout:
        summary = f"`{chosen.command}` timed out after {chosen.timeout_s:g} s"
        _append(log_path, f"doctor: {summary}\n")
        return DoctorResult(passed=False, summary=summary, head_tail=summary)
    except RuntimeUnavailable as error:
        summary = f"`{chosen.command}` could not start: {error}"
        _append(log_path, f"doctor: {summary}\n")
        return DoctorResult(passed=False, summary=summary, head_tail=summary)
    text = output.stdout + (("\n" + output.stderr) if output.stderr else "")
    verdict = "passed" if output.exit_code == 0 else f"failed (exit {output.exit_code})"
    summary = f"`{chosen.command}` {verdict} in {output.duration_s:.1f} s"
    _append(log_path, f"{text.rstrip()}\ndoctor: {summary}\n")
    return DoctorResult(passed=output.exit_code == 0, summary=summary, head_tail=head_tail(text))


def _append(log_path: Path, text: str) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"[{stamp}] {text}" if not text.startswith("\n") else text)
