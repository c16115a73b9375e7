"""The command server: a command handed to the daemon's warm process runs
there exactly as it would in its own process, and the hand-off gives way to
the command's own process whenever the server cannot take it."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from task_repos import make_repo

from enact.cli._handoff import DISABLE_VARIABLE, HANDOFF_VERSION, SKEW, STALE, encode_request, package_directory
from enact.cli._server import Server, _Request
from enact.home import CLI_SOCKET_NAME

from conftest import enact_env, run_cli, wait_for


def _poisoned_click(tmp_path: Path) -> dict[str, str]:
    """An environment whose own interpreter cannot import click: a command
    that still works there ran in the command server."""
    poison = tmp_path / "poison"
    (poison / "click").mkdir(parents=True, exist_ok=True)
    (poison / "click" / "__init__.py").write_text("raise ImportError('click is poisoned in this process')\n")
    return {"PYTHONPATH": str(poison)}


def _serving(home: Path) -> bool:
    return (home / CLI_SOCKET_NAME).exists()


SERVED = {"ENACT_DAEMON_COMMAND_SERVER": "true"}


@pytest.fixture(scope="module")
def served(module_daemons):  # type: ignore[no-untyped-def]
    """One serving daemon for the module: its tests each add turns or an
    identity, and none reads what another wrote."""
    daemon = module_daemons.start(env=SERVED)
    wait_for(lambda: _serving(daemon.home), what="the command server to listen")
    return daemon


def test_a_command_runs_in_the_command_server_without_importing_click_in_its_own_process(served, tmp_path):
    poisoned = _poisoned_click(tmp_path)
    result = run_cli(served.home, "send", "hello there", env=poisoned)
    assert result.returncode == 0, result.stderr
    assert "hello there" in result.stdout
    alone = run_cli(served.home, "send", "hello", env={**poisoned, DISABLE_VARIABLE: "off"})
    assert alone.returncode != 0
    assert "click is poisoned" in alone.stderr


def test_output_and_exit_codes_are_those_of_the_command_in_its_own_process(served):
    for args in (["turns", "--json"], ["bogus"], ["send"], ["memory", "show", "f-missing", "--json"],
                 ["turns", "--limit", "0"], ["--help"]):
        here = run_cli(served.home, *args, env={DISABLE_VARIABLE: "off"})
        there = run_cli(served.home, *args)
        assert (there.returncode, there.stdout, there.stderr) == (here.returncode, here.stdout, here.stderr), args


def test_the_command_gets_the_clients_directory_and_environment(served, tmp_path):
    (tmp_path / "me.toml").write_text('name = "Ada"\npronouns = "she/her"\n')
    installed = subprocess.run([sys.executable, "-m", "enact", "identity", "install", "me.toml", "--json"],
                               cwd=tmp_path, env=enact_env(served.home, _poisoned_click(tmp_path)),
                               capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    shown = run_cli(served.home, "identity", "show", "--json", env=_poisoned_click(tmp_path))
    assert '"Ada"' in shown.stdout
    # The client's environment names another home; its --home wins there as here.
    other = served.home.parent / "elsewhere"
    named = run_cli(other, "status", "--home", str(served.home), "--json", env=_poisoned_click(tmp_path))
    assert named.returncode == 0, named.stderr
    assert f'"pid": {served.pid}' in named.stdout


def test_a_signal_to_the_client_reaches_the_command(daemons, tmp_path):
    daemon = daemons.start(env={**SERVED, "ENACT_DAEMON_WORKERS": "0"})
    wait_for(lambda: _serving(daemon.home), what="the command server to listen")
    repo = make_repo(tmp_path / "repo")
    added = run_cli(daemon.home, "task", "add", "change something", "--repo", str(repo), "--json")
    assert added.returncode == 0, added.stdout + added.stderr
    # No worker: the task stays queued and `task watch` follows it until stopped.
    watch = subprocess.Popen([sys.executable, "-m", "enact", "task", "watch", "1"],
                             env=enact_env(daemon.home, _poisoned_click(tmp_path)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().startswith("task 1 ")  # its first progress line: it is watching
        assert watch.poll() is None
        watch.send_signal(signal.SIGINT)
        _, errors = watch.communicate(timeout=20)
    finally:
        watch.kill()
    assert watch.returncode == 1
    assert "Aborted!" in errors


def test_the_server_ends_with_its_daemon_and_commands_then_run_alone(daemons):
    daemon = daemons.start(env=SERVED)
    wait_for(lambda: _serving(daemon.home), what="the command server to listen")
    assert stat.S_IMODE(os.stat(daemon.home / CLI_SOCKET_NAME).st_mode) == 0o600
    daemon.kill9()
    wait_for(lambda: not _serving(daemon.home) or _refuses_connections(daemon.home), timeout=10,
             what="the command server to end with its daemon")
    result = run_cli(daemon.home, "status", "--json")
    assert result.returncode == 3
    assert '"not_running"' in result.stdout


def _refuses_connections(home: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(str(home / CLI_SOCKET_NAME))
    except OSError:
        return True
    finally:
        probe.close()
    return False


def _command_server_of(daemon_pid: int) -> int:
    """The pid of the command server ``daemon_pid`` started."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat_line[stat_line.rfind(")") + 2:].split()[1])
        if parent == daemon_pid and b"enact.cli._server" in argv:
            return int(entry.name)
    raise AssertionError(f"daemon {daemon_pid} runs no command server")


