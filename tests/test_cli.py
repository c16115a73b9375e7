"""The ``enact`` command line, run as its own process against real daemons."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from control_wire import LENGTH
from stand_in_daemon import stand_in_daemon

from enact import __version__
from enact.cli._client import NotRunning, request
from enact.home import LOG_NAME, SOCKET_NAME
from enact.messages.control import Status

from conftest import Daemon, DaemonFactory, enact_env, run_cli, wait_for

NEEDS_DAEMON: dict[str, tuple[str, ...]] = {
    "status": ("status",),
    "status-json": ("status", "--json"),
    "call": ("call", "epoch.RequireCurrent"),
    "daemon-stop": ("daemon", "stop"),
    "daemon-status": ("daemon", "status"),
    "send": ("send", "hello"),
    "turns": ("turns",),
}


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    """All the command printed, which must be exactly one line."""
    output = result.stdout + result.stderr
    lines = output.splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{output}"
    return lines[0]


def _says_not_running(result: subprocess.CompletedProcess[str], home: Path) -> None:
    """One line, and with --json that line is JSON on standard output."""
    line = _one_line(result)
    text = f"enact is not running (home: {home}); start it with `enact daemon start`"
    if "--json" in result.args:
        assert orjson.loads(result.stdout) == {"status": "not_running", "error": text}
    else:
        assert line == text


# -- no daemon -----------------------------------------------------------------


@pytest.mark.parametrize("args", list(NEEDS_DAEMON.values()), ids=list(NEEDS_DAEMON))
def test_without_a_daemon_commands_say_so_and_exit_3(daemons: DaemonFactory, args: tuple[str, ...]) -> None:
    home = daemons.new_home()
    result = run_cli(home, *args)
    assert result.returncode == 3, result
    _says_not_running(result, home)


@pytest.mark.parametrize("args", list(NEEDS_DAEMON.values()), ids=list(NEEDS_DAEMON))
def test_home_option_wins_over_enact_home_without_a_daemon(daemons: DaemonFactory, args: tuple[str, ...]) -> None:
    chosen, other = daemons.new_home(), daemons.new_home()
    # For send, every word from the first that is not one of its options is the text.
    where = 1 if args[0] == "send" else len(args)
    result = run_cli(other, *args[:where], "--home", str(chosen), *args[where:])
    assert result.returncode == 3, result
    _says_not_running(result, chosen)


def test_a_home_that_does_not_exist_is_not_running(daemons: DaemonFactory) -> None:
    home = daemons.new_home() / "never" / "made"
    result = run_cli(home, "status")
    assert result.returncode == 3
    assert _one_line(result) == f"enact is not running (home: {home}); start it with `enact daemon start`"


def test_a_stale_socket_file_is_not_running(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    daemon.kill9()
    assert (daemon.home / SOCKET_NAME).exists()  # kill -9 leaves it behind
    for args in NEEDS_DAEMON.values():
        result = run_cli(daemon.home, *args)
        assert result.returncode == 3, (args, result)
        _says_not_running(result, daemon.home)


def test_daemon_status_of_a_daemon_that_does_not_answer_says_so_in_one_line(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    os.kill(daemon.pid, signal.SIGSTOP)  # the socket accepts, nobody answers
    try:
        result = daemon.cli("daemon", "status", timeout=30)
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
    assert result.returncode == 1, result
    assert _one_line(result) == f"enact: the daemon did not answer within 5 s (home: {daemon.home})"
    assert daemon.cli("daemon", "status").returncode == 0


# -- enact call ----------------------------------------------------------------


@pytest.fixture(scope="module")
def daemon(module_daemons: DaemonFactory) -> Daemon:
    """One daemon for the tests that only ask it things (calls, status, bad
    input it must survive): none of them changes what another reads."""
    return module_daemons.start()


def test_call_prints_the_typed_reply_as_json(daemon: Daemon) -> None:
    result = daemon.cli("call", "epoch.RequireCurrent")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"type": "epoch.Current", "body": {"generation": 1}}
    described = daemon.cli_json("call", "epoch.Describe", "{}")
    assert described["type"] == "epoch.Owner"
    assert described["body"]["pid"] == daemon.pid
    assert described["body"]["generation"] == 1


def test_call_list_groups_requests_by_protocol_and_leaves_the_internal_ones_to_all(daemons: DaemonFactory) -> None:
    from enact.messages import Kind, registered

    home = daemons.new_home()  # --list reads the types, not the daemon
    internal = {r.name for r in registered() if r.kind is Kind.REQUEST and r.plumbing}
    assert {"journal.Plan", "accounting.Spend", "tasks.Claim", "tasks.Heartbeat"} <= internal  # declared, not listed
    listed = run_cli(home, "call", "--list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("accounting: The accounting protocol")
    assert "control: The control protocol: what the CLI asks of the daemon as a whole" in lines
    under_control = lines[lines.index("control: The control protocol: what the CLI asks of the daemon as a whole") + 1:]
    assert under_control[:3] == ["  control.GetConfig {}", "  control.Shutdown {}",
                                 "  control.Status {brief: bool = false}"]
    assert not any(name in listed.stdout for name in internal)
    assert lines[-1] == (f"{len(internal)} internal requests (the ones enact sends itself) not shown: "
                         "`enact call --list --all` lists them")
    everything = run_cli(home, "call", "--list", "--all").stdout.splitlines()
    split = everything.index("internal: the requests enact sends itself (the wire takes them, for tools and tests)")
    assert "  journal.Plan {request_id: str, index: int, command: str, args: dict[str, Any]}" in everything[split:]
    assert "  control.Status {brief: bool = false}" in everything[:split]
    as_json = orjson.loads(run_cli(home, "call", "--list", "--json").stdout)
    status = next(described for described in as_json if described["type"] == "control.Status")
    assert (status["protocol"], status["internal"]) == ("control", False)
    assert not internal & {described["type"] for described in as_json}
    all_json = orjson.loads(run_cli(home, "call", "--list", "--all", "--json").stdout)
    assert {described["type"] for described in all_json if described["internal"]} == internal


BAD_CALLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "unknown-type": (("call", "nope.Nothing"), ("unknown message type", "nope.Nothing")),
    "bad-json": (("call", "epoch.RequireCurrent", "{not json"), ("not valid JSON",)),
    "unknown-field": (("call", "epoch.RequireCurrent", '{"bogus": 1}'), ("bogus",)),
    "body-not-an-object": (("call", "epoch.RequireCurrent", "[1]"), ("expected an object",)),
    "wrong-field-type": (
        ("call", "epoch.Owner", '{"generation": "one", "pid": 1, "host": "h", "started_at": 0}'),
        ("generation",),
    ),
}


@pytest.mark.parametrize(("args", "phrases"), list(BAD_CALLS.values()), ids=list(BAD_CALLS))
def test_call_with_bad_input_exits_2_with_one_line(daemon: Daemon, args: tuple[str, ...],
                                                   phrases: tuple[str, ...]) -> None:
    result = daemon.cli(*args)
    assert result.returncode == 2, result
    line = _one_line(result)
    for phrase in phrases:
        assert phrase in line, line
    assert daemon.cli("daemon", "status").returncode == 0


def test_call_with_a_reply_type_fails_with_one_line(daemon: Daemon) -> None:
    result = daemon.cli("call", "control.ShuttingDown", '{"pid": 1}')
    assert result.returncode != 0
    assert "not a request" in _one_line(result)
    assert daemon.process.poll() is None


# -- enact status --------------------------------------------------------------


def test_status_json_has_the_documented_keys(daemon: Daemon) -> None:
    status = daemon.cli_json("status", "--json")
    assert {"version", "pid", "home", "generation", "uptime_s", "metrics_addr", "actor_names", "stopped", "restarts",
            "waiting", "spending", "channels", "budget", "tasks", "workers"} <= set(status)
    assert "storage" not in status and "actors" not in status  # only with --verbose
    assert status["version"] == __version__
    assert status["pid"] == daemon.pid
    assert status["home"] == str(daemon.home)
    assert status["generation"] == 1
    assert isinstance(status["uptime_s"], float | int) and status["uptime_s"] >= 0
    host, _, port = status["metrics_addr"].rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert "epoch" in status["actor_names"] and all(isinstance(name, str) for name in status["actor_names"])
    assert status["stopped"] == [] and status["restarts"] == {}
    assert status["runtime"] == "scripted"


def test_status_verbose_json_adds_each_actors_counts_and_the_storage(daemon: Daemon) -> None:
    status = daemon.cli_json("status", "--json", "--verbose")
    assert [actor["name"] for actor in status["actors"]] == status["actor_names"]
    for actor in status["actors"]:
        assert {"name", "alive", "mailbox", "handled", "restarts"} == set(actor), actor
        for key in ("mailbox", "handled", "restarts"):
            assert isinstance(actor[key], int) and actor[key] >= 0
    storage = status["storage"]
    assert 0 < storage["used_bytes"] <= storage["map_bytes"]
    assert {"database": "epoch", "version": 1} in storage["schemas"]


def test_status_counts_handled_messages(daemon: Daemon) -> None:
    for _ in range(3):
        assert daemon.cli("call", "epoch.RequireCurrent").returncode == 0
    epoch = next(a for a in daemon.cli_json("status", "--json", "-v")["actors"] if a["name"] == "epoch")
    assert epoch["handled"] >= 3
    assert epoch["restarts"] == 0


def test_status_text_shows_the_actors_in_a_line_and_their_table_with_verbose(daemon: Daemon) -> None:
    brief = daemon.cli("status").stdout
    actors = len(daemon.cli_json("status", "--json")["actor_names"])
    assert f"actors   {actors} of {actors} running\n" in brief and "runtime  scripted\n" in brief
    assert "mailbox" not in brief and "storage" not in brief and "schemas" not in brief
    verbose = daemon.cli("status", "--verbose").stdout
    assert "storage  " in verbose and "schemas  " in verbose
    assert [line.split()[:2] for line in verbose.splitlines() if line.startswith("epoch ")] == [["epoch", "yes"]]


def test_status_text_names_pid_generation_and_home(daemon: Daemon) -> None:
    result = daemon.cli("status")
    assert result.returncode == 0, result.stderr
    assert f"pid {daemon.pid}" in result.stdout
    assert "generation 1" in result.stdout
    assert str(daemon.home) in result.stdout


def test_home_option_and_enact_home_reach_a_running_daemon(daemons: DaemonFactory, daemon: Daemon) -> None:
    elsewhere = daemons.new_home()
    for args in (("status", "--json"), ("daemon", "status", "--json")):
        by_env = orjson.loads(run_cli(daemon.home, *args).stdout)
        by_option = orjson.loads(run_cli(elsewhere, *args[:-1], "--home", str(daemon.home), args[-1]).stdout)
        assert by_env["pid"] == by_option["pid"] == daemon.pid
    for via_env, extra in ((daemon.home, ()), (elsewhere, ("--home", str(daemon.home)))):
        result = run_cli(via_env, "call", *extra, "epoch.RequireCurrent")
        assert orjson.loads(result.stdout)["type"] == "epoch.Current", result.stderr


# -- enact daemon start|status|stop --------------------------------------------


@pytest.fixture
def detached() -> Iterator[list[int]]:
    """Pids of daemons started with `enact daemon start`: not our children,
    so the daemons fixture cannot reap them; kill leftovers at the end."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][:1] == "Z"  # a zombie has exited
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("use_option", [False, True], ids=["ENACT_HOME", "--home"])
def test_daemon_start_status_stop(daemons: DaemonFactory, detached: list[int], use_option: bool) -> None:
    home = daemons.new_home()
    env_home = daemons.new_home() if use_option else home
    home_args = ("--home", str(home)) if use_option else ()

    started = run_cli(env_home, "daemon", "start", *home_args, "--metrics-addr", "127.0.0.1:0", timeout=60)
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.strip())
    detached.append(pid)
    # It returned once the socket answers: no waiting needed here.
    status = run_cli(env_home, "daemon", "status", *home_args)
    assert status.returncode == 0, status
    assert f"pid {pid}" in _one_line(status)
    report = orjson.loads(run_cli(env_home, "status", *home_args, "--json").stdout)
    assert report["pid"] == pid and report["home"] == str(home)
    assert (home / LOG_NAME).exists()

    stopped = run_cli(env_home, "daemon", "stop", *home_args, timeout=60)
    assert stopped.returncode == 0, stopped
    assert _gone(pid), "daemon stop returned before the process had gone"
    assert not (home / SOCKET_NAME).exists()
    after = run_cli(env_home, "daemon", "status", *home_args)
    assert after.returncode == 3
    assert _one_line(after) == f"enact is not running (home: {home}); start it with `enact daemon start`"


