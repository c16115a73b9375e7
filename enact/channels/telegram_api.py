"""The Telegram Bot API over HTTP(S), with the standard library only.

Every failure is a ``BotApiError`` with a ``reason`` (the label it is counted
under) and a text from which the token has been removed: the token is part
of every URL (``/bot<token>/<method>``), so no URL, and nothing that could
hold one, leaves this module unredacted.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import stat
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from enact.errors import EnactError

REDACTED = "<token>"

# The reasons a call fails, as the metrics label them (enact.metrics lists them).
NETWORK = "network"
SERVER_ERROR = "server_error"
RATE_LIMITED = "rate_limited"
UNAUTHORIZED = "unauthorized"
CONFLICT = "conflict"
BAD_REQUEST = "bad_request"
FORBIDDEN = "forbidden"
BAD_RESPONSE = "bad_response"
TOO_LARGE = "too_large"

_REASON_BY_CODE = {400: BAD_REQUEST, 401: UNAUTHORIZED, 403: FORBIDDEN, 404: UNAUTHORIZED, 409: CONFLICT,
                   429: RATE_LIMITED}


class BotApiError(EnactError):
    """A call that did not work; ``str()`` never holds the token."""

    def __init__(self, reason: str, text: str, *, code: int = 0, retry_after_s: float | None = None,
                 written: bool = False) -> None:
        super().__init__(text)
        self.reason = reason
        self.code = code
        self.retry_after_s = retry_after_s
        self.written = written
        """A network error after the request went out whole: Telegram may have acted on it."""

    @property
    def terminal(self) -> bool:
        """Trying again cannot help: the request itself is refused."""
        return self.reason in (BAD_REQUEST, FORBIDDEN, UNAUTHORIZED, TOO_LARGE)


class TokenError(EnactError, ValueError):
    """No usable token; one line that names where it was looked for."""


def read_token(environ_token: str, token_file: str) -> str:
    """The token from ``ENACT_TELEGRAM_TOKEN``, else from the token file,
    which must be readable by its owner only (mode 0600 or 0400)."""
    if environ_token.strip():
        return environ_token.strip()
    if not token_file:
        raise TokenError("no bot token: set ENACT_TELEGRAM_TOKEN or channels.telegram.token_file")
    path = Path(token_file).expanduser()
    try:
        info = path.stat()
    except OSError as error:
        raise TokenError(f"channels.telegram.token_file {path}: {error.strerror}") from None
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise TokenError(f"channels.telegram.token_file {path} is mode {stat.S_IMODE(info.st_mode):04o}; "
                         f"it holds a secret, so it must be 0600 (chmod 600 {path})")
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise TokenError(f"channels.telegram.token_file {path} cannot be read: {error}") from None
    if not token:
        raise TokenError(f"channels.telegram.token_file {path} is empty")
    return token


class BotApi:
    """Calls to one bot. ``call`` opens a connection per call (replies are
    rare; a stale kept-alive connection could make a send's outcome unknown);
    ``poll`` keeps one for the long polls, which ``abort`` can cut from
    another thread at once."""

    def __init__(self, api_base: str, token: str, *, connect_timeout_s: float = 10.0) -> None:
        parts = urlsplit(api_base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"channels.telegram.api_base must be an http(s) URL, got {api_base!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._token = token
        self._connect_timeout_s = connect_timeout_s
        self._poll_lock = threading.Lock()
        self._poll_connection: http.client.HTTPConnection | None = None
        self._aborted = False

    def redact(self, text: str) -> str:
        return text.replace(self._token, REDACTED) if self._token else text

    # -- calls --------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any], *, timeout_s: float = 30.0) -> Any:
        """POST ``method`` with JSON ``params``; the ``result`` of the answer."""
        connection = self._connect(timeout_s)
        try:
            return self._request(connection, method, params)
        finally:
            connection.close()

    def poll(self, params: dict[str, Any], *, timeout_s: float) -> Any:
        """``getUpdates`` on the kept connection (opened again after a failure)."""
        with self._poll_lock:
            if self._aborted:
                raise BotApiError(NETWORK, "polling was stopped")
            connection = self._poll_connection
            if connection is None:
                connection = self._poll_connection = self._connect(timeout_s)
            connection.timeout = timeout_s
        try:
            return self._request(connection, "getUpdates", params)
        except BotApiError:
            with self._poll_lock:
                if self._poll_connection is connection:
                    self._poll_connection = None
            connection.close()
            raise

    def abort(self) -> None:
        """Cut the long poll under way, if any; no poll follows."""
        with self._poll_lock:
            self._aborted = True
            connection, self._poll_connection = self._poll_connection, None
        if connection is not None and connection.sock is not None:
            with contextlib.suppress(OSError):  # closed already
                connection.sock.shutdown(socket.SHUT_RDWR)
            connection.close()

    def download(self, file_path: str, destination: Path, *, max_bytes: int, timeout_s: float = 60.0) -> int:
        """Fetch ``/file/bot<token>/<file_path>`` into ``destination`` (written
        whole or not at all); refuses more than ``max_bytes``. Returns its size."""
        connection = self._connect(timeout_s)
        partial = destination.with_name(destination.name + ".part")
        try:
            path = f"{self._prefix}/file/bot{self._token}/{quote(file_path)}"
            response = self._send(connection, "GET", path, None, {})
            if response.status != 200:
                raise BotApiError(NETWORK if response.status >= 500 else BAD_REQUEST,
                                  f"file download answered HTTP {response.status}", code=response.status)
            size = 0
            destination.parent.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as out:
                while chunk := self._read(response, 65536):
                    size += len(chunk)
                    if size > max_bytes:
                        raise BotApiError(TOO_LARGE, f"the file is larger than {max_bytes} bytes")
                    out.write(chunk)
            os.replace(partial, destination)
            return size
        finally:
            partial.unlink(missing_ok=True)
            connection.close()

    # -- plumbing -----------------------------------------------------------

    def _connect(self, timeout_s: float) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return kind(self._host, self._port, timeout=max(timeout_s, self._connect_timeout_s))

    def _request(self, connection: http.client.HTTPConnection, method: str, params: dict[str, Any]) -> Any:
        body = orjson.dumps(params)
        response = self._send(connection, "POST", f"{self._prefix}/bot{self._token}/{method}", body,
                              {"Content-Type": "application/json"})
        raw = self._read(response, -1)
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError:
            reason = SERVER_ERROR if response.status >= 500 else BAD_RESPONSE
            raise BotApiError(reason, f"{method}: HTTP {response.status} with a body that is not JSON",
                              code=response.status) from None
        if not isinstance(answer, dict):
            raise BotApiError(BAD_RESPONSE, f"{method}: the answer is not a JSON object", code=response.status)
        if answer.get("ok") is True:
            return answer.get("result")
        error_code = answer.get("error_code")
        code = error_code if isinstance(error_code, int) else response.status
        description = self.redact(str(answer.get("description", "")))[:300]
        parameters = answer.get("parameters")
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        reason = SERVER_ERROR if code >= 500 else _REASON_BY_CODE.get(code, BAD_REQUEST)
        raise BotApiError(reason, f"{method}: {code} {description}".strip(), code=code,
                          retry_after_s=float(retry_after) if isinstance(retry_after, int | float) else None)

    def _send(self, connection: http.client.HTTPConnection, verb: str, path: str, body: bytes | None,
              headers: dict[str, str]) -> http.client.HTTPResponse:
        try:
            connection.request(verb, path, body=body, headers=headers)
        except Exception as error:  # any of them may quote the path, which holds the token
            raise self._network_error(error, written=False) from None
        try:  # from here on the request is out whole: a failure leaves its outcome unknown
            return connection.getresponse()
        except Exception as error:
            raise self._network_error(error, written=True) from None

    def _read(self, response: http.client.HTTPResponse, size: int) -> bytes:
        try:
            return response.read(size) if size >= 0 else response.read()
        except Exception as error:  # any of them may quote the path, which holds the token
            raise self._network_error(error, written=True) from None

    def _network_error(self, error: Exception, *, written: bool) -> BotApiError:
        kind = "timed out" if isinstance(error, TimeoutError) else type(error).__name__
        when = "after the request was sent" if written else "before the request was sent"
        return BotApiError(NETWORK, self.redact(f"network error ({kind}) {when}: {error}"), written=written)
