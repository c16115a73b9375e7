"""The openai runtime against the scripted model server's chat-completions route."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import model_chat  # noqa: F401  (registers /v1/chat/completions)
import pytest
from model_server import Malformed, ModelServer, Reply, Stall, Status, Tokens, ToolCall

from enact.cancellation import CancellationToken
from enact.components import ComponentError
from enact.config import ConfigError
from enact.messages.sessions import HistoryMessage
from enact.retry import Backoff
from enact.runtime import (
    RuntimeAuthFailed,
    RuntimeCancelled,
    RuntimeFailure,
    RuntimeMalformedOutput,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeSessionUnknown,
    RuntimeTimeout,
    RuntimeUnavailable,
    Usage,
)
from enact.runtime._openai_wire import error_message, retry_after
from enact.runtime.history import trim
from enact.runtime.openai import OpenAIRuntime
from enact.runtime.openai_component import OpenAIRuntimeComponent

QUICK = Backoff(first_s=0.01, factor=2.0, attempts=3)


def runtime_for(server: ModelServer, **options: object) -> OpenAIRuntime:
    return OpenAIRuntime(f"{server.url}/v1", model="llama-test", api_key="sk-local", retries=QUICK, **options)  # type: ignore[arg-type]


@pytest.fixture
def server() -> ModelServer:
    with ModelServer() as running:
        yield running  # type: ignore[misc]


def test_a_reply_is_parsed_with_its_usage_and_a_session_of_enacts_own(server: ModelServer) -> None:
    server.script(Reply("hello there", tokens=Tokens(input=20, cached_input=4, output=9, reasoning=1)))
    result = runtime_for(server).invoke(RuntimeRequest(session_key="local:me", prompt="hi"))
    assert result.text == "hello there"
    assert result.usage == Usage(input_tokens=20, cached_input_tokens=4, output_tokens=9, reasoning_tokens=1)
    assert result.native_session is not None and result.native_session.startswith("openai-")
    (sent,) = server.model_requests()
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-local"
    assert sent.json()["model"] == "llama-test"
    assert sent.json()["messages"] == [{"role": "user", "content": "hi"}]


def test_an_isolated_call_has_no_session(server: ModelServer) -> None:
    server.script(Reply("[]"))
    assert runtime_for(server).invoke(RuntimeRequest(session_key="", prompt="scan")).native_session is None


def test_the_history_goes_before_the_new_message_and_the_session_is_kept(server: ModelServer) -> None:
    server.script(Reply("second answer"))
    history = (HistoryMessage(role="user", content="first"), HistoryMessage(role="assistant", content="one"))
    result = runtime_for(server).invoke(
        RuntimeRequest(session_key="k", prompt="second", native_session="openai-abc", history=history)
    )
    assert result.native_session == "openai-abc"
    assert server.model_requests()[0].json()["messages"] == [
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
    ]


def test_a_resume_without_history_is_an_unknown_session(server: ModelServer) -> None:
    with pytest.raises(RuntimeSessionUnknown):
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x", native_session="openai-gone"))
    assert server.model_requests() == []


def test_a_refused_key_is_an_auth_failure_without_retry(server: ModelServer) -> None:
    server.script(Status(401, "invalid api key"))
    with pytest.raises(RuntimeAuthFailed, match="401: invalid api key"):
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x"))
    assert len(server.model_requests()) == 1


def test_a_429_is_retried_after_the_time_the_server_asks_for(server: ModelServer) -> None:
    server.script(Status(429, "slow down", retry_after=1), Reply("at last"))
    started = time.monotonic()
    result = runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x"))
    assert result.text == "at last"
    assert time.monotonic() - started >= 1.0
    assert len(server.model_requests()) == 2


def test_a_429_whose_wait_outlasts_the_timeout_is_rate_limited_at_once(server: ModelServer) -> None:
    server.script(Status(429, "slow down", retry_after=30))
    started = time.monotonic()
    with pytest.raises(RuntimeRateLimited) as caught:
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=5))
    assert caught.value.retry_after_s == 30
    assert time.monotonic() - started < 2


def test_three_server_errors_end_in_a_failure_naming_the_server_message(server: ModelServer) -> None:
    server.script(Status(500, "boom"), Status(500, "boom"), Status(500, "boom again"), Reply("never"))
    with pytest.raises(RuntimeFailure, match="500: boom again") as caught:
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x"))
    assert caught.value.kind == "failed"
    assert len(server.model_requests()) == 3


def test_a_server_error_then_an_answer_succeeds(server: ModelServer) -> None:
    server.script(Status(503), Reply("recovered"))
    assert runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x")).text == "recovered"


def test_another_client_error_fails_at_once_with_the_server_message(server: ModelServer) -> None:
    server.script(Status(404, "model 'llama-test' not found"))
    with pytest.raises(RuntimeFailure, match="model 'llama-test' not found") as caught:
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x"))
    assert caught.value.kind == "failed"
    assert len(server.model_requests()) == 1


@pytest.mark.parametrize("answer", [Malformed(b"{not json", "application/json"), Malformed(b'{"choices": []}'),
                                    ToolCall("ls")])
def test_a_body_that_is_not_a_text_completion_is_malformed_output(server: ModelServer, answer: object) -> None:
    server.script(answer)  # type: ignore[arg-type]
    with pytest.raises(RuntimeMalformedOutput):
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x"))


def test_a_stall_past_the_timeout_is_a_timeout(server: ModelServer) -> None:
    server.script(Stall())
    started = time.monotonic()
    with pytest.raises(RuntimeTimeout):
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=0.5))
    assert 0.4 < time.monotonic() - started < 2


CANCELLED_WITHIN_S = 5.0
"""How soon a call cancelled 0.3 s in must return: far below its 30 s
timeout, and loose enough for real threads and sockets on a loaded machine."""


def test_a_cancelled_call_returns_long_before_its_timeout(server: ModelServer) -> None:
    server.script(Stall())
    cancel = CancellationToken()
    threading.Timer(0.3, cancel.cancel, args=("owner cancelled",)).start()
    started = time.monotonic()
    with pytest.raises(RuntimeCancelled, match="owner cancelled"):
        runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=30, cancel=cancel))
    assert time.monotonic() - started < CANCELLED_WITHIN_S


def test_an_endpoint_nobody_listens_on_is_unavailable_after_three_attempts() -> None:
    with ModelServer() as gone:
        url = gone.url
    runtime = OpenAIRuntime(f"{url}/v1", model="m", retries=QUICK)
    with pytest.raises(RuntimeUnavailable, match="cannot reach"):
        runtime.invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=5))


def test_images_are_sent_as_data_urls(server: ModelServer, tmp_path: Path) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(b"\x89PNG")
    server.script(Reply("a dot"))
    runtime_for(server).invoke(RuntimeRequest(session_key="k", prompt="what is it", images=(image,)))
    (content,) = (m["content"] for m in server.model_requests()[0].json()["messages"])
    assert content[0] == {"type": "text", "text": "what is it"}
    assert content[1]["image_url"]["url"] == "data:image/png;base64,iVBORw=="


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after("2") == 2.0
    assert retry_after(None) is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert retry_after("soon") is None


def test_error_messages_are_read_from_openai_and_ollama_bodies() -> None:
    assert error_message(b'{"error": {"message": "bad key"}}') == "bad key"
    assert error_message(b'{"error": "model not found"}') == "model not found"
    assert error_message(b"<html>gateway</html>") == "<html>gateway</html>"


def test_trimming_keeps_the_startup_message_and_the_newest_others() -> None:
    def message(role: str, content: str) -> HistoryMessage:
        return HistoryMessage(role=role, content=content)

    history = [message("user", "S" * 50), message("assistant", "a" * 30), message("user", "b" * 30),
               message("assistant", "c" * 30), message("user", "d" * 30), message("assistant", "e" * 30)]
    kept = trim(history, 130)
    assert [m.content[0] for m in kept] == ["S", "d", "e"]
    assert trim(history, 10) == (history[0],)
    assert trim([], 100) == ()


def test_the_component_needs_a_model_and_reads_its_variables(tmp_path: Path) -> None:
    from enact.components import Components

    installed = Components(items=(OpenAIRuntimeComponent(),))
    component = OpenAIRuntimeComponent()
    with pytest.raises(ComponentError, match="ENACT_OPENAI_MODEL"):
        component.validate_environment(installed.load_config(tmp_path, environ={}))
    settings = installed.load_config(tmp_path, environ={"ENACT_OPENAI_MODEL": "qwen", "ENACT_OPENAI_API_KEY": "k",
                                                        "ENACT_OPENAI_BASE_URL": "http://10.0.0.2:8000/v1/"})
    runtime = component.make_runtime(settings, None)
    assert (runtime.base_url, runtime.model, runtime.capabilities.agentic) == ("http://10.0.0.2:8000/v1", "qwen", False)
    with pytest.raises(ConfigError, match="http"):
        installed.load_config(tmp_path, environ={"ENACT_OPENAI_BASE_URL": "ftp://x"})


def test_trimming_keeps_the_answer_to_the_first_message_when_all_fits() -> None:
    history = [HistoryMessage(role="user", content="startup"), HistoryMessage(role="assistant", content="hi")]
    assert trim(history, 1000) == tuple(history)


@pytest.fixture
def silent_listener() -> Iterator[socket.socket]:
    """A loopback listener whose accept queue is full: a connection to it
    never completes its TCP handshake (Linux drops the SYN)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers: list[socket.socket] = []
    for _ in range(2):  # listen(0) queues one; the second makes sure it is full
        filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    try:
        yield listener
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def cancel_after(seconds: float) -> CancellationToken:
    cancel = CancellationToken()
    timer = threading.Timer(seconds, cancel.cancel, args=("owner cancelled",))
    timer.daemon = True
    timer.start()
    return cancel