def test_daemon_start_on_a_running_home_fails_with_the_reason_and_names_takeover(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    result = daemon.cli("daemon", "start", "--metrics-addr", "127.0.0.1:0", timeout=60)
    assert result.returncode == 2, result
    assert _one_line(result) == (f"enact is already running on this home (pid {daemon.pid}, generation 1); "
                                 "`enact daemon start --takeover` replaces it")
    assert daemon.cli_json("status", "--json")["pid"] == daemon.pid


def test_daemon_run_with_home_option(daemons: DaemonFactory) -> None:
    home, elsewhere = daemons.new_home(), daemons.new_home()
    daemon = daemons.start(elsewhere, "--home", str(home), wait=False)
    wait_for(lambda: (home / SOCKET_NAME).exists() or daemon.process.poll() is not None, what="the daemon's socket")
    assert daemon.process.poll() is None, daemon.log_text()
    wait_for(lambda: run_cli(home, "daemon", "status").returncode == 0, what="the daemon to answer")
    result = run_cli(home, "daemon", "status")
    assert f"pid {daemon.pid}" in result.stdout
    assert not (elsewhere / SOCKET_NAME).exists()
    assert daemon.terminate() == 0


# -- configuration -------------------------------------------------------------

BAD_CONFIGS: dict[str, tuple[str, str]] = {
    "unknown-key": ("[daemon]\nbogus = 1\n", "daemon.bogus"),
    "unknown-section": ("[nonsense]\nworkers = 1\n", "nonsense.workers"),
    "wrong-type": ('[daemon]\nworkers = "many"\n', "daemon.workers"),
    "out-of-range": ("[daemon]\nworkers = 65\n", "daemon.workers"),
    "bad-choice": ('[daemon]\nlog_level = "loud"\n', "daemon.log_level"),
    "bad-address": ('[daemon]\nmetrics_addr = "nowhere"\n', "daemon.metrics_addr"),
    "idle-timeout-too-small": ("[control]\nidle_timeout_s = 0\n", "control.idle_timeout_s"),
}


@pytest.mark.parametrize(("text", "key"), list(BAD_CONFIGS.values()), ids=list(BAD_CONFIGS))
def test_daemon_run_with_bad_config_exits_with_one_line_naming_the_key(
    daemons: DaemonFactory, text: str, key: str
) -> None:
    home = daemons.new_home()
    (home / "config.toml").write_text(text)
    result = run_cli(home, "daemon", "run", "--metrics-addr", "127.0.0.1:0", timeout=30)
    assert result.returncode != 0
    line = _one_line(result)
    assert key in line, line
    assert "config.toml" in line, line
    assert not (home / SOCKET_NAME).exists()


def test_daemon_run_with_a_bad_environment_variable_names_it(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    result = run_cli(home, "daemon", "run", env={"ENACT_DAEMON_WORKERS": "lots"}, timeout=30)
    assert result.returncode != 0
    line = _one_line(result)
    assert "daemon.workers" in line and "ENACT_DAEMON_WORKERS" in line, line


def test_a_mistyped_configuration_key_or_variable_suggests_the_nearest_one(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    (home / "config.toml").write_text("[daemon]\nworker = 1\n")
    in_file = run_cli(home, "config", "show")
    assert in_file.returncode == 2, in_file
    assert _one_line(in_file).endswith("'daemon.worker' in " + str(home / "config.toml")
                                       + "; did you mean 'daemon.workers'?")
    (home / "config.toml").unlink()
    in_environment = run_cli(home, "daemon", "run", env={"ENACT_DAEMON_WORKER": "1"}, timeout=30)
    assert in_environment.returncode == 2, in_environment
    assert _one_line(in_environment) == ("enact: unknown configuration variable ENACT_DAEMON_WORKER in the "
                                         "environment; did you mean ENACT_DAEMON_WORKERS?")


def test_a_mistyped_command_suggests_the_nearest_one(daemons: DaemonFactory) -> None:
    result = run_cli(daemons.new_home(), "stauts")
    assert result.returncode == 2, result
    assert result.stderr.splitlines()[-1] == "Error: No such command 'stauts'. Did you mean 'status'?"
    nothing_near = run_cli(daemons.new_home(), "xyzzy")
    assert nothing_near.stderr.splitlines()[-1] == "Error: No such command 'xyzzy'."


def test_python_dash_m_enact_is_the_same_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "enact", "--version"], capture_output=True, text=True, timeout=30,
        env=enact_env(Path("/nonexistent")),
    )
    assert result.returncode == 0
    assert __version__ in result.stdout


def test_a_daemon_that_hangs_up_inside_its_reply_counts_as_not_running(daemons: DaemonFactory) -> None:
    """The client side of a daemon dying mid-reply: a one-line NotRunning, not
    a traceback. (A stand-in peer on a real socket; it sends half a frame.)"""
    home = daemons.new_home()

    def half_answer(connection: socket.socket, _request: bytes) -> None:
        connection.sendall(LENGTH.pack(100) + b'{"type": "control.Sta')

    with stand_in_daemon(home, half_answer), pytest.raises(NotRunning):
        request(home, Status(), timeout=10)


def test_every_command_group_in_enact_cli_is_reachable_from_enact() -> None:
    """The top-level commands are loaded lazily from what the components
    declare (``Component.cli``): a command module whose group no component
    names would be unreachable."""
    import importlib
    import pkgutil

    import click

    import enact.cli
    from enact.cli._group import main

    context = click.Context(main)
    reachable = {id(main.get_command(context, name)) for name in main.list_commands(context)}
    subcommands: set[int] = set()
    top_level: dict[str, click.Command] = {}
    for module_info in pkgutil.iter_modules(enact.cli.__path__):
        module = importlib.import_module(f"enact.cli.{module_info.name}")
        for name, value in vars(module).items():
            if isinstance(value, click.Command) and getattr(value.callback, "__module__", "") == module.__name__:
                top_level[f"{module.__name__}:{name}"] = value
                if isinstance(value, click.Group):
                    subcommands |= {id(sub) for sub in value.commands.values()}
    unreachable = [target for target, command in top_level.items()
                   if id(command) not in reachable | subcommands | {id(main)}]
    assert unreachable == []


def test_daemon_status_sees_an_older_releases_daemon_that_refuses_the_brief_field(daemons: DaemonFactory) -> None:
    """``daemon status`` (and ``daemon start``'s check for a daemon already
    there) ask the status as every release takes it, with an empty body: a
    stand-in for a release from before ``Status.brief`` refuses any field."""
    from enact.messages import encode
    from enact.messages._framing import write_frame
    from enact.messages.control import StatusReport

    home = daemons.new_home()
    older = StatusReport(version="0.older", pid=4242, home=str(home), generation=7, uptime_s=12.0, metrics_addr="")
    asked: list[object] = []

    def answer_as_an_older_release(connection: socket.socket, request_frame: bytes) -> None:
        said = orjson.loads(request_frame)
        asked.append(said)
        if said.get("body"):
            reply = {"type": "control.Error", "body": {"message": "unknown field 'brief' for Status"}}
            write_frame(connection, orjson.dumps(reply))
        else:
            write_frame(connection, encode(older))

    with stand_in_daemon(home, answer_as_an_older_release):
        result = run_cli(home, "daemon", "status", "--json", timeout=30)
    assert asked == [{"type": "control.Status", "body": {}}]
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"running": True, "pid": 4242, "generation": 7, "home": str(home)}
