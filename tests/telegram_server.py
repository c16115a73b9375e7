"""A fake Telegram Bot API on the loopback address, for tests and the bench.

Real method paths (``/bot<token>/<method>``, ``/file/bot<token>/<path>``),
real answer shapes (``{"ok": true, "result": ...}``, ``{"ok": false,
"error_code": 429, "description": ..., "parameters": {"retry_after": 1}}``)
and real offset semantics: ``getUpdates`` with ``offset`` confirms, and
forgets, every update below it; without new updates it waits up to
``timeout`` seconds (long polling). Every call is recorded, in order.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson

BOT_ID = 7000001
USERNAME = "enact_test_bot"


@dataclass(slots=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float
    answer: dict[str, Any] = field(default_factory=dict)


class FakeBotApi:
    """``with FakeBotApi(token) as server:``; point the channel at ``server.url``."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.offsets: list[int] = []
        """Every ``offset`` a getUpdates sent, in order (0 for none)."""
        self._updates: list[dict[str, Any]] = []
        self._redelivered: list[dict[str, Any]] = []
        self._confirmed = 0
        self._update_ids = itertools.count(5001)
        self._message_ids = itertools.count(101)
        self._sent_ids = itertools.count(9001)
        self._failures: dict[str, list[dict[str, Any]]] = {}
        self._stalls: dict[str, list[tuple[int, float]]] = {}
        self._cuts: list[tuple[str, int]] = []
        self._closing = threading.Event()
        self._blocked: set[int] = set()
        self._sent_by_chat: dict[object, int] = {}
        self._files: dict[str, tuple[str, bytes]] = {}
        self._changed = threading.Condition()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-bot-api", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeBotApi:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._closing.set()
        with self._changed:
            self._changed.notify_all()
        self._server.shutdown()
        self._server.server_close()

    # -- what a test arranges -------------------------------------------------

    def message(self, chat: int, text: str = "", *, user: int | None = None, reply_to: str = "",
                photo: bytes | None = None, caption: str = "", thread: int | None = None) -> dict[str, Any]:
        """A user writes to the bot; returns the update as Telegram sends it."""
        message: dict[str, Any] = {
            "message_id": next(self._message_ids), "date": int(time.time()),
            "chat": {"id": chat, "type": "private" if chat > 0 else "supergroup"},
            "from": {"id": user if user is not None else chat, "is_bot": False, "first_name": "Owner"},
        }
        if text:
            message["text"] = text
        if caption:
            message["caption"] = caption
        if reply_to:
            message["reply_to_message"] = {"message_id": 1, "date": 0, "chat": message["chat"], "text": reply_to}
        if thread is not None:
            message["message_thread_id"] = thread
            message["is_topic_message"] = True
        if photo is not None:
            message["photo"] = [self._photo_size(photo[: len(photo) // 4], "s", 90), self._photo_size(photo, "l", 1280)]
        return self.update({"message": message})

    def update(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._changed:
            update = {"update_id": next(self._update_ids), **body}
            self._updates.append(update)
            self._changed.notify_all()
        return update

    def redeliver(self, update: dict[str, Any]) -> None:
        """Send ``update`` once more with the next getUpdates, whatever the offset."""
        with self._changed:
            self._redelivered.append(update)
            self._changed.notify_all()

    def fail_next(self, method: str, code: int, description: str, retry_after: int | None = None) -> None:
        answer: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if retry_after is not None:
            answer["parameters"] = {"retry_after": retry_after}
        self._failures.setdefault(method, []).append(answer)

    def stall(self, method: str, *, call: int, seconds: float) -> None:
        """The ``call``-th call of ``method`` from now (1: the next) takes
        effect at once, but its answer is held back ``seconds`` (or until the
        server closes): a client that stops meanwhile never learns it worked."""
        self._stalls.setdefault(method, []).append((len(self.of(method)) + call, seconds))

    def cut(self, method: str, *, call: int) -> None:
        """The ``call``-th call of ``method`` from now (1: the next) takes
        effect, then its connection is cut before any answer: the client
        wrote its request whole and never learns whether it worked."""
        self._cuts.append((method, len(self.of(method)) + call))

    def block(self, chat: int) -> None:
        """The user blocked the bot: sending to ``chat`` is forbidden."""
        self._blocked.add(chat)

    # -- what a test reads ----------------------------------------------------

    def sent(self, chat: int | None = None) -> list[dict[str, Any]]:
        """The messages the bot sent (successfully), in order."""
        return [c.params for c in self.of("sendMessage")
                if c.answer.get("ok") and (chat is None or c.params.get("chat_id") == chat)]

    def wait_sent(self, chat: int, count: int, timeout: float = 30.0) -> bool:
        """Wait until the bot has sent ``count`` messages to ``chat``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._sent_by_chat.get(chat, 0) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def of(self, method: str) -> list[Call]:
        return [c for c in list(self.calls) if c.method == method]

    @property
    def confirmed(self) -> int:
        """The highest offset Telegram was sent: every update below it is gone."""
        return self._confirmed

    # -- serving --------------------------------------------------------------

    def _photo_size(self, content: bytes, tag: str, width: int) -> dict[str, Any]:
        file_id = f"file-{len(self._files)}-{tag}"
        self._files[file_id] = (f"photos/{file_id}.jpg", content)
        return {"file_id": file_id, "file_unique_id": f"u{len(self._files)}{tag}", "file_size": len(content),
                "width": width, "height": width * 3 // 4}

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        failures = self._failures.get(method)
        if failures:
            return failures.pop(0)
        if method == "getMe":
            return _ok({"id": BOT_ID, "is_bot": True, "first_name": "enact test", "username": USERNAME})
        if method == "getUpdates":
            return _ok(self._get_updates(params))
        if method == "sendMessage":
            chat = params.get("chat_id")
            if chat in self._blocked:
                return {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}
            if not isinstance(params.get("text"), str) or not params["text"]:
                return {"ok": False, "error_code": 400, "description": "Bad Request: message text is empty"}
            if len(params["text"].encode("utf-16-le")) // 2 > 4096:
                return {"ok": False, "error_code": 400, "description": "Bad Request: message is too long"}
            with self._changed:
                self._sent_by_chat[chat] = self._sent_by_chat.get(chat, 0) + 1
                self._changed.notify_all()
            return _ok({"message_id": next(self._sent_ids), "date": int(time.time()),
                        "chat": {"id": chat, "type": "private"}, "text": params["text"]})
        if method == "sendChatAction":
            return _ok(True)
        if method == "getFile":
            found = self._files.get(str(params.get("file_id")))
            if found is None:
                return {"ok": False, "error_code": 400, "description": "Bad Request: invalid file_id"}
            return _ok({"file_id": params["file_id"], "file_unique_id": "u", "file_size": len(found[1]),
                        "file_path": found[0]})
        return {"ok": False, "error_code": 404, "description": "Not Found"}

    def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        limit = int(params.get("limit") or 100)
        deadline = time.monotonic() + timeout
        with self._changed:
            self.offsets.append(offset)
            if offset:
                self._confirmed = max(self._confirmed, offset)
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            while not self._updates and not self._redelivered:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            again, self._redelivered = self._redelivered, []
            return (again + self._updates)[:limit]

    def _hold_back(self, method: str) -> None:
        count = len(self.of(method))
        for stall in [s for s in self._stalls.get(method, []) if s[0] == count]:
            self._stalls[method].remove(stall)
            self._closing.wait(stall[1])

    def _cut_now(self, method: str) -> bool:
        due = (method, len(self.of(method)))
        if due in self._cuts:
            self._cuts.remove(due)
            return True
        return False

    def _file(self, path: str) -> bytes | None:
        return next((content for stored, content in self._files.values() if stored == path), None)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read ``calls``."""

            def _reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _route(self, params: dict[str, Any]) -> None:
                path = urlsplit(self.path).path
                file_prefix = f"/file/bot{server.token}/"
                if path.startswith(file_prefix):
                    content = server._file(unquote(path[len(file_prefix):]))
                    if content is None:
                        self._reply(404, b'{"ok":false,"error_code":404,"description":"Not Found"}')
                    else:
                        self._reply(200, content, "image/jpeg")
                    return
                bot, _, method = path.strip("/").partition("/")
                if bot != f"bot{server.token}":
                    self._reply(401, b'{"ok":false,"error_code":401,"description":"Unauthorized"}')
                    return
                call = Call(method=method, params=params, at=time.monotonic())
                server.calls.append(call)
                call.answer = server._answer(method, params)
                if server._cut_now(method):
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                server._hold_back(method)
                status = 200 if call.answer.get("ok") else int(call.answer.get("error_code", 400))
                self._reply(status, orjson.dumps(call.answer))

            def do_GET(self) -> None:
                self._route(dict(parse_qsl(urlsplit(self.path).query)))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    params = orjson.loads(raw) if raw else {}
                else:
                    params = dict(parse_qsl(raw.decode()))
                self._route(params)

        return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a daemon stopping cuts its long poll) is no error here."""


def _ok(result: Any) -> dict[str, Any]:
    return {"ok": True, "result": result}

