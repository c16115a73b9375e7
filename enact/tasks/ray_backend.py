"""Task attempts on a Ray cluster (``tasks.backend = "ray"``): the daemon's
side of a remote attempt, and the Ray remote function it uses.

Imported only by a daemon whose backend is ``ray`` (and the commands that
look at the cluster): importing Ray costs about a second, and the package
is the optional extra ``enact[ray]``.

Each worker slot of the daemon stays a worker actor that claims under its
lease through the queue (``enact.tasks.workers_actor``). Its attempt sends
the task's base as a bundle, starts ``run_on_node`` as a Ray task
(``max_retries=0``: Ray never runs an attempt again, the queue does) and
relays what the node sends until that task ends (``enact.tasks.remote_attempt``),
through the daemon's one mailbox actor, under the attempt's own key
(``enact.tasks.ray_mailbox``). A fenced daemon stops relaying at once and cancels the Ray task: its
attempts' leases are the old generation's and no message of theirs is
asked any more, so none of them finishes.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError

from enact.cancellation import CancellationToken
from enact.config import Config
from enact.errors import EnactError
from enact.messages.tasks import Claimed, Finish, Heartbeat, LeaseLost, LeaseRenewed, ReportPhase
from enact.messages.workers import RemoteWorker
from enact.tasks import endings
from enact.tasks.endings import CANCELLED_BY_OWNER, LEASE_LOST, Ending
from enact.tasks.finishing import finish_with_retries
from enact.tasks.host_git import WorktreeError
from enact.tasks.ray_bundles import BaseBundle, bundle_base
from enact.tasks.ray_mailbox import MAILBOX, first_line
from enact.tasks.records import FailureClass, Outcome, Phase, clip
from enact.tasks.remote_attempt import Relay, note_remote_worker, run_on_node
from enact.tasks.remote_mailbox import Answer, Envelope
from enact.tasks.settings import TasksSettings, resource_amounts
from enact.tasks.worker import WorkerServices

log = logging.getLogger(__name__)

_TAKE_WAIT_S = 0.2
"""How long one look into the mailbox waits for the node: the relay also
watches the Ray task's end and the fence between looks."""
_CONNECTED = threading.Lock()


class ClusterUnavailable(EnactError):
    """The Ray cluster cannot be reached (or started); one line."""


def connect(settings: TasksSettings) -> None:
    """Connect this process to the cluster ``tasks.ray.address`` names
    (``local``: start one here), once. Raises ClusterUnavailable."""
    with _CONNECTED:
        if ray.is_initialized():
            return
        local = settings.ray_address == "local"
        try:
            ray.init(address=None if local else settings.ray_address, namespace="enact",
                     logging_level=logging.WARNING, log_to_driver=False, configure_logging=False,
                     include_dashboard=False if local else None)
        except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError...
            raise ClusterUnavailable(f"the Ray cluster ({settings.ray_address}) cannot be reached: "
                                     f"{_why_not(error)}") from None


def _why_not(error: BaseException) -> str:
    """One line for a failed connect. A refused token is named as such: Ray
    reports it as a connection error whose cause's text holds it."""
    texts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(texts) < 8:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    if any("InvalidAuthToken" in text or "AuthenticationError" in text for text in texts):
        return ("it refused this daemon's token (the cluster runs with RAY_AUTH_MODE=token: give the daemon "
                "the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token)")
    first = texts[0].strip().splitlines()
    return first[0] if first else type(error).__name__


def connect_at_start(settings: TasksSettings) -> None:
    """At the daemon's start: connect to the running cluster
    ``tasks.ray.address`` names, so an address or a token that does not
    work refuses the start. Ray's own lines written while it tries (it
    retries for about 20 s) are kept from stderr unless it connects: the
    refusal is the one line ClusterUnavailable says. Raises ClusterUnavailable."""
    if ray.is_initialized():
        return
    sys.stderr.flush()
    saved = os.dup(2)  # the daemon starts no thread before its components' checks: fd 2 is only Ray's here
    try:
        with tempfile.TemporaryFile() as held:
            os.dup2(held.fileno(), 2)
            try:
                connect(settings)
            finally:
                os.dup2(saved, 2)
            held.seek(0)
            written = held.read()
    finally:
        os.close(saved)
    if written:
        sys.stderr.buffer.write(written)
        sys.stderr.flush()


def _where() -> str:
    address = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return f"{socket.gethostname()} ({address}), worker pid {os.getpid()}"


@ray.remote(max_retries=0)
def _attempt_on_node(claimed: Claimed, key: str, worker_id: str, config: Config, base: BaseBundle,
                     mailbox: Any) -> None:
    def post(envelope: Envelope) -> Answer | None:
        try:
            answer: Answer | None = ray.get(mailbox.ask.remote(envelope))
        except RayError as error:  # the daemon's side is gone: asks fail as an unavailable actor's do
            log.warning("task %d: the daemon cannot be reached: %s", claimed.task.id, error)
            return None
        return answer

    post(Envelope(key=key, seq=0, target="", message=_where()))
    run_on_node(claimed, key=key, worker_id=worker_id, config=config, base=base, post=post)


