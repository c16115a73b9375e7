"""One update attempt, driven end to end by the process that runs it:
check, install the release, its doctor, a backup, the takeover, the
canary, probation, ``current``; and, when the new release does not hold,
the old release's takeover back, the backup restored if the new release
migrated the home, and one notice to the owner. Every step is journaled
before it runs (``enact.update.history``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from enact.cancellation import CancellationToken
from enact.cli._client import DaemonError, NotRunning, request
from enact.config import Config, RuntimeSettings
from enact.frozen_dataclass import dataclass
from enact.messages.common import HUMAN_CLI
from enact.messages.update import Notify
from enact.tasks.confine import ConfinementUnavailable, confinement
from enact.tasks.doctor import plan_at, run_doctor
from enact.tasks.repo_config import RepoConfigError
from enact.tasks.settings import TasksSettings
from enact.update import backups, daemons, releases
from enact.update.canary import canary
from enact.update.check import check, running_release
from enact.update.history import FAILED, REFUSED, ROLLED_BACK, UPDATED, Journal
from enact.update.releases import Release, ReleaseError
from enact.update.settings import UpdateSettings

ROLLBACK_FAILED = "rollback_failed"
"""The old release did not take the home back either: nothing serves it."""
STOP_AFTER_FENCE_S = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    attempt: str
    outcome: str
    reason: str
    serving: Release


class Updater:
    def __init__(self, home: Path, config: Config, *, origin: str = HUMAN_CLI, notify: str = "") -> None:
        self.home = home
        self.config = config
        self.settings = config.typed(UpdateSettings)
        self.journal = Journal(home)
        self.origin = origin
        self.notify_to = notify
        """The conversation (``channel:id``) that asked, told how it ends; "": only a failure is told, to
        the owner's locked conversation."""

    # -- update -----------------------------------------------------------

    def update(self) -> Outcome:
        with self.journal.locked():
            found = check(self.home, self.settings)
            old = found.running
            attempt = self.journal.start(kind="update", origin=self.origin, from_release=old,
                                         to_revision=found.authoritative)
            if not found.possible:
                return self._end(attempt, REFUSED, found.why_not, old)
            self.journal.step(attempt, "installing")
            try:
                new = releases.install(self.home, Path(found.repository), found.authoritative,
                                       log=self.journal.log_of(attempt))
            except ReleaseError as error:
                return self._end(attempt, FAILED, f"the release was not installed: {error}", old)
            self.journal.step(attempt, "doctor")
            problem = self._doctor(attempt, Path(found.repository), new)
            if problem:
                return self._end(attempt, FAILED, problem, old)
            self.journal.step(attempt, "backup")
            try:
                backup = backups.take(old, self.home)
            except backups.BackupFailed as error:
                return self._end(attempt, FAILED, str(error), old)
            if backup is None:
                self.journal.step(attempt, "no backup (the running release has no `enact backup`)")
            return self._hand_over(attempt, old, new, backup)

    def _doctor(self, attempt: str, repository: Path, new: Release) -> str:
        """"" when the repository's doctor passes on the release; else why not."""
        tasks = self.config.typed(TasksSettings)
        source = Path(new.environment).parent
        try:
            plan = plan_at(repository, new.revision, settings=tasks)
            with confinement(tasks.confinement, home=self.home, worktree=source,
                             passthrough=tasks.env_passthrough) as confine:
                # The release's interpreter first: the doctor tests what it installed.
                path = f"{Path(new.environment) / 'bin'}:{confine.env.get('PATH', '')}"
                confine = replace(confine, env={**confine.env, "PATH": path})
                result = run_doctor(source, plan, log_path=self.journal.log_of(attempt), cancel=CancellationToken(),
                                    confine=confine)
        except (RepoConfigError, ConfinementUnavailable) as error:
            return f"the doctor did not run: {error}"
        return "" if result.passed else f"the doctor failed: {result.summary}"

    def _hand_over(self, attempt: str, old: Release, new: Release, backup: backups.Backup | None) -> Outcome:
        before = daemons.serving(self.home)
        metrics_addr = before.metrics_addr if before is not None else ""
        self.journal.step(attempt, "starting")
        started = daemons.launch(new, self.home, metrics_addr=metrics_addr)
        ready = daemons.wait_ready(started, self.home, self.settings.ready_timeout_s)
        if isinstance(ready, str):
            return self._roll_back(attempt, old, started, backup, ready, metrics_addr)
        self.journal.step(attempt, "canary")
        adapter = self.config.typed(RuntimeSettings).adapter
        failed = canary(new, self.home, ready, adapter=adapter)
        if failed:
            return self._roll_back(attempt, old, started, backup, failed, metrics_addr)
        self.journal.step(attempt, "probation")
        deadline = time.monotonic() + self.settings.probation_s
        while time.monotonic() < deadline:
            if started.process.poll() is not None:
                return self._roll_back(attempt, old, started, backup,
                                       f"the daemon of {new.short} {started.exit_line(self.home)} in probation",
                                       metrics_addr)
            time.sleep(daemons.POLL_S)
        releases.make_current(self.home, new)
        pruned = releases.prune(self.home, keep=(new, old))
        if pruned:
            self.journal.step(attempt, f"pruned {len(pruned)} older release(s): {', '.join(r[:12] for r in pruned)}")
        return self._end(attempt, UPDATED, f"{new.short} serves ({ready.version})", new)

    def _roll_back(self, attempt: str, old: Release, started: daemons.Started, backup: backups.Backup | None,
                   reason: str, metrics_addr: str) -> Outcome:
        self.journal.step(attempt, "rolling back")
        if backup is not None and backups.migrated(backup, self.home):
            daemons.stop(started, self.home)
            self.journal.step(attempt, "restoring the backup")
            try:
                backups.restore(old, self.home, backup)
                reason = f"{reason}; {backups.restored_line(backup)}"
            except backups.BackupFailed as error:
                reason = f"{reason}; {error}"
        back = daemons.launch(old, self.home, metrics_addr=metrics_addr)
        ready = daemons.wait_ready(back, self.home, self.settings.ready_timeout_s)
        if isinstance(ready, str):
            return self._end(attempt, ROLLBACK_FAILED, f"{reason}; then {ready}", old)
        daemons.stop(started, self.home)  # fenced, it exits by itself: this waits for it
        return self._end(attempt, ROLLED_BACK, reason, old)

    # -- rollback by hand ---------------------------------------------------

    def rollback(self) -> Outcome:
        """The release that served before the serving one takes the home back."""
        with self.journal.locked():
            serving = running_release(self.home)
            previous = self.journal.previous()
            attempt = self.journal.start(kind="rollback", origin=self.origin, from_release=serving,
                                         to_revision=previous.revision if previous else "")
            if previous is None:
                return self._end(attempt, REFUSED, "no earlier release served this home", serving)
            before = daemons.serving(self.home)
            self.journal.step(attempt, "starting")
            back = daemons.launch(previous, self.home, metrics_addr=before.metrics_addr if before else "")
            ready = daemons.wait_ready(back, self.home, self.settings.ready_timeout_s)
            if isinstance(ready, str):
                return self._end(attempt, FAILED, ready, serving)
            releases.make_current(self.home, previous)
            return self._end(attempt, ROLLED_BACK, f"{previous.short} serves again ({ready.version})", previous)

    # -- the end ------------------------------------------------------------

    def _end(self, attempt: str, outcome: str, reason: str, serving: Release) -> Outcome:
        self.journal.end(attempt, outcome, reason, serving)
        if outcome in (FAILED, ROLLED_BACK, ROLLBACK_FAILED) or self.notify_to:
            self._tell_owner(attempt, outcome, reason)
        return Outcome(attempt=attempt, outcome=outcome, reason=reason, serving=serving)

    def _tell_owner(self, attempt: str, outcome: str, reason: str) -> None:
        words = {UPDATED: "Update done", REFUSED: "No update", FAILED: "Update failed, nothing changed",
                 ROLLED_BACK: "Update rolled back", ROLLBACK_FAILED: "Update failed and the rollback too"}
        text = f"{words.get(outcome, outcome)}: {reason} (attempt {attempt})"
        try:
            request(self.home, Notify(text=text, notice_id=attempt, conversation=self.notify_to), timeout=10.0)
        except (NotRunning, DaemonError, OSError):
            self.journal.step(attempt, "the owner was not told: no daemon answered")