def test_a_cancel_during_the_tcp_connect_ends_the_call_long_before_its_timeout(silent_listener: socket.socket) -> None:
    host, port = silent_listener.getsockname()
    runtime = OpenAIRuntime(f"http://{host}:{port}/v1", model="m", retries=QUICK)
    started = time.monotonic()
    with pytest.raises(RuntimeCancelled, match="owner cancelled"):
        runtime.invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=30, cancel=cancel_after(0.3)))
    assert time.monotonic() - started < CANCELLED_WITHIN_S


def test_a_cancel_during_the_tls_handshake_ends_the_call_long_before_its_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as mute:  # accepts (the kernel does), never says hello
        host, port = mute.getsockname()[:2]
        runtime = OpenAIRuntime(f"https://{host}:{port}/v1", model="m", retries=QUICK)
        started = time.monotonic()
        with pytest.raises(RuntimeCancelled, match="owner cancelled"):
            runtime.invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=30, cancel=cancel_after(0.3)))
        assert time.monotonic() - started < CANCELLED_WITHIN_S


def test_a_connect_that_never_completes_times_out_at_the_call_timeout(silent_listener: socket.socket) -> None:
    host, port = silent_listener.getsockname()
    runtime = OpenAIRuntime(f"http://{host}:{port}/v1", model="m", retries=QUICK)
    started = time.monotonic()
    with pytest.raises(RuntimeTimeout):
        runtime.invoke(RuntimeRequest(session_key="k", prompt="x", timeout_s=0.5))
    assert time.monotonic() - started < 0.5 + CANCELLED_WITHIN_S  # not the retries' or the OS's connect timeout
