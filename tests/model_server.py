"""A scripted model server on the loopback address, for the real model CLIs.

Each test scripts the answers it needs (``server.script(Reply("hi"),
Status(401))``); every request on a model route takes the next one (or the
``default`` once the script is used up) and is recorded in ``.requests``.
Status codes, malformed bodies and stalls are rendered the same way for
every route; a route renders only what a model says (``Reply``,
``ToolCall``) in its protocol.

Routes live in ``ROUTES`` (path → renderer). The Responses API (Codex) is
here; other protocols register theirs from their own module with
``@route("/v1/messages")`` and are used once that module is imported.
``LISTINGS`` are read-only routes (a models listing) that take no scripted
answer. A server made with ``api_key`` answers 401 to any request that does
not carry that key.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import orjson

# --- what a test scripts ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tokens:
    input: int = 11
    cached_input: int = 3
    output: int = 7
    reasoning: int = 2


@dataclass(frozen=True, slots=True)
class Reply:
    """The model answers with text."""

    text: str
    tokens: Tokens = Tokens()
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asks its host to run a shell command (Codex: ``exec_command``);
    ``tool = "Read"``: Claude Code's Read tool on the file ``command`` names;
    ``tool = "Skill"``: its Skill tool on the skill ``command`` names."""

    command: str
    tokens: Tokens = Tokens()
    tool: str = "Bash"


@dataclass(frozen=True, slots=True)
class Status:
    """An HTTP error: 401, 429 (with ``retry_after``), 500 …"""

    code: int
    message: str = ""
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Malformed:
    """A 200 whose body is not what the protocol promises."""

    body: bytes = b"data: {this is not json\n\n"
    content_type: str = "text/event-stream"


@dataclass(frozen=True, slots=True)
class Stall:
    """Headers, then nothing for ``seconds`` (or until the server closes)."""

    seconds: float = 3600.0


Answer = Reply | ToolCall | Status | Malformed | Stall


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


# --- routes --------------------------------------------------------------------------

Rendered = tuple[str, bytes]
"""(content type, body) of a 200 answer."""

Renderer = Callable[["Reply | ToolCall", RecordedRequest, "ModelServer"], Rendered]

ROUTES: dict[str, Renderer] = {}

LISTINGS: dict[str, Callable[[ModelServer], Rendered]] = {}
"""Read-only routes (path without its query → what they answer)."""


def route(path: str) -> Callable[[Renderer], Renderer]:
    """Register the renderer of a model route (the path without its query)."""

    def register(renderer: Renderer) -> Renderer:
        ROUTES[path] = renderer
        return renderer

    return register


def listing(path: str) -> Callable[[Callable[[ModelServer], Rendered]], Callable[[ModelServer], Rendered]]:
    """Register a read-only route, which takes no scripted answer."""

    def register(renderer: Callable[[ModelServer], Rendered]) -> Callable[[ModelServer], Rendered]:
        LISTINGS[path] = renderer
        return renderer

    return register


