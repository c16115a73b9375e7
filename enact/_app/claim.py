"""Claiming a home: its lock, its metrics address and the next generation."""

from __future__ import annotations

import logging

from enact import __version__
from enact.fence import Fence
from enact.metrics import Metrics, MetricsServer, bind_metrics, wait_for_metrics

log = logging.getLogger("enact.daemon")


def claim_home(fence: Fence, metrics: Metrics, address: str, *, takeover: bool, takeover_wait_s: float
               ) -> MetricsServer:
    """Take the lock, the metrics address and the next generation, in that
    order: whatever can be acquired is acquired before fencing, so a refusal
    leaves a daemon being replaced untouched. The one thing that daemon holds
    (the metrics address, when both use the same) is bound once it lets go.
    A fenced daemon lets go within about a second; the address is waited
    for at most ``takeover_wait_s`` (``daemon.takeover_wait_s``).
    Raises AlreadyRunning or MetricsUnavailable."""
    replaced = fence.claim(takeover=takeover)
    metrics_server = bind_metrics(metrics, address, replaced=replaced)
    owner = fence.take_generation(metrics_addr=metrics_server.address if metrics_server else address)
    log.info("enact %s owns %s as generation %d (pid %d)", __version__, fence.home, owner.generation, owner.pid)
    if metrics_server is None:
        metrics_server = wait_for_metrics(metrics, address, holder=replaced, wait_s=takeover_wait_s)
    return metrics_server
