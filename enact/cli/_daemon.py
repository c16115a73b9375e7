"""``enact daemon run|start|stop|status``."""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from enact.cli._client import (
    DaemonError,
    NoAnswer,
    NotRunning,
    UnexpectedReply,
    full_status,
    not_running_line,
    request,
)
from enact.cli._options import (
    EXIT_FAILED,
    EXIT_NOT_RUNNING,
    EXIT_USAGE,
    fail,
    home_option,
    needs_daemon,
    print_json,
    resolve_home,
)
from enact.home import LOG_NAME

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 60.0


@click.group()
def daemon() -> None:
    """Run, start, stop or inspect the daemon."""


def _daemon_options(command: Any) -> Any:
    for option in reversed(
        [
            click.option("--metrics-addr", metavar="HOST:PORT", help="Prometheus endpoint (port 0: any free port)."),
            click.option("--workers", type=int, help="Task workers in the pool; 0: none in this daemon."),
            click.option("--takeover", is_flag=True, help="Fence the daemon that owns this home and replace it."),
            click.option("--force", is_flag=True, help="Run on a home moved to another host (enact home export "
                                                       "--move), without its Telegram channel."),
            click.option(
                "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log level."
            ),
        ]
    ):
        command = option(command)
    return home_option(command)


OPTION_KEYS = {"metrics_addr": "daemon.metrics_addr", "workers": "daemon.workers", "log_level": "daemon.log_level"}
"""The options of ``daemon run`` and ``daemon start`` that set a configuration
key (by parameter name): the command line wins over the file and the
environment."""


def _overrides(metrics_addr: str | None, workers: int | None, log_level: str | None) -> dict[str, Any]:
    given = {"metrics_addr": metrics_addr, "workers": workers, "log_level": log_level}
    return {OPTION_KEYS[name]: value for name, value in given.items()}


@daemon.command("run")
@_daemon_options
def run_command(
    home: Path | None, metrics_addr: str | None, workers: int | None, takeover: bool, force: bool,
    log_level: str | None
) -> None:
    """Run the daemon in the foreground."""
    # The start creates some hundred thousand objects that live as long as
    # the daemon (modules, message classes, actors) and little garbage: the
    # collector's passes over them cost a tenth of the start's CPU and free
    # almost nothing. The daemon collects once, freezes what is left and
    # turns the collector back on when it is ready (``enact.daemon``).
    gc.disable()
    from enact.cli._server import CommandServer
    from enact.daemon import run
    from enact.process import exit_process

    exit_process(run(resolve_home(home), overrides=_overrides(metrics_addr, workers, log_level), takeover=takeover,
                     force=force, command_server=CommandServer))


@daemon.command("start")
@_daemon_options
def start_command(
    home: Path | None, metrics_addr: str | None, workers: int | None, takeover: bool, force: bool,
    log_level: str | None
) -> None:
    """Start the daemon in the background; returns once it answers.

    Exits 2 if the home already has a daemon (without --takeover) or the
    daemon refuses to start; its one-line reason is printed."""
    import subprocess

    from enact.home_guard import HomeRefused, check_home
    from enact.messages.control import Status, StatusReport

    root = resolve_home(home)
    try:
        check_home(root)  # before anything is written there, even the log
    except HomeRefused as error:
        fail(str(error), as_json=False, code=EXIT_USAGE)
    if not takeover:
        running = _running(root)
        if running is not None:
            fail(f"enact is already running on this home (pid {running.pid}, generation {running.generation}); "
                 "`enact daemon start --takeover` replaces it",
                 as_json=False, code=EXIT_USAGE, prefix="")
    arguments = [sys.executable, "-m", "enact", "daemon", "run", "--home", str(root)]
    for flag, value in (("--metrics-addr", metrics_addr), ("--workers", workers), ("--log-level", log_level)):
        if value is not None:
            arguments += [flag, str(value)]
    if takeover:
        arguments.append("--takeover")
    if force:
        arguments.append("--force")
    log_path = root / LOG_NAME
    with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log_file:
        # Only what this start writes is shown if it fails, never older lines.
        log_start = log_file.tell()
        process = subprocess.Popen(
            arguments, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, start_new_session=True
        )
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            written = _written_since(log_path, log_start)
            if code == EXIT_USAGE and written:
                # A refusal: the daemon's own one-line reason says it all.
                click.echo("\n".join(written[-5:]), err=True)
            else:
                click.echo(f"enact: the daemon exited with status {code} while starting; see {log_path}", err=True)
                if written:
                    click.echo("\n".join(written[-5:]), err=True)
            sys.exit(code if code > 0 else EXIT_FAILED)
        try:
            report = request(root, Status(brief=True), timeout=2.0)
        except (NotRunning, DaemonError, OSError):
            time.sleep(0.05)
            continue
        if isinstance(report, StatusReport) and report.pid == process.pid:
            click.echo(process.pid)
            return
        time.sleep(0.05)
    click.echo(f"enact: the daemon did not answer within {_START_TIMEOUT_S:g} s; see {log_path}", err=True)
    sys.exit(EXIT_FAILED)


def _running(root: Path) -> Any:
    """The status report of a daemon answering on ``root``, or None."""
    try:
        return full_status(root, timeout=5.0)
    except (NotRunning, DaemonError, UnexpectedReply):
        return None


def _written_since(path: Path, offset: int) -> list[str]:
    try:
        with open(path, "rb") as log_file:
            log_file.seek(offset)
            return log_file.read().decode(errors="replace").splitlines()
    except OSError:
        return []


@daemon.command("stop")
@home_option
@needs_daemon
def stop_command(home: Path | None) -> None:
    """Stop the daemon gracefully and wait until it has exited."""
    from enact.messages.control import Shutdown

    root = resolve_home(home)
    message = Shutdown()
    reply = request(root, message)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _alive(reply.pid):
            click.echo(f"stopped (pid {reply.pid})")
            return
        time.sleep(0.05)
    click.echo(f"enact: pid {reply.pid} is still running after {_STOP_TIMEOUT_S:g} s", err=True)
    sys.exit(EXIT_FAILED)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A child of ours that exited stays a zombie until reaped; that is gone.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


@daemon.command("status")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_command(home: Path | None, as_json: bool) -> None:
    """Say whether the daemon runs (exit 0) or not (exit 3)."""
    root = resolve_home(home)
    try:
        report = full_status(root, timeout=5.0)
    except UnexpectedReply as error:
        fail(str(error), as_json=as_json)
    except NoAnswer as error:
        # A process holds the socket but does not answer: running, not well.
        if as_json:
            print_json({"running": True, "answering": False, "home": str(root)})
        else:
            click.echo(f"enact: {error}", err=True)
        sys.exit(EXIT_FAILED)
    except (NotRunning, DaemonError):
        if as_json:
            print_json({"running": False, "home": str(root)})
        else:
            click.echo(not_running_line(root))
        sys.exit(EXIT_NOT_RUNNING)
    if as_json:
        print_json({"running": True, "pid": report.pid, "generation": report.generation, "home": report.home})
    else:
        click.echo(f"running: pid {report.pid}, generation {report.generation}, up {report.uptime_s:.0f} s")