def sse(events: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    """Server-sent events, each ``event:`` named and its data one JSON line."""
    return b"".join(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n" for name, data in events)


@route("/v1/responses")
def responses_api(answer: Reply | ToolCall, request: RecordedRequest, server: ModelServer) -> Rendered:
    number = server.next_id()
    if isinstance(answer, Reply):
        item: dict[str, Any] = {
            "type": "message", "role": "assistant", "id": f"msg_{number}", "status": "completed",
            "content": [{"type": "output_text", "text": answer.text, "annotations": []}],
        }
    else:
        item = {
            "type": "function_call", "id": f"fc_{number}", "call_id": f"call_{number}", "status": "completed",
            "name": "exec_command", "arguments": orjson.dumps({"cmd": answer.command}).decode(),
        }
    tokens = answer.tokens
    usage = {
        "input_tokens": tokens.input, "input_tokens_details": {"cached_tokens": tokens.cached_input},
        "output_tokens": tokens.output, "output_tokens_details": {"reasoning_tokens": tokens.reasoning},
        "total_tokens": tokens.input + tokens.output,
    }
    response_id = f"resp_{number}"
    return "text/event-stream", sse([
        ("response.created", {"type": "response.created", "response": {"id": response_id}}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": {"id": response_id, "usage": usage}}),
    ])


def closed_port_url() -> str:
    """A loopback base URL (``.../v1``) on which nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # free again once the socket is closed


class SilentServer:
    """A loopback port that accepts connections and never answers (as a
    model behind a dead network path can look): ``with SilentServer() as
    silent: silent.url``. The connections are held until it closes."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._held.append(connection)

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._listener.close()
        for connection in self._held:
            connection.close()


# --- the server ----------------------------------------------------------------------


class ModelServer:
    """``with ModelServer() as server: server.script(...)``; ``server.url``
    is ``http://127.0.0.1:PORT`` (append ``/v1`` for a base URL)."""

    def __init__(self, *, default: Answer | None = None, api_key: str | None = None,
                 models: tuple[str, ...] = ("llama-test",)) -> None:
        self.default = default
        self.api_key = api_key
        self.models = models
        self.requests: list[RecordedRequest] = []
        self._answers: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.closing = threading.Event()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="model-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *answers: Answer) -> None:
        with self._lock:
            self._answers.extend(answers)

    def model_requests(self) -> list[RecordedRequest]:
        """The requests made on model routes (not, say, a models listing)."""
        with self._lock:
            return [r for r in self.requests if r.path.partition("?")[0] in ROUTES]

    def next_id(self) -> int:
        return next(self._ids)

    def close(self) -> None:
        self.closing.set()
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def authorized(self, request: RecordedRequest) -> bool:
        if self.api_key is None:
            return True
        given = {request.headers.get("authorization", ""), request.headers.get("x-api-key", "")}
        return f"Bearer {self.api_key}" in given or self.api_key in given

    def _take(self, request: RecordedRequest) -> Answer | None:
        with self._lock:
            self.requests.append(request)
            if request.path.partition("?")[0] not in ROUTES or not self.authorized(request):
                return None
            return self._answers.popleft() if self._answers else self.default


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the tests read .requests, not a log

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = RecordedRequest(
                method=self.command, path=self.path, headers={k.lower(): v for k, v in self.headers.items()},
                body=self.rfile.read(length) if length else b"",
            )
            answer = server._take(request)
            path = self.path.partition("?")[0]
            renderer = ROUTES.get(path)
            if not server.authorized(request):
                body = orjson.dumps({"error": {"message": "invalid api key", "type": "authentication_error"}})
                self._send(401, "application/json", body)
            elif path in LISTINGS:
                self._send(200, *LISTINGS[path](server))
            elif renderer is None:
                self._send(404, "application/json", orjson.dumps({"error": {"message": f"no route {self.path}"}}))
            elif answer is None:
                self._send(500, "application/json", orjson.dumps({"error": {"message": "no scripted answer left"}}))
            elif isinstance(answer, Status):
                headers = {} if answer.retry_after is None else {"Retry-After": f"{answer.retry_after:g}"}
                message = answer.message or f"scripted status {answer.code}"
                body = orjson.dumps({"error": {"message": message, "type": "scripted", "code": answer.code}})
                self._send(answer.code, "application/json", body, headers)
            elif isinstance(answer, Malformed):
                self._send(200, answer.content_type, answer.body)
            elif isinstance(answer, Stall):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.flush()
                server.closing.wait(answer.seconds)
                self.close_connection = True
            else:
                if isinstance(answer, Reply) and answer.delay_s:
                    time.sleep(answer.delay_s)
                self._send(200, *renderer(answer, request, server))

        def _send(self, code: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


__all__ = [
    "LISTINGS", "ROUTES", "Answer", "Malformed", "ModelServer", "RecordedRequest", "Rendered", "Renderer", "Reply",
    "SilentServer", "Stall", "Status", "Tokens", "ToolCall", "closed_port_url", "listing", "route", "sse",
]