class RayAttempt:
    """One claimed attempt, run on the cluster; ``run`` returns once the
    queue has its Finish, or once the attempt is no longer this worker's."""

    def __init__(self, claimed: Claimed, *, worker_id: str, services: WorkerServices, config: Config,
                 parent: CancellationToken, fence: CancellationToken, may_write: Callable[[], bool]) -> None:
        self.claimed = claimed
        self.task = claimed.task
        self.worker_id = worker_id
        self.services = services
        self.config = config
        self.parent = parent
        self.fence = fence
        self.may_write = may_write
        self._renewed_at = time.monotonic()
        self._beat_s = min(1.0, claimed.lease_ttl_s / 3)
        self._stopped_by = ""
        """Why the attempt ends before a node has it (``_keep_lease``)."""

    def _ask_tasks(self, message: Any) -> Any:
        reply = self.services.ask("tasks", message)
        if not isinstance(reply, LeaseLost):
            self._renewed_at = time.monotonic()
        return reply

    def _finish(self, ending: Ending) -> None:
        finish = Finish(task_id=self.task.id, worker_id=self.worker_id, attempt=self.task.attempt,
                        outcome=ending.outcome, failure_class=ending.failure_class, summary=clip(ending.summary),
                        retry_after_s=ending.retry_after_s)
        finish_with_retries(self.services.ask, finish, until=self._renewed_at + self.claimed.lease_ttl_s,
                            wait=self.fence.wait)

    def _report(self, summary: str) -> bool:
        """A phase the daemon reports for the node; False: the lease is lost."""
        return not isinstance(self._ask_tasks(ReportPhase(
            task_id=self.task.id, worker_id=self.worker_id, attempt=self.task.attempt, phase=Phase.WORKSPACE,
            summary=clip(summary))), LeaseLost)

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:  # fenced, the queue gone...: no Finish, the lease expires
            log.warning("task %d: attempt %d on the cluster ends without finishing: %s", self.task.id,
                        self.task.attempt, error)

    def _run(self) -> None:
        settings = self.services.settings
        named = self.task.repo or settings.default_repo
        if not named:
            self._finish(Ending(Outcome.FAILED, "no repository: name one or set tasks.default_repo",
                                FailureClass.PERMANENT))
            return
        if not self._report(f"sending the base to the Ray cluster ({settings.ray_address})"):
            return
        # Until a node has the attempt (connecting, bundling, waiting for
        # a free node), the lease is the daemon's to keep.
        kept = threading.Event()
        keeper = threading.Thread(target=self._keep_lease, args=(kept,), name=f"lease-task-{self.task.id}",
                                  daemon=True)
        keeper.start()
        try:
            self._submit(Path(named).expanduser(), kept)
        finally:
            kept.set()

    def _submit(self, named: Path, kept: threading.Event) -> None:
        settings = self.services.settings
        try:
            repo, base = bundle_base(named, self.services.home / "bundles")
        except WorktreeError as error:
            self._finish(Ending(Outcome.FAILED, str(error), FailureClass.PERMANENT))
            return
        try:
            connect(settings)
        except ClusterUnavailable as error:
            self._finish(Ending(Outcome.FAILED, str(error), FailureClass.TRANSIENT))
            return
        note_remote_worker(RemoteWorker(worker_id=self.worker_id, task_id=self.task.id, node="",
                                        since=time.time()), self.worker_id)
        key = uuid.uuid4().hex
        held = None
        try:
            held = MAILBOX.open(key, workers=settings.ray_workers)
            mailbox = held.actor
            options: dict[str, Any] = {"num_cpus": settings.ray_num_cpus,
                                       "resources": resource_amounts(settings.ray_resources) or {}}
            if settings.ray_memory_mb:
                options["memory"] = settings.ray_memory_mb * 1024 * 1024
            remote = _attempt_on_node.options(**options).remote(
                self.claimed, key, self.worker_id, self.config, base, mailbox)
            relay = Relay(self.claimed, worker_id=self.worker_id, home=self.services.home, settings=settings,
                          ask=self.services.ask, repo=repo, base=base.base, may_write=self.may_write,
                          meter=self.services.runtime)
            self._relay(remote, mailbox, key, relay, kept)
        except RayError as error:
            # The cluster lost the mailbox or the attempt: no Finish, the
            # lease expires and the queue runs the task again.
            log.warning("task %d: attempt %d lost on the cluster: %s", self.task.id, self.task.attempt,
                        first_line(error))
        finally:
            note_remote_worker(None, self.worker_id)
            if held is not None:  # however it ended (fenced too): its key goes, and nothing it left
                MAILBOX.close(held, key)

    def _relay(self, remote: Any, mailbox: Any, key: str, relay: Relay, kept: threading.Event) -> None:
        """Relay the attempt's messages (its key's) until it ends."""
        while True:
            if self.fence.cancelled:
                log.info("task %d: this daemon is fenced; its remote attempt %d is cancelled and does not finish",
                         self.task.id, self.task.attempt)
                ray.cancel(remote, force=True)
                return
            cancel = (self.parent.reason or "cancelled") if self.parent.cancelled else ""
            for envelope in ray.get(mailbox.take.remote(key, _TAKE_WAIT_S)):
                kept.set()  # the node renews the lease from now on, with its heartbeats
                if envelope.seq == 0:  # where it runs, before the attempt's first message
                    node = str(envelope.message)
                    note_remote_worker(RemoteWorker(worker_id=self.worker_id, task_id=self.task.id, node=node,
                                                    since=time.time()), self.worker_id)
                    if not self._report(f"on the Ray node {node}"):
                        ray.cancel(remote, force=True)
                        return
                    mailbox.answer.remote(key, envelope.seq, Answer(cancel=cancel))
                    continue
                mailbox.answer.remote(key, envelope.seq, relay.handle(envelope, cancel=cancel))
            done, _ = ray.wait([remote], timeout=0)
            if done:
                self._ended(remote)
                return
            if not kept.is_set():
                continue
            if self._ended_before_a_node(remote):
                return

    def _ended(self, remote: Any) -> None:
        try:
            ray.get(remote)
        except RayError as error:
            # No Finish: the lease expires, and the queue runs the task
            # again, as after a local worker's crash.
            log.warning("task %d: attempt %d on the cluster ended without finishing: %s", self.task.id,
                        self.task.attempt, first_line(error))

    def _keep_lease(self, kept: threading.Event) -> None:
        """Heartbeats for the attempt until ``kept`` is set (a node has it,
        or the attempt ended); a lost lease or the owner's cancel is noted
        for the relay (``_ended_before_a_node``)."""
        while not kept.wait(self._beat_s):
            if self.parent.cancelled:
                self._stopped_by = self.parent.reason or "cancelled"
                kept.set()
                return
            try:
                reply = self._ask_tasks(Heartbeat(task_id=self.task.id, worker_id=self.worker_id,
                                                  attempt=self.task.attempt))
            except Exception as error:  # the queue restarting: the next beat may reach it
                log.warning("task %d: heartbeat failed: %s", self.task.id, error)
                continue
            if isinstance(reply, LeaseLost):
                self._stopped_by = LEASE_LOST
            elif isinstance(reply, LeaseRenewed) and reply.cancel_requested:
                self._stopped_by = CANCELLED_BY_OWNER
            else:
                continue
            kept.set()
            return

    def _ended_before_a_node(self, remote: Any) -> bool:
        """Whether the attempt ended while no node had it yet
        (``_keep_lease`` stopped for a reason): cancelled on the cluster,
        and finished as that reason says (not at all when the lease is lost)."""
        reason = self._stopped_by
        if not reason:
            return False
        ray.cancel(remote, force=True)
        ending = endings.cancelled(reason, phase=Phase.WORKSPACE, deadline_s=self.task.deadline_s, kept_at=None)
        if ending is not None:
            self._finish(ending)
        return True


