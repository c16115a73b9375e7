"""The console's Flask application: the gate every request passes, the
login, the event stream, and the pages (``pages_*.py``).

Every request first shows a Host of the console's own (else 421: a page
that reached it by another name is a DNS-rebinding attempt), then a session
(else 401, the static files too); one that changes something (any method
but GET and HEAD) also needs an Origin of this console and the session's
CSRF token (else 403). What the pages do, they do through ``ask``: the
typed requests the CLI sends, stamped ``human-console``."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from flask import Flask, Response, g, redirect, render_template, request

from enact.console.auth import CSRF_FIELD, CSRF_HEADER, csrf_matches, host_allowed, origin_matches
from enact.console.hub import BYE, Update
from enact.errors import EnactError
from enact.messages._registry import Request
from enact.messages.common import HUMAN_CONSOLE
from enact.messages.control import Error as ControlError

if TYPE_CHECKING:
    from enact.console.hub import Stream
    from enact.console.server import ConsoleServer
    from enact.console.task_log import LogTail

R = TypeVar("R")
log = logging.getLogger(__name__)

_HERE = Path(__file__).resolve().parent
MAX_BODY = 64 * 1024
_KEEPALIVE_S = 5.0
_LOG_POLL_S = 0.5
"""How often a task page's stream looks for new lines in the task's log."""
_SECURITY_HEADERS = {
    # The pages run no script but the vendored files, and no one frames them.
    "Content-Security-Policy": ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the login link carries its token
    "Cache-Control": "no-store",
}


class ConsoleUnavailable(EnactError, RuntimeError):
    """The daemon could not answer a request (stopping, an actor down): one line."""


def make_app(server: ConsoleServer) -> Flask:
    from enact.console import pages_evolution, pages_memory, pages_overview, pages_tasks

    app = Flask("enact.console", root_path=str(_HERE), template_folder="templates", static_folder="static")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.jinja_env.filters["when"] = when
    app.extensions["enact_console"] = server

    @app.before_request
    def gate() -> Any:
        host = request.headers.get("Host")
        if not host_allowed(host, server.hosts):
            return _refusal(421, "This console answers only at its own address.")
        if request.path == "/login":
            return None
        session = server.gate.session(request.cookies.get(server.gate.cookie_name))
        if session is None:
            return _refusal(401, "Not signed in: run `enact console` for a link that signs you in.")
        g.session = session
        if request.method not in ("GET", "HEAD"):
            if not origin_matches(request.headers.get("Origin"), host or ""):
                return _refusal(403, "Refused: the request does not come from a page of this console.")
            sent = request.headers.get(CSRF_HEADER) or request.form.get(CSRF_FIELD)
            if not csrf_matches(session, sent):
                return _refusal(403, "Refused: the request lacks this session's CSRF token.")
        return None

    @app.after_request
    def harden(response: Response) -> Response:
        for name, value in _SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if request.method not in ("GET", "HEAD") and g.get("session") is not None:
            # The daemon's log keeps every action a signed-in page asked for, as the console's
            # (the actor's own record keeps its origin, human-console, where it keeps one).
            log.info("console action (%s): %s %s answered %d", HUMAN_CONSOLE, request.method, request.path,
                     response.status_code)
        return response

    @app.context_processor
    def page_values() -> dict[str, Any]:
        session = g.get("session")
        return {"csrf_token": session.csrf if session else "", "csrf_field": CSRF_FIELD}

    @app.get("/login")
    def login() -> Any:
        redeemed = server.gate.redeem(request.args.get("token", ""), time.time())
        if redeemed is None:
            return _refusal(401, "That sign-in link is spent or expired: run `enact console` for a new one.")
        session_id, _ = redeemed
        response = redirect("/", code=303)
        response.set_cookie(server.gate.cookie_name, session_id, httponly=True, samesite="Strict", path="/")
        return response

    @app.post("/logout")
    def logout() -> Any:
        server.gate.end(g.session)
        response = _refusal(401, "Signed out.")
        response.delete_cookie(server.gate.cookie_name, path="/")
        return response

    @app.get("/events")
    def events() -> Any:
        stream = server.hub.join()
        if stream is None:
            return _refusal(503, "Too many live pages are open; close one and reload.")
        from enact.console.task_log import LogTail

        tail = LogTail.of(server.home, request.args.get("log", ""), request.args.get("from", "0"))
        return Response(_event_stream(stream, tail),
                        mimetype="text/event-stream", headers={"X-Accel-Buffering": "no"})

    @app.errorhandler(ConsoleUnavailable)
    def unavailable(error: ConsoleUnavailable) -> Any:
        return _refusal(503, f"The daemon did not answer: {error}")

    for module in (pages_overview, pages_tasks, pages_memory, pages_evolution):
        app.register_blueprint(module.pages)
    return app


def console_server() -> ConsoleServer:
    from flask import current_app

    server: ConsoleServer = current_app.extensions["enact_console"]
    return server


def ask(message: Request[R]) -> R:
    """The reply ``message`` declares, asked as the owner in the console;
    raises ConsoleUnavailable when the daemon answers ``control.Error``."""
    reply = console_server().dispatch(message, HUMAN_CONSOLE)
    if isinstance(reply, ControlError):
        raise ConsoleUnavailable(reply.message)
    return reply  # type: ignore[return-value]  # the control server checked it against the request


def fragment_requested() -> bool:
    """htmx asked for a part of a page, not a whole one."""
    return request.headers.get("HX-Request") == "true"


def when(moment: float | None) -> str:
    """Epoch seconds as the daemon's local time, to the second."""
    if not moment:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))


def _refusal(status: int, text: str) -> Response:
    return Response(render_template("refused.html", status=status, text=text), status=status)


def _event_stream(stream: Stream, tail: LogTail | None) -> Iterator[bytes]:
    """Server-sent events until the client goes or the console stops; with
    a ``tail`` (``/events?log=<task id>&from=<offset>``), that task's log as
    it grows (``log`` events). It runs after the request's context is gone."""
    try:
        yield b"retry: 2000\n\n"
        quiet_since = time.monotonic()
        while True:
            update = stream.next(_LOG_POLL_S if tail is not None else _KEEPALIVE_S)
            if update is BYE:
                return
            grown = tail.read() if tail is not None else ""
            if grown:
                yield _event(Update("log", grown))
            if update is not None:
                yield _event(update)
            elif not grown and time.monotonic() - quiet_since < _KEEPALIVE_S:
                continue
            else:  # a write is how a stream whose client went is noticed
                yield b": keep-alive\n\n"
            quiet_since = time.monotonic()
    finally:
        stream.close()


def _event(update: Update) -> bytes:
    lines = update.data.split("\n") or [""]
    data = "".join(f"data: {line}\n" for line in lines)
    return f"event: {update.name}\n{data}\n".encode()
