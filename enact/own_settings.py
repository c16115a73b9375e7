"""enact's own keys, gathered: the daemon's (``enact.config``) and its
built-in features'.

Each feature declares its keys beside its typed settings, in its package
(``enact.chat.settings``). Until each feature is a component that declares
them itself, this module gathers them for whoever loads the whole
configuration (the daemon, the CLI's commands that read it, the tests and
benchmarks that run the features' actors) and hands them to
``enact.components``: it sits above the features, which neither
``enact.config`` nor ``enact.components`` may import.
"""

from __future__ import annotations

from enact import config
from enact.chat import settings as chat
from enact.config import Setting
from enact.evolution import settings as evolution
from enact.memory import settings as memory
from enact.tasks import settings as tasks

SETTINGS: tuple[Setting, ...] = (*config.SETTINGS, *chat.SETTINGS, *memory.SETTINGS, *tasks.SETTINGS,
                                 *evolution.SETTINGS)
"""Every key enact itself declares (``core``), in the order ``config show`` lists them."""
