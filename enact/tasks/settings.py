"""Task work's settings (``tasks``, and the scheduler's ``scheduler``): its
keys, and the typed value its actors and rules read."""

from __future__ import annotations

from enact.config import DAY, Config, Setting, between, one_of
from enact.frozen_dataclass import dataclass

DOCTOR_TIMEOUT = Setting("tasks.doctor_timeout_s", float, 600.0, "Timeout of one doctor run", between(0.1, DAY))
"""A repository's own ``.enact.toml`` timeout is checked against it too."""


def resource_amounts(entries: list[str] | tuple[str, ...]) -> dict[str, float] | None:
    """``tasks.ray.resources`` (``NAME=AMOUNT`` each) as Ray takes them, or
    None when an entry is not of that form."""
    amounts: dict[str, float] = {}
    for entry in entries:
        name, equals, amount = str(entry).partition("=")
        try:
            value = float(amount)
        except ValueError:
            return None
        if not equals or not name.strip() or not 0 < value <= 1e6:
            return None
        amounts[name.strip()] = value
    return amounts

SETTINGS: tuple[Setting, ...] = (
    Setting("tasks.default_repo", str, "", "The repository a task works on when none is named"),
    Setting("tasks.lease_ttl_s", float, 60.0, "A worker's lease on a task lapses unless renewed within this",
            between(1, 3600)),
    # Task workers (enact.tasks): the doctor, protected paths, confinement, kept worktrees.
    Setting("tasks.doctor_command", str, "", "Test command of a repository without a [doctor] in its .enact.toml"),
    DOCTOR_TIMEOUT,
    Setting("tasks.protected_paths", list,
            ["tests/", "test/", ".enact.toml", ".ci/", ".github/", ".gitlab-ci.yml", "conftest.py", "pytest.ini",
             "tox.ini", "noxfile.py"],
            "Paths a task may change only when its owner unlocked them (task add --allow-path)"),
    Setting("tasks.confinement", str, "auto",
            "auto: confine runtime and doctor with bwrap when it can, else say so; required: never run unconfined",
            one_of("auto", "required", "off")),
    Setting("tasks.env_passthrough", list, [],
            "Environment variables (names or globs) given to task commands and the doctor besides PATH, locale"),
    Setting("tasks.keep_failed_worktrees_days", float, 7.0, "Kept worktrees of ended tasks are pruned after this",
            between(0, 3650)),
    # Where attempts run: the daemon's own worker pool, or a Ray cluster (enact.tasks.ray_attempt).
    Setting("tasks.backend", str, "local",
            "local: attempts run in this daemon's workers (daemon.workers); ray: on a Ray cluster (enact[ray])",
            one_of("local", "ray")),
    Setting("tasks.ray.address", str, "local",
            "The Ray cluster: local starts one on this machine; auto finds a running one; else its address"),
    Setting("tasks.ray.workers", int, 2, "Attempts that may run on the Ray cluster at once", between(1, 256)),
    Setting("tasks.ray.num_cpus", float, 1.0, "CPUs one remote attempt reserves on its node", between(0, 1024)),
    Setting("tasks.ray.memory_mb", int, 0, "Memory one remote attempt reserves on its node; 0: none",
            between(0, 1 << 24)),
    Setting("tasks.ray.resources", list, [],
            "Custom Ray resources one attempt needs, NAME=AMOUNT each (to pin attempts to nodes that have them)"),
    # Backlog and cron (the Scheduler actor).
    Setting("tasks.auto_promote", bool, False, "Promote the next backlog item when nothing is queued or running"),
    Setting("scheduler.tick_s", float, 1.0, "How often the scheduler looks for due schedules", between(0.05, 60)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TasksSettings:
    default_repo: str
    """"": a task must name its repository."""
    lease_ttl_s: float
    doctor_command: str
    doctor_timeout_s: float
    protected_paths: tuple[str, ...]
    confinement: str
    """``auto``, ``required`` or ``off`` (``enact.tasks.confine``)."""
    env_passthrough: tuple[str, ...]
    keep_failed_worktrees_days: float
    auto_promote: bool
    scheduler_tick_s: float
    backend: str = "local"
    """``local`` or ``ray``."""
    ray_address: str = "local"
    ray_workers: int = 2
    ray_num_cpus: float = 1.0
    ray_memory_mb: int = 0
    ray_resources: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Config) -> TasksSettings:
        values = config.values
        return cls(
            default_repo=values["tasks.default_repo"],
            lease_ttl_s=values["tasks.lease_ttl_s"],
            doctor_command=values["tasks.doctor_command"],
            doctor_timeout_s=values["tasks.doctor_timeout_s"],
            protected_paths=tuple(values["tasks.protected_paths"]),
            confinement=values["tasks.confinement"],
            env_passthrough=tuple(values["tasks.env_passthrough"]),
            keep_failed_worktrees_days=values["tasks.keep_failed_worktrees_days"],
            auto_promote=values["tasks.auto_promote"],
            scheduler_tick_s=values["scheduler.tick_s"],
            backend=values["tasks.backend"],
            ray_address=values["tasks.ray.address"],
            ray_workers=values["tasks.ray.workers"],
            ray_num_cpus=values["tasks.ray.num_cpus"],
            ray_memory_mb=values["tasks.ray.memory_mb"],
            ray_resources=tuple(values["tasks.ray.resources"]),
        )
