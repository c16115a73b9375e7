"""What the inbox and its conversation actors share across actor restarts."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from enact.channels import Channel
from enact.commands import CommandRegistry
from enact.runtime import Runtime


@dataclass(slots=True, eq=False)
class ChatServices:
    channels: dict[str, Channel]
    runtime: Runtime
    commands: CommandRegistry
    startup_context: str
    # Deliveries whose channel call is running in this process.
    delivering: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
