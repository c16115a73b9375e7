"""What the roster needs to name the daemon's actors, without a daemon."""

from __future__ import annotations

from enact.chat.services import ChatServices
from enact.commands import CommandRegistry
from enact.runtime import Capabilities, RuntimeRequest, RuntimeResult


class _NeverCalled:
    """A runtime the roster reads the capabilities of and never calls."""

    name = "never-called"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=False)
    waits_for = "the never-called runtime"

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        raise AssertionError("the roster's runtime is not called")


def roster_services() -> ChatServices:
    """Services enough to list the roster's specs (none of them is started)."""
    return ChatServices(channels={}, runtime=_NeverCalled(), commands=CommandRegistry(), startup_context="",
                        origins={})