def _gone(pid: int) -> bool:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat_line[stat_line.rfind(")") + 2] == "Z"


def test_a_takeover_leaves_the_new_daemons_server_listening(daemons):
    first = daemons.start(env=SERVED)
    wait_for(lambda: _serving(first.home), what="the first command server")
    old_server = _command_server_of(first.pid)
    second = daemons.start(first.home, "--takeover", env=SERVED)
    wait_for(lambda: first.process.poll() is not None, what="the old daemon to go")
    # the old daemon's server ending must not take the new one's socket with it
    wait_for(lambda: _gone(old_server), what="the old daemon's command server to end")
    wait_for(lambda: _serving(second.home) and not _refuses_connections(second.home),
             what="the new daemon's command server")
    result = run_cli(second.home, "status", "--json")
    assert result.returncode == 0
    assert f'"pid": {second.pid}' in result.stdout


def test_a_hand_off_that_is_not_one_is_dropped_and_the_server_keeps_serving(served, tmp_path):
    for garbage in (b"", b"\x00\x00\x00\x05hello", b"not a hand-off at all"):
        probe = socket.socket(socket.AF_UNIX)
        probe.connect(str(served.home / CLI_SOCKET_NAME))
        probe.sendall(garbage)
        probe.shutdown(socket.SHUT_WR)
        try:
            answer = probe.recv(8)
        except ConnectionResetError:  # closed with the garbage unread
            answer = b""
        probe.close()
        assert answer == b""
    result = run_cli(served.home, "send", "still here", env=_poisoned_click(tmp_path))
    assert result.returncode == 0, result.stderr


def test_a_server_of_another_version_or_with_older_code_refuses(tmp_path):
    server = Server(tmp_path)
    request = _Request(encode_request(["status"]))
    assert server._refusal(request) is None
    assert request.argv == ["status"] and request.cwd == os.getcwd()
    other = _Request("\0".join([HANDOFF_VERSION, "0.0.1", package_directory(), "/", "22", "0"]).encode())
    assert server._refusal(other) == SKEW
    elsewhere = _Request("\0".join([HANDOFF_VERSION, server.version, "/elsewhere", "/", "22", "0"]).encode())
    assert server._refusal(elsewhere) == SKEW
    server.loaded_stamp -= 1  # a file of the package changed after the server loaded it
    assert server._refusal(request) == STALE
    with pytest.raises(ValueError):
        _Request(b"2\0whatever")
