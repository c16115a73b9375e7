"""The ``openai`` runtime: any OpenAI-compatible chat-completions endpoint
(Ollama, vLLM, llama.cpp's server, hosted APIs) over plain HTTP.

The endpoint keeps no state, so a session is enact's own: its id is made
here, and the Sessions actor keeps its message history (``runtime.histories``)
and hands it back with each request. The adapter answers conversation only:
it cannot edit files or run commands, so it is not ``agentic``.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from enact.clock import REAL_CLOCK
from enact.components import RuntimeCheck
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.retry import Backoff
from enact.runtime import (
    Capabilities,
    RuntimeAuthFailed,
    RuntimeCancelled,
    RuntimeFailure,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeResult,
    RuntimeSessionUnknown,
    RuntimeTimeout,
    RuntimeUnavailable,
)
from enact.runtime._interruptible import connect, shut
from enact.runtime._openai_wire import error_message, parse_completion, retry_after, user_content

RETRIES = Backoff(first_s=0.5, factor=2.0, max_s=8.0, attempts=3)
"""Connection errors, 429 and 5xx are retried: three attempts in all."""

CHECK_TIMEOUT_S = 5.0
"""How long ``enact runtime check`` waits for the endpoint's model list."""


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: bytes
    retry_after_s: float | None


class _Retryable(EnactError):
    """One attempt failed in a way another attempt may not."""

    def __init__(self, failure: RuntimeFailure, wait_s: float | None = None) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.wait_s = wait_s  # what the server asked for (Retry-After), else None


