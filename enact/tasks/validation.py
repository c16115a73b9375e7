"""Validation of a change against the revision it is checked against (a
task's base, a land's target): the protected paths
(``enact.tasks.protected``), then the doctor as that revision has it
(``enact.tasks.doctor``), then the rule that the change runs every test
the revision ran (``enact.tasks.test_report``).

What the doctor runs on the revision itself is measured once per
repository, revision and command, in a temporary worktree of the
revision, confined like the task, and kept in
``$ENACT_HOME/doctor-baselines/`` (out of a confined task's sight).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import field, replace
from pathlib import Path

import orjson

from enact.cancellation import CancellationToken
from enact.frozen_dataclass import dataclass
from enact.tasks import repo_config
from enact.tasks.confine import Confinement, confinement
from enact.tasks.doctor import DoctorPlan, DoctorResult, append_log, plan_at, run_doctor
from enact.tasks.host_git import WorktreeError, git
from enact.tasks.protected import Guards
from enact.tasks.settings import TasksSettings
from enact.tasks.test_report import TestRun, not_run

BASELINES_DIR = "doctor-baselines"


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    home: Path
    settings: TasksSettings
    plan: DoctorPlan
    guards: Guards
    allow_fewer_tests: bool = False
    """The owner's leave for the change to run fewer of the base's tests."""
    _measured: dict[str, TestRun | None] = field(default_factory=dict)
    """The baseline once this validation knows it (also when it could not
    be kept: a base run that timed out is not run again for each repair)."""

    @classmethod
    def against(cls, repo: Path, revision: str, *, home: Path, settings: TasksSettings, allow_paths: Sequence[str] = (),
                allow_fewer_tests: bool = False) -> Validation:
        """Validation of changes to ``revision`` of ``repo``, by its own
        ``.enact.toml``. Raises RepoConfigError."""
        own = repo_config.read_at(repo, revision)
        guards = Guards(repo=repo, base=revision, allowed=tuple(allow_paths),
                        patterns=(*settings.protected_paths, *own.protected))
        return cls(home=home, settings=settings, plan=plan_at(repo, revision, settings=settings), guards=guards,
                   allow_fewer_tests=allow_fewer_tests)

    def rules(self) -> str:
        """What validation holds a change to, in words (for the model's prompt)."""
        plan, unlocked = self.plan, self.guards.allowed
        checks = f"`{plan.command}` (from {plan.source})" if plan.command else "no test command"
        fewer = "" if self.allow_fewer_tests else "; it fails when a test the base ran does not run"
        return (f"the host runs {checks}{fewer}. A change to {', '.join(self.guards.patterns)} or to the test "
                "sections of pyproject.toml or setup.cfg fails validation"
                + (f", but for what the owner unlocked: {', '.join(unlocked)}." if unlocked else "."))

    def check(self, root: Path, *, log_path: Path, cancel: CancellationToken, confine: Confinement | None = None,
              changed: Sequence[str] | None = None) -> DoctorResult:
        """Validate the checkout at ``root``. ``changed``: the paths the
        change touched, for the protected-path check (a land, whose change
        was validated so, passes None). Raises RuntimeCancelled."""
        unlocked: tuple[str, ...] = ()
        if changed is not None:
            verdict = self.guards.check(root, changed)
            if verdict.blocked:
                summary = (f"protected paths changed without the owner's leave (`enact task add --allow-path`): "
                           f"{', '.join(verdict.blocked)}")
                append_log(log_path, f"doctor: {summary}\n")
                return DoctorResult(passed=False, summary=summary, head_tail=summary,
                                    protected_changed=verdict.blocked)
            unlocked = verdict.unlocked
        base = self.baseline(log_path=log_path, cancel=cancel)
        result = run_doctor(root, self.plan, log_path=log_path, cancel=cancel, confine=confine)
        judged = self._judge(result, base)
        if unlocked:
            judged = replace(judged, summary=f"{judged.summary}; protected paths changed with the owner's leave: "
                                             f"{', '.join(unlocked)}")
        append_log(log_path, f"doctor: verdict: {judged.summary}\n")
        return judged

    def _judge(self, result: DoctorResult, base: TestRun | None) -> DoctorResult:
        """``result`` held to the base's tests: every test the base ran
        must run again, unless the owner allowed fewer."""
        if base is None or not base.ran:
            counts = f": {result.tests.counts}" if result.tests is not None else ""
            return replace(result, summary=f"{result.summary}{counts}")
        ran = result.tests.counts if result.tests is not None else "no test report"
        summary = f"{result.summary}: {ran}; base: {base.counts}"
        if result.tests is None:
            short = ("the base's test run wrote a test report and this one did not"
                     + (f" ({result.report_problem})" if result.report_problem else ""))
        else:
            short = not_run(base, result.tests)
        if not short or not result.completed:
            return replace(result, summary=summary)
        if self.allow_fewer_tests:
            return replace(result, summary=f"{summary}; {short}, which the owner allowed")
        return replace(result, passed=False, summary=f"{summary}; {short}",
                       head_tail=f"{short}\n\n{result.head_tail}")

    def baseline(self, *, log_path: Path, cancel: CancellationToken) -> TestRun | None:
        """What the doctor runs on the revision itself (None: no command,
        or it wrote no test report), measured on the first call."""
        if not self.plan.command:
            return None
        if "base" not in self._measured:
            self._measured["base"] = self._measure(log_path=log_path, cancel=cancel)
        return self._measured["base"]

    def _measure(self, *, log_path: Path, cancel: CancellationToken) -> TestRun | None:
        guards = self.guards
        key = hashlib.sha256("\0".join((str(guards.repo.resolve()), guards.base, self.plan.command,
                                         str(self.plan.timeout_s))).encode()).hexdigest()[:40]
        cache = self.home / BASELINES_DIR / f"{key}.json"
        try:
            stored = orjson.loads(cache.read_bytes())
            return None if stored["tests"] is None else TestRun(**{k: tuple(v) for k, v in stored["tests"].items()})
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
            pass  # not measured yet (or a partial file): measure again
        append_log(log_path, f"doctor: first on the base {guards.base[:12]}, to learn which tests it runs\n")
        result = self._run_on_revision(log_path=log_path, cancel=cancel)
        ran = result.tests.counts if result.tests is not None else "no test report"
        append_log(log_path, f"doctor: the base {guards.base[:12]} runs: {ran}\n")
        if result.completed and not result.report_problem:
            tests = None if result.tests is None else {
                "passed": result.tests.passed, "failed": result.tests.failed, "errors": result.tests.errors,
                "skipped": result.tests.skipped}
            partial = cache.with_suffix(f".{uuid.uuid4().hex}.tmp")
            partial.write_bytes(orjson.dumps({"tests": tests, "summary": result.summary}))
            os.replace(partial, cache)  # whole or not at all, for a worker reading it meanwhile
        return result.tests

    def _run_on_revision(self, *, log_path: Path, cancel: CancellationToken) -> DoctorResult:
        repo, revision = self.guards.repo, self.guards.base
        scratch = self.home / BASELINES_DIR / f"work-{uuid.uuid4().hex[:12]}"
        scratch.parent.mkdir(parents=True, exist_ok=True)
        git(repo, "worktree", "add", "--detach", "--quiet", str(scratch), revision)
        try:
            # Confined and given the environment as the candidate's run is,
            # so the two runs differ only by the change.
            with confinement(self.settings.confinement, home=self.home, worktree=scratch,
                             passthrough=self.settings.env_passthrough) as confine:
                return run_doctor(scratch, self.plan, log_path=log_path, cancel=cancel, confine=confine)
        finally:
            # Not ``git worktree remove``: the base's doctor could write the
            # scratch worktree's ``.git``. Its directory goes, then the
            # repository forgets it.
            shutil.rmtree(scratch, ignore_errors=True)
            with contextlib.suppress(WorktreeError):  # else forgotten at the repository's next prune
                git(repo, "worktree", "prune")


def remove_leftovers(home: Path, *, older_than_s: float, now: float | None = None) -> list[Path]:
    """Remove the temporary worktrees of base runs that a crash left in
    ``$ENACT_HOME/doctor-baselines`` (their repository forgets them at its
    next ``git worktree prune``): only those older than any run could
    take, since a worker or a land may be measuring a base right now.
    Returns what it removed."""
    now = time.time() if now is None else now
    removed = []
    for leftover in sorted((home / BASELINES_DIR).glob("work-*")):
        try:
            stale = now - leftover.stat().st_mtime > older_than_s
        except OSError:
            continue
        if stale:
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(leftover)
    return removed
