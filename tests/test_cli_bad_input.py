"""Bad input on the command line: one line (JSON with ``--json``), exit 2, no
traceback, and nothing changed in the daemon. Every command taking free text
goes through the same check before anything is written to the socket."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from enact.messages.common import MAX_ID, MAX_TEXT

from conftest import Daemon, DaemonFactory, enact_env

NOT_UTF8 = "bad \udcff"
"""What Python makes of the shell argument ``$'bad \\xff'``; subprocess
writes it back as those bytes."""


def _cli(daemon: Daemon, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "enact", *args], env=enact_env(daemon.home), input=stdin,
                            capture_output=True, timeout=60)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(errors="replace"),
                                       result.stderr.decode(errors="replace"))


def _refused_in_one_line(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("enact: ") and needle in line, line
    assert result.stdout == ""


@pytest.fixture(scope="module")
def daemon(module_daemons: DaemonFactory) -> Daemon:
    """One daemon for the module's refusals: each test finds it as the last
    left it, with nothing in it (which that test's ``_nothing_changed``
    checked), so each still sees that its own bad input changed nothing.
    The one test that sends something starts its own."""
    return module_daemons.start()


def _nothing_changed(daemon: Daemon) -> None:
    assert daemon.cli_json("turns", "--json") == []
    assert daemon.cli_json("memory", "list", "--json")["facts"] == []
    assert daemon.cli_json("task", "list", "--json") == []
    assert daemon.process.poll() is None


def test_send_over_the_text_limit_exits_2_and_sends_nothing(daemon: Daemon) -> None:
    _refused_in_one_line(_cli(daemon, "send", "a" * (MAX_TEXT + 1)), f"field 'text' is too long: {MAX_TEXT + 1}")
    as_json = _cli(daemon, "send", "--json", "a" * (MAX_TEXT + 1))
    assert as_json.returncode == 2 and as_json.stderr == ""
    assert orjson.loads(as_json.stdout) == {
        "status": "bad_input", "error": f"field 'text' is too long: {MAX_TEXT + 1} > {MAX_TEXT}",
    }
    _nothing_changed(daemon)


def test_a_message_id_over_its_limit_exits_2(daemon: Daemon) -> None:
    _refused_in_one_line(_cli(daemon, "send", "--message-id", "m" * (MAX_ID + 1), "hello"),
                         "field 'message_id' is too long")
    _nothing_changed(daemon)


def test_a_send_over_the_frame_size_exits_2_without_a_traceback(daemon: Daemon) -> None:
    # Eleven arguments of 100,000 characters: each under the kernel's limit
    # of one argument, together over the 1 MiB frame.
    words = ["w" * 100_000] * 11
    _refused_in_one_line(_cli(daemon, "send", *words), "the daemon takes at most 1048576")
    _nothing_changed(daemon)


@pytest.mark.parametrize(
    "args",
    [
        ("send", NOT_UTF8),
        ("send", "--reply-to", NOT_UTF8, "hello"),
        ("memory", "remember", NOT_UTF8),
        ("memory", "forget", NOT_UTF8),
        ("task", "add", NOT_UTF8),
        ("backlog", "add", NOT_UTF8),
        ("cron", "add", "every 1h", NOT_UTF8),
        ("turns", "--conversation", NOT_UTF8),
    ],
)
def test_an_argument_that_is_not_utf8_exits_2_naming_the_field(daemon: Daemon, args: tuple[str, ...]) -> None:
    _refused_in_one_line(_cli(daemon, *args), "is not valid UTF-8 text")
    # `send`'s options come before its text: every word after the text is text.
    command, *rest = args
    as_json = _cli(daemon, command, "--json", *rest) if command == "send" else _cli(daemon, *args, "--json")
    assert as_json.returncode == 2 and "not valid UTF-8" in orjson.loads(as_json.stdout)["error"]
    _nothing_changed(daemon)


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_or_blank_text_is_refused_before_it_reaches_the_model(daemon: Daemon, text: str) -> None:
    _refused_in_one_line(_cli(daemon, "send", text), "there is no text to send")
    _refused_in_one_line(_cli(daemon, "send", "-", stdin=text.encode()), "there is no text to send")
    _refused_in_one_line(_cli(daemon, "memory", "remember", text), "there is no text to remember")
    _nothing_changed(daemon)


def test_a_blank_send_over_a_raw_frame_is_ignored_by_the_daemon(daemon: Daemon) -> None:
    from enact.messages.inbox import Ignored
    from enact.messages.local import Send

    reply = daemon.request(Send(text="  ", message_id="raw-blank"))
    assert isinstance(reply, Ignored) and reply.reason == "there is no text to send"
    _nothing_changed(daemon)


def test_send_dash_reads_the_text_from_standard_input(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    long_text = "x" * 60_000 + " ünïcode"  # longer than is comfortable in one shell argument
    result = _cli(daemon, "send", "--json", "-", stdin=long_text.encode() + b"\n")
    assert result.returncode == 0, result
    [turn] = daemon.cli_json("turns", "--json")
    assert turn["message"] == long_text


def test_send_dash_refuses_input_that_is_not_utf8_or_too_long(daemon: Daemon) -> None:
    _refused_in_one_line(_cli(daemon, "send", "-", stdin=b"bad \xff"), "standard input is not valid UTF-8")
    _refused_in_one_line(_cli(daemon, "send", "-", stdin=b"y" * (MAX_TEXT + 1)), "field 'text' is too long")
    _refused_in_one_line(_cli(daemon, "send", "-", stdin=b"z" * (4 * MAX_TEXT + 1)),
                         f"longer than {MAX_TEXT} characters")
    _nothing_changed(daemon)