class OpenAIRuntime:
    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str = "",
        history_chars: int = 60_000,
        retries: Backoff = RETRIES,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.history_chars = history_chars
        self._retries = retries
        self._jitter = jitter
        parsed = urllib.parse.urlsplit(self.base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"runtime.openai.base_url: not an http(s) URL: {base_url!r}")
        self._url = parsed

    @property
    def capabilities(self) -> Capabilities:
        """Conversation only (not ``agentic``: task work needs a runtime that
        edits and runs commands); the endpoint forgets each call, so the host
        keeps the session's history, up to ``history_chars``; it starts no
        subprocess."""
        return Capabilities(agentic=False, keeps_history=False, confines_subprocesses=False,
                            history_chars=self.history_chars)

    @property
    def waits_for(self) -> str:
        """What a call waits for, as ``runtime check --probe`` names it."""
        return f"{self.base_url}/chat/completions (model {self.model})"

    # -- a call ------------------------------------------------------------------

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        started = time.monotonic()
        if request.cancel.cancelled:
            raise RuntimeCancelled(request.cancel.reason)
        native = None
        if request.session_key:
            if request.native_session is not None and not request.history:
                # The mapping outlived its history (trimmed away or written by
                # an older enact): a fresh session gets the startup context.
                raise RuntimeSessionUnknown(f"no message history is kept for session {request.native_session!r}")
            native = request.native_session or f"openai-{uuid.uuid4().hex}"
        messages: list[dict[str, Any]] = [{"role": m.role, "content": m.content} for m in request.history]
        messages.append({"role": "user", "content": user_content(request.prompt, request.images)})
        body = orjson.dumps({"model": self.model, "messages": messages, "stream": False})
        deadline = started + request.timeout_s
        answer = self._post_with_retries(body, deadline, request)
        text, usage = parse_completion(answer.body)
        return RuntimeResult(text=text, native_session=native, usage=usage, duration_s=time.monotonic() - started)

    def _post_with_retries(self, body: bytes, deadline: float, request: RuntimeRequest) -> _Answer:
        attempt = 1
        while True:
            try:
                return self._attempt(body, deadline, request)
            except _Retryable as retryable:
                if self._retries.exhausted(attempt):
                    raise retryable.failure from None
                wait = retryable.wait_s
                if wait is None:
                    wait = self._retries.delay(attempt) * (0.5 + self._jitter() / 2)
                if time.monotonic() + wait >= deadline:
                    raise retryable.failure from None  # the wait alone would outlast the call's timeout
                if request.cancel.wait(wait):
                    raise RuntimeCancelled(request.cancel.reason) from None
                attempt += 1

    def _attempt(self, body: bytes, deadline: float, request: RuntimeRequest) -> _Answer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RuntimeTimeout(f"no answer from {self.base_url} within {request.timeout_s:g} s")
        answer = self._exchange(body, remaining, request)
        if answer.status == 200:
            return answer
        message = f"{self.base_url} answered {answer.status}: {error_message(answer.body)}"
        if answer.status in (401, 403):
            raise RuntimeAuthFailed(f"{message} (check ENACT_OPENAI_API_KEY)")
        if answer.status == 429:
            raise _Retryable(RuntimeRateLimited(message, retry_after_s=answer.retry_after_s), answer.retry_after_s)
        if answer.status >= 500:
            raise _Retryable(RuntimeFailure(message))
        raise RuntimeFailure(message)

    def _exchange(self, body: bytes, timeout_s: float, request: RuntimeRequest) -> _Answer:
        """One POST. A cancellation or the deadline ends it at once in every
        phase: the TCP connect waits on a wake-up socket beside the connecting
        one, and afterwards (TLS handshake, request, answer) either shuts the
        socket down from another thread, which wakes the blocked call."""
        url = self._url
        connection_type = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        connection = connection_type(url.hostname or "", url.port, timeout=timeout_s)
        stopped: list[str] = []
        sockets: list[socket.socket] = []  # the response keeps reading it after http.client lets go
        wake_reader, wake_writer = socket.socketpair()
        guard = threading.Lock()

        def stop(why: str) -> None:
            with guard:
                stopped.append(why)
                with contextlib.suppress(OSError):  # the call ended and closed it
                    wake_writer.send(b"x")
                for sock in sockets:
                    shut(sock)

        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        watchdog = REAL_CLOCK.call_later(timeout_s, lambda: stop("timeout"))  # the process's one timer thread
        try:
            request.cancel.on_cancel(lambda reason: stop("cancelled"))
            sock = connection.sock = connect(url.hostname or "", connection.port, timeout_s, wake_reader)
            if url.scheme == "https":  # the connection closes whichever socket it holds
                sock = connection.sock = ssl.create_default_context().wrap_socket(
                    sock, server_hostname=url.hostname, do_handshake_on_connect=False)
            with guard:
                sockets.append(sock)
                if stopped:  # stopped between the connect and now: shut it as stop() would have
                    shut(sock)
            if isinstance(sock, ssl.SSLSocket):
                sock.do_handshake()
            connection.request("POST", f"{url.path}/chat/completions", body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            if stopped:
                raise TimeoutError  # a shut-down socket can read as a short body
            return _Answer(response.status, data, retry_after(response.getheader("Retry-After")))
        except (OSError, http.client.HTTPException) as error:
            if request.cancel.cancelled:
                raise RuntimeCancelled(request.cancel.reason) from None
            if stopped or isinstance(error, TimeoutError):
                raise RuntimeTimeout(f"no answer from {self.base_url} within {request.timeout_s:g} s") from None
            raise _Retryable(RuntimeUnavailable(f"cannot reach {self.base_url}: {_describe(error)}")) from None
        finally:
            watchdog.cancel()
            connection.close()
            with guard:
                wake_reader.close()
                wake_writer.close()


def _describe(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def list_models(base_url: str, *, api_key: str, timeout_s: float = CHECK_TIMEOUT_S) -> tuple[int, bytes]:
    """``GET {base_url}/models`` (with the key if there is one): the status
    and body. Raises OSError or HTTPException when the endpoint cannot be reached."""
    url = urllib.parse.urlsplit(base_url.rstrip("/"))
    connection_type = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    connection = connection_type(url.hostname or "", url.port, timeout=timeout_s)
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        connection.request("GET", f"{url.path}/models", headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def model_names(body: bytes) -> list[str]:
    """The ids of a ``/models`` listing (OpenAI's ``{"data": [{"id": ...}]}``)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    listed = document.get("data") if isinstance(document, dict) else None
    return [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)] \
        if isinstance(listed, list) else []


def check_endpoint(base_url: str, *, api_key: str, model: str) -> RuntimeCheck:
    """What ``enact runtime check`` says of an endpoint: reachable, the key
    taken, a model named (and offered, when the endpoint lists its models).
    Every problem found is listed, so one run tells all that is missing."""
    unset = () if model else (_model_unset("llama3.2"),)
    try:
        status, body = list_models(base_url, api_key=api_key)
    except (OSError, http.client.HTTPException) as error:
        return RuntimeCheck(problems=(
            f"cannot reach {base_url}: {_describe(error)}; start the server (`ollama serve` for a local Ollama) "
            "or set ENACT_OPENAI_BASE_URL to one that answers", *unset))
    if status in (401, 403):
        fix = ("set ENACT_OPENAI_API_KEY to a key it accepts" if api_key
               else "it needs a key: set ENACT_OPENAI_API_KEY")
        what = "refused the key" if api_key else "refused a call without a key"
        return RuntimeCheck(found=base_url, problems=(
            f"{base_url} {what} ({status}: {error_message(body)}); {fix}", *unset))
    names = model_names(body) if status == 200 else []
    notes = [f"models offered: {', '.join(names[:10])}{' …' if len(names) > 10 else ''}"] if names else []
    if status != 200:
        notes.append(f"GET {base_url}/models answered {status}; some endpoints list no models, --probe tells")
    if model and names and model not in names:
        notes.append(f"{model} is not among the models the endpoint lists")
    problems = (_model_unset(names[0]),) if unset and names else unset
    return RuntimeCheck(found=base_url, problems=problems, notes=tuple(notes))


def _model_unset(example: str) -> str:
    return f"no model is set: set ENACT_OPENAI_MODEL (runtime.openai.model), e.g. {example}"
