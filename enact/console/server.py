"""The console's web server: a threaded WSGI server (cheroot) running the
console's Flask application in the daemon, started after the control socket
and stopped before it.

Why these: the daemon is threads and pykka actors whose asks block, so a
synchronous WSGI stack fits it without an event loop beside the actors;
cheroot is a production server with a fixed pool of threads that writes
each chunk of a streamed response as it comes (what a server-sent event
needs); Flask brings routing and Jinja2's autoescaped templates."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Any

from enact.components import Dispatch
from enact.config import Config
from enact.console.auth import Gate, own_hosts
from enact.console.hub import MAX_STREAMS, Hub
from enact.console.settings import ConsoleSettings
from enact.messages.common import RefusalCode, Refused
from enact.messages.console import LoginLink
from enact.tasks.task_branches import home_id

log = logging.getLogger(__name__)

THREADS = MAX_STREAMS + 8
"""Every open event stream holds a thread; the rest serve pages."""
_EXPIRY_CHECK_S = 10.0
"""How often cheroot's loop wakes, when nothing arrives, to close the kept-alive
connections idle for its timeout (10 s): cheroot's own half second woke the
idle daemon's one CPU twice a second for connections that are seldom there.
A stop wakes the loop with a connection."""
_WAKE_FOR_S = 1.0
"""How long a stop keeps waking the loop before it waits out its expiry check."""


class ConsoleServer:
    def __init__(self, settings: Config, dispatch: Dispatch, hub: Hub) -> None:
        self._settings = settings.typed(ConsoleSettings)
        self.home = settings.home
        self.dispatch = dispatch
        self.hub = hub
        self.gate = Gate(home_id(settings.home))
        self.address = ""
        """``HOST:PORT`` once bound; "" before, or when it could not bind."""
        self.hosts: frozenset[str] = frozenset()
        self.problem = ""
        """Why it is not serving, in one line."""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind and serve on a thread of its own. An address that cannot be
        had is logged and said by ``enact console``; the daemon runs on."""
        from cheroot import wsgi

        host, port = self._settings.host, self._settings.port
        self.hub.reopen()
        server = wsgi.Server((host, port), _AppOnFirstRequest(self), numthreads=THREADS, server_name="enact-console",
                             timeout=10, shutdown_timeout=1)
        server.expiration_interval = _EXPIRY_CHECK_S
        try:
            server.prepare()
        except OSError as error:
            self.problem = f"the console cannot listen on {host}:{port}: {error.strerror or error}"
            log.warning("%s", self.problem)
            return
        bound_host, bound_port = server.bind_addr[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.address = f"{shown}:{bound_port}"
        self.hosts = own_hosts(bound_host, bound_port)
        self._server = server
        self._thread = threading.Thread(target=server.serve, name="enact-console", daemon=True)
        self._thread.start()
        log.info("console on http://%s/ (enact console signs in)", self.address)

    def stop(self, timeout: float) -> None:
        self.hub.close()  # the event streams end, so their threads are free to stop
        server, self._server = self._server, None
        if server is None:
            return
        stopping = threading.Thread(target=server.stop, name="enact-console-stop", daemon=True)
        stopping.start()
        # cheroot's loop sees the stop when its select returns: a connection
        # wakes it at once, its expiry check only seconds later.
        host, port = server.bind_addr[:2]
        woken_until = time.monotonic() + _WAKE_FOR_S
        while stopping.is_alive() and time.monotonic() < woken_until:
            with contextlib.suppress(OSError):
                socket.create_connection((host, port), timeout=0.1).close()
            stopping.join(0.02)
        stopping.join()  # its port free for whoever binds it next, as cheroot's stop itself was waited for
        if self._thread is not None:
            self._thread.join(timeout)

    def login(self) -> LoginLink | Refused:
        if not self.address:
            return Refused(reason=self.problem or "the console is not serving yet", code=RefusalCode.UNSUPPORTED)
        token, expires_at = self.gate.issue(time.time())
        return LoginLink(address=self.address, url=f"http://{self.address}/login?token={token}", token=token,
                         expires_at=expires_at)


class _AppOnFirstRequest:
    """The console's web application, made on the first request: Flask,
    Jinja and Pygments cost the daemon about 8 MB of memory, which a console
    nobody opens need not."""

    def __init__(self, server: ConsoleServer) -> None:
        self._server = server
        self._app: Any = None
        self._making = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        app = self._app
        if app is None:
            with self._making:
                if self._app is None:
                    from enact.console.app import make_app

                    self._app = make_app(self._server)
                app = self._app
        return app(environ, start_response)
