"""What the CLI says and exits with for each outcome: `enact send` and
`enact turns` through real daemons, `--json` errors, `call --list`, `--home`
before the subcommand, and the client's view of a daemon that goes away."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from control_wire import LENGTH
from stand_in_daemon import Answer, stand_in_daemon
from test_chat import chat_home, commands_toml, deliver_with, runs, wait_for

from enact.cli._chat import STOPPED_TEXT, TAKEN_OVER_TEXT
from enact.home import LOG_NAME

from conftest import Daemon, DaemonFactory, enact_env, run_cli


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    return orjson.loads(result.stdout)


# -- enact send: exit codes and JSON for every outcome -------------------------


@pytest.fixture(scope="module")
def daemon(module_daemons: DaemonFactory) -> Daemon:
    """One daemon for the tests that only ask it things or are refused by
    it: none of them changes what another reads. The tests that send
    start their own."""
    return module_daemons.start()


def test_send_of_an_event_that_fails_exits_1_and_says_why(daemons: DaemonFactory) -> None:
    daemon = daemons.start(chat_home(daemons))
    plain = daemon.cli("send", "--message-id", "bad-1", "explode")
    assert plain.returncode == 1, plain
    assert "bad-1" in plain.stdout  # the diagnostic reply
    [line] = _lines(plain.stderr)
    assert line.startswith("enact: event ") and "failed after 3 attempts" in line
    assert "the model is unavailable" in line
    as_json = daemon.cli("send", "--json", "--message-id", "bad-1", "explode")
    assert as_json.returncode == 1, as_json
    outcome = _json(as_json)
    assert outcome["status"] == "failed" and outcome["duplicate"] is True
    assert "the model is unavailable" in outcome["error"]


def test_the_error_of_a_failed_event_shows_in_turns_and_get_outcome(daemons: DaemonFactory) -> None:
    daemon = daemons.start(chat_home(daemons))
    outcome = _json(daemon.cli("send", "--json", "--message-id", "bad-2", "explode"))
    [turn] = daemon.cli_json("turns", "--json")
    assert turn["outcome"] == "failed"
    assert "the model is unavailable" in turn["error"]
    assert len(turn["error"]) <= 500
    plain = daemon.cli("turns")
    assert any(line.startswith("  ! ") and "the model is unavailable" in line for line in _lines(plain.stdout))
    fetched = daemon.cli_json("call", "inbox.GetOutcome", orjson.dumps({"event_id": outcome["event_id"]}).decode())
    assert fetched["type"] == "inbox.Outcome"
    assert fetched["body"]["error"] == turn["error"] == outcome["error"]
    ok = _json(daemon.cli("send", "--json", "hello"))
    assert ok["error"] == "" and ok["status"] == "replied"


def test_send_json_of_an_event_still_in_progress_exits_1(daemons: DaemonFactory) -> None:
    home = chat_home(daemons)
    (home / "commands.toml").write_text(commands_toml(home.parent / "runs.txt").replace("sleep 60", "sleep 3"))
    daemon = daemons.start(home, env={"ENACT_CONTROL_REQUEST_TIMEOUT_S": "1"})
    result = daemon.cli("send", "--json", "--message-id", "slow-1", "do the slow thing")
    assert result.returncode == 1, result
    outcome = _json(result)
    assert outcome["status"] == "in_progress" and outcome["reply"] == ""
    assert result.stderr == ""


def test_a_reused_message_id_says_duplicate_in_the_plain_form(daemons: DaemonFactory) -> None:
    daemon = daemons.start(chat_home(daemons))
    first = daemon.cli("send", "--message-id", "again-1", "hello")
    assert first.returncode == 0 and first.stderr == "", first
    second = daemon.cli("send", "--message-id", "again-1", "hello")
    assert second.returncode == 0, second
    assert second.stdout == first.stdout
    assert _lines(second.stderr) == ["(duplicate: the earlier reply)"]


def test_send_whose_reply_was_never_delivered_exits_1_in_one_line(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    deliver_with(home, 'echo "notifier is down" >&2; exit 1', backoff_s=0.05)
    daemon = daemons.start(home)
    plain = daemon.cli("send", "hello")
    assert plain.returncode == 1, plain
    [line] = _lines(plain.stderr)
    assert line.startswith("enact: the reply was not delivered") and "notifier is down" in line
    as_json = daemon.cli("send", "--json", "hello again")
    assert as_json.returncode == 1
    outcome = _json(as_json)
    assert outcome["status"] == "delivery_failed" and "notifier is down" in outcome["error"]
    assert [t["outcome"] for t in daemon.cli_json("turns", "--json")] == ["delivery_failed"] * 2


def background_send(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "enact", "send", *args], env=enact_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_send_says_when_the_daemon_stops_while_it_waits(daemons: DaemonFactory) -> None:
    home = chat_home(daemons)
    daemon = daemons.start(home, env={"ENACT_DAEMON_SHUTDOWN_TIMEOUT_S": "1"})

    def background(*args: str) -> subprocess.Popen[str]:
        return background_send(home, *args)

    plain = background("--message-id", "cut-1", "do the slow thing")
    as_json = background("--json", "--conversation", "other", "--message-id", "cut-2", "do the slow thing")
    wait_for(lambda: runs(home) == 2, what="both slow actions to start")
    daemon.process.send_signal(signal.SIGTERM)
    out, err = plain.communicate(timeout=30)
    assert plain.returncode == 1, (out, err)
    assert _lines(err) == [f"enact: {STOPPED_TEXT}"]
    out, err = as_json.communicate(timeout=30)
    assert as_json.returncode == 1, (out, err)
    interrupted = orjson.loads(out)
    assert interrupted["status"] == "interrupted" and interrupted["error"] == STOPPED_TEXT
    daemon.wait_exit()
    restarted = daemons.start(home)
    wait_for(lambda: {"cut-1", "cut-2"} <= {t["message_id"] for t in restarted.cli_json("turns", "--json")},
             what="the new daemon to finish both events")
    assert runs(home) == 2  # the interrupted actions were not run again


def test_send_cut_off_by_daemon_stop_says_in_one_line_that_the_daemon_stopped(daemons: DaemonFactory) -> None:
    home = chat_home(daemons)
    daemon = daemons.start(home, env={"ENACT_DAEMON_SHUTDOWN_TIMEOUT_S": "1"})
    sending = background_send(home, "do the slow thing")
    wait_for(lambda: runs(home) == 1, what="the slow action to start")
    assert daemon.cli("daemon", "stop").returncode == 0
    out, err = sending.communicate(timeout=30)
    assert (sending.returncode, out, _lines(err)) == (1, "", [f"enact: {STOPPED_TEXT}"])
    assert "replaced" not in err and "taken over" not in err


def test_send_cut_off_by_a_takeover_says_in_one_line_that_the_daemon_was_taken_over(
    daemons: DaemonFactory,
) -> None:
    home = chat_home(daemons)
    old = daemons.start(home)
    plain = background_send(home, "do the slow thing")
    as_json = background_send(home, "--json", "--conversation", "other", "do the slow thing")
    wait_for(lambda: runs(home) == 2, what="both slow actions to start")
    new = daemons.start(home, "--takeover")
    out, err = plain.communicate(timeout=30)
    assert (plain.returncode, out, _lines(err)) == (1, "", [f"enact: {TAKEN_OVER_TEXT}"])
    out, err = as_json.communicate(timeout=30)
    assert as_json.returncode == 1
    assert {k: v for k, v in orjson.loads(out).items() if k in ("status", "error")} == {
        "status": "interrupted", "error": TAKEN_OVER_TEXT}
    old.wait_exit()
    new.wait_ready()


# -- a daemon that goes away, or answers oddly (a stand-in peer on the socket) --


def _hang_up(connection: socket.socket, _request: bytes) -> None:
    connection.shutdown(socket.SHUT_RDWR)


def _frame(message: dict[str, Any]) -> Answer:
    payload = orjson.dumps(message)
    return lambda connection, _request: connection.sendall(LENGTH.pack(len(payload)) + payload)


def test_send_whose_connection_closes_after_the_request_says_interrupted(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    with stand_in_daemon(home, _hang_up):
        result = run_cli(home, "send", "--message-id", "gone-1", "hello", timeout=30)
    assert result.returncode == 1, result
    assert _lines(result.stderr) == [f"enact: {STOPPED_TEXT}"]
    with stand_in_daemon(home, _hang_up):
        result = run_cli(home, "send", "--json", "hello", timeout=30)
    assert result.returncode == 1
    assert _json(result)["status"] == "interrupted"


def test_other_commands_whose_connection_closes_say_so_in_one_line(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    with stand_in_daemon(home, _hang_up):
        result = run_cli(home, "status", timeout=30)
    assert result.returncode == 1, result
    assert _lines(result.stdout + result.stderr) == [
        f"enact: the daemon closed the connection before it answered (home: {home})"
    ]


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_an_unexpected_reply_type_is_one_line_and_exit_1(daemons: DaemonFactory, as_json: bool) -> None:
    home = daemons.new_home()
    flag = ("--json",) if as_json else ()
    with stand_in_daemon(home, _frame({"type": "epoch.Current", "body": {"generation": 1}})):
        result = run_cli(home, "status", *flag, timeout=30)
    assert result.returncode == 1, result
    text = "unexpected reply epoch.Current to control.Status"
    if as_json:
        assert _json(result) == {"status": "failed", "error": text}
    else:
        assert _lines(result.stdout + result.stderr) == [f"enact: {text}"]


NEEDS_DAEMON_JSON: dict[str, tuple[str, ...]] = {
    "send": ("send", "--json", "hello"),
    "turns": ("turns", "--json"),
    "status": ("status", "--json"),
    "call": ("call", "--json", "epoch.RequireCurrent"),
}


@pytest.mark.parametrize("args", list(NEEDS_DAEMON_JSON.values()), ids=list(NEEDS_DAEMON_JSON))
def test_json_commands_without_a_daemon_print_json_and_exit_3(daemons: DaemonFactory, args: tuple[str, ...]) -> None:
    home = daemons.new_home()
    result = run_cli(home, *args)
    assert result.returncode == 3, result
    assert _json(result) == {"status": "not_running",
                             "error": f"enact is not running (home: {home}); start it with `enact daemon start`"}
    assert len(_lines(result.stdout)) == 1
    assert result.stderr == ""


def test_a_daemon_error_with_json_is_json_and_exit_1(daemon: Daemon) -> None:
    result = daemon.cli("call", "--json", "control.ShuttingDown", '{"pid": 1}')
    assert result.returncode == 1, result
    assert _json(result)["status"] == "failed" and "not a request" in _json(result)["error"]
    bad = daemon.cli("call", "--json", "nope.Nothing")
    assert bad.returncode == 2
    assert _json(bad)["status"] == "bad_input" and "nope.Nothing" in _json(bad)["error"]


# -- enact turns --last --------------------------------------------------------


def _send_all(daemon: Daemon, texts: list[str], *args: str) -> None:
    for text in texts:
        result = daemon.cli("send", *args, text)
        assert result.returncode == 0, result


def test_turns_last_shows_the_newest_and_each_turn_has_its_cursor(daemons: DaemonFactory) -> None:
    daemon = daemons.start(chat_home(daemons))
    _send_all(daemon, [f"m{i}" for i in range(6)])
    _send_all(daemon, ["o0", "o1"], "--conversation", "other")
    newest = daemon.cli_json("turns", "--json", "--last", "3")
    assert [t["message"] for t in newest] == ["m5", "o0", "o1"]
    assert [t["cursor"] for t in newest] == [6, 7, 8]
    of_cli = daemon.cli_json("turns", "--json", "--last", "2", "--conversation", "cli")
    assert [t["message"] for t in of_cli] == ["m4", "m5"]
    oldest = daemon.cli_json("turns", "--json", "--limit", "2")
    assert [(t["cursor"], t["message"]) for t in oldest] == [(1, "m0"), (2, "m1")]
    assert [t["message"] for t in daemon.cli_json("turns", "--json", "--last", "5", "--since", "6")] == ["o0", "o1"]
    plain = daemon.cli("turns", "--last", "1")
    assert plain.returncode == 0
    assert plain.stdout.startswith("#8 ") and "(next cursor: 8)" in plain.stdout


def test_turns_last_with_limit_is_a_usage_error_naming_both(daemon: Daemon) -> None:
    plain = daemon.cli("turns", "--last", "5", "--limit", "5")
    assert plain.returncode == 2 and plain.stdout == ""
    assert _lines(plain.stderr) == ["enact: --last and --limit cannot be used together: give one of them"]
    as_json = daemon.cli("turns", "--limit", "5", "--last", "5", "--json")
    assert as_json.returncode == 2
    assert _json(as_json) == {"status": "bad_input",
                              "error": "--last and --limit cannot be used together: give one of them"}
    # Either alone is fine, and so is --last with the default --limit.
    assert daemon.cli("turns", "--last", "5").returncode == 0
    assert daemon.cli("turns", "--limit", "5").returncode == 0


def test_turns_with_nothing_to_show_says_so(daemons: DaemonFactory) -> None:
    daemon = daemons.start(chat_home(daemons))
    empty = daemon.cli("turns")
    assert empty.returncode == 0
    assert _lines(empty.stdout) == ["no turns (none is logged yet)"]
    _send_all(daemon, ["hello"])
    after = daemon.cli("turns", "--since", "1")
    assert _lines(after.stdout) == ["no turns after cursor 1 (`enact turns --last 10` shows the newest of all)"]
    assert daemon.cli_json("turns", "--json", "--conversation", "nobody") == []


# -- enact daemon start --------------------------------------------------------


def test_daemon_start_on_a_running_home_is_one_line_exit_2_without_old_log_lines(daemon: Daemon) -> None:
    (daemon.home / LOG_NAME).write_text("an old line from an earlier start\n")
    result = daemon.cli("daemon", "start", "--metrics-addr", "127.0.0.1:0", timeout=60)
    assert result.returncode == 2, result
    assert _lines(result.stdout + result.stderr) == [
        f"enact is already running on this home (pid {daemon.pid}, generation 1); "
        "`enact daemon start --takeover` replaces it"
    ]


def test_daemon_start_whose_daemon_refuses_exits_2_with_only_its_own_lines(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    (home / LOG_NAME).write_text("an old line from an earlier start\n")
    (home / "config.toml").write_text("[daemon]\nworkers = 65\n")
    result = run_cli(home, "daemon", "start", "--metrics-addr", "127.0.0.1:0", timeout=60)
    assert result.returncode == 2, result
    [line] = _lines(result.stdout + result.stderr)
    assert "daemon.workers" in line and "old line" not in line


# -- enact call --list ---------------------------------------------------------


def test_call_list_names_the_request_types_and_their_fields(daemons: DaemonFactory) -> None:
    home = daemons.new_home()  # no daemon needed
    plain = run_cli(home, "call", "--list")
    assert plain.returncode == 0, plain
    lines = [line.strip() for line in _lines(plain.stdout)]
    assert "epoch.RequireCurrent {}" not in lines  # the daemon's own plumbing: listed with --all
    everything = _lines(run_cli(home, "call", "--list", "--all").stdout)
    assert "epoch.RequireCurrent {}" in [line.strip() for line in everything]
    assert any(line.startswith("inbox.ReadTurns {") and "last: int = 0" in line for line in lines)
    assert not any(line.startswith(("inbox.Outcome", "inbox.HandleEvent")) for line in lines)  # replies, internals
    listed = _json(run_cli(home, "call", "--list", "--json"))
    by_type = {entry["type"]: entry for entry in listed}
    send_fields = {f["name"]: f for f in by_type["local.Send"]["fields"]}
    assert send_fields["text"] == {"name": "text", "type": "str", "required": True}
    assert send_fields["conversation"]["default"] == "cli"
    assert "origin" not in send_fields  # the daemon sets it
    missing = run_cli(home, "call")
    assert missing.returncode == 2
    assert "--list" in _lines(missing.stderr)[0]


# -- --home before the subcommand ----------------------------------------------


def test_home_before_the_subcommand_reaches_the_daemon(daemons: DaemonFactory, daemon: Daemon) -> None:
    elsewhere = daemons.new_home()
    for args in (("status", "--json"), ("daemon", "status", "--json")):
        report = _json(run_cli(elsewhere, "--home", str(daemon.home), *args))
        assert report["pid"] == daemon.pid
    help_text = run_cli(elsewhere, "--help").stdout
    assert "--home" in help_text and "ENACT_HOME" in help_text


def test_the_subcommands_home_wins_over_the_one_before_it(daemons: DaemonFactory, daemon: Daemon) -> None:
    elsewhere = daemons.new_home()
    chosen = _json(run_cli(elsewhere, "--home", str(elsewhere), "status", "--json", "--home", str(daemon.home)))
    assert chosen["pid"] == daemon.pid
    refused = run_cli(daemon.home, "--home", str(daemon.home), "status", "--home", str(elsewhere))
    assert refused.returncode == 3
    assert refused.stderr.strip() == f"enact is not running (home: {elsewhere}); start it with `enact daemon start`"