@ray.remote(num_cpus=0, max_retries=0)
def _check_on_node(config: Config) -> dict[str, Any]:
    from enact import components

    found = components.load().runtime(config).check(config)
    return {"node": _where().rpartition(", worker pid")[0], "found": found.found, "version": found.version,
            "problems": list(found.problems), "notes": list(found.notes)}


def check_nodes(config: Config, timeout_s: float) -> list[dict[str, Any]]:
    """``runtime check`` of the configured runtime on each live node that
    could take an attempt (it has the CPUs, the memory and the resources
    ``tasks.ray.*`` reserve), as that node finds its CLIs and credentials.
    Raises ClusterUnavailable."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    settings = config.typed(TasksSettings)
    connect(settings)
    wanted = {"CPU": settings.ray_num_cpus, **(resource_amounts(settings.ray_resources) or {})}
    if settings.ray_memory_mb:
        wanted["memory"] = settings.ray_memory_mb * 1024 * 1024
    nodes = [node for node in ray.nodes() if node.get("Alive")  # type: ignore[no-untyped-call]
             and all(node.get("Resources", {}).get(name, 0) >= amount for name, amount in wanted.items())]
    checks = [_check_on_node.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node_id=node["NodeID"], soft=False)).remote(config) for node in nodes]
    ready, _ = ray.wait(checks, num_returns=len(checks), timeout=timeout_s) if checks else ([], [])
    found = []
    for node, check in zip(nodes, checks, strict=True):
        where = str(node.get("NodeManagerAddress", node["NodeID"]))
        if check not in ready:
            ray.cancel(check, force=True)
            found.append({"node": where, "found": "", "version": "", "notes": [],
                          "problems": [f"the node did not answer within {timeout_s:g} s"]})
            continue
        try:
            found.append(ray.get(check))
        except RayError as error:
            found.append({"node": where, "found": "", "version": "", "notes": [],
                          "problems": [f"the check failed on the node: {str(error).strip().splitlines()[0]}"]})
    return found
