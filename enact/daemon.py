"""The daemon's plumbing: claim the home, start the actors, serve, stop.

Kept apart from the actors so that each actor stays a plain message handler
and this module is the only place that knows the start-up order.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from enact import components, config
from enact._app.channels import DaemonChannels
from enact._app.claim import claim_home
from enact._app.commands import daemon_commands, run_command
from enact._app.control import ControlServer, wait_s
from enact._app.migration import BackupBeforeMigrating, migrate_home, pre_migration_backup
from enact._app.reports import DaemonReports, tally_spend
from enact._app.revision import revision_now
from enact._app.stopping import EXIT_FATAL, EXIT_OK, EXIT_REFUSED, StopRequest, stopped_by_signals
from enact.actors.supervisor import Supervisor
from enact.backup.moved import moved_from
from enact.budget.gate import BudgetGate
from enact.budget.settings import BudgetSettings
from enact.chat.services import startup_context
from enact.chat.session_calls import SessionCalls
from enact.clock import REAL_CLOCK
from enact.command_journal import JournaledCommands
from enact.commands import CommandContext, CommandRegistry
from enact.components import ComponentError, Components, DaemonParts, WireHandler
from enact.config import DaemonSettings, RuntimeSettings
from enact.fence import AlreadyRunning, Fence
from enact.home import COMMANDS_NAME, CONFIG_NAME, STATE_DIR
from enact.home_guard import HomeRefused, check_home, check_owned_file, make_private
from enact.messages._registry import Request, registration_of
from enact.messages.channel import Channels
from enact.messages.channel import List as ListChannels
from enact.messages.commands import Catalog, ListCommands, Run
from enact.messages.control import GetConfig, Shutdown, ShuttingDown, Status
from enact.metrics import Metrics, MetricsServer, MetricsUnavailable
from enact.one_cpu import check_contention, pin_threads
from enact.process import configure_logging, main_pid, notify_systemd
from enact.programs import RUN_DIR as PROGRAMS_RUN_DIR
from enact.programs import CommandsFileError, kill_leftover_programs
from enact.runtime import Runtime, Usage
from enact.runtime.metered import MeteredRuntime
from enact.runtime.scripted import RulesError
from enact.storage import SchemaError, Storage, StorageError

__all__ = ["EXIT_FATAL", "EXIT_OK", "EXIT_REFUSED", "CommandServer", "run"]

log = logging.getLogger("enact.daemon")

R = TypeVar("R")

_HALT_S = 0.4
"""How long a fenced daemon gives its actors and metrics server to stop."""


class CommandServer(Protocol):
    """What runs CLI commands warm beside the daemon (the CLI's, ``enact.cli._server``):
    started once the actors are, stopped before them."""

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...


def run(home: Path, *, overrides: Mapping[str, Any] | None = None, takeover: bool = False, force: bool = False,
        command_server: Callable[[Path], CommandServer] | None = None,
        backup_before_migrating: BackupBeforeMigrating = pre_migration_backup) -> int:
    """Run the daemon in the foreground until stopped; returns the exit code.
    ``command_server`` makes the command server of the home, run unless
    ``daemon.command_server`` is off (the CLI hands its own: the daemon does
    not import the CLI). ``backup_before_migrating`` backs the home up when
    a database must be migrated to this enact's schema, before it is.
    A home moved to another host (``enact home export --move``) is refused
    unless ``force``; forced, it runs without the channels that host answers."""
    try:
        check_home(home)
        for name in (CONFIG_NAME, COMMANDS_NAME):
            check_owned_file(home / name)
    except HomeRefused as error:
        print(f"enact: {error}", file=sys.stderr)
        return EXIT_REFUSED
    moved = moved_from(home)
    if moved is not None and not force:
        print(f"enact: {moved.line(home)}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        installed = components.load()
        schemas = installed.schemas()
        settings = installed.load_config(home, overrides=overrides)
    except (ComponentError, config.ConfigError) as error:
        print(f"enact: {error}", file=sys.stderr)
        return EXIT_REFUSED
    daemon_settings = settings.typed(DaemonSettings)
    configure_logging(daemon_settings.log_level)
    if daemon_settings.one_cpu:
        pin_threads()  # before any other thread starts: each inherits it (enact.one_cpu)
    if moved is not None:
        log.warning("starting with --force on a moved home: %s", moved.line(home))
    try:
        installed.validate_environment(settings)
    except ComponentError as error:
        print(f"enact: {error}", file=sys.stderr)
        return EXIT_REFUSED
    make_private(home)  # only once the home and its files are accepted: refusing them changes nothing
    try:
        storage = Storage(home / STATE_DIR, map_size=daemon_settings.map_size_mb << 20, schemas=schemas)
    except (SchemaError, StorageError) as error:
        print(f"enact: {error}", file=sys.stderr)
        return EXIT_REFUSED
    from enact.tasks.confined_calls import build_runtime  # a feature's: imported when a daemon starts

    try:
        commands = daemon_commands(home, installed)
        runtime = build_runtime(installed, settings, commands)
    except (CommandsFileError, RulesError, ValueError) as error:
        print(f"enact: {error}", file=sys.stderr)
        storage.close()
        return EXIT_REFUSED
    fence = Fence(home, storage)
    metrics = Metrics()
    try:
        metrics_server = claim_home(fence, metrics, daemon_settings.metrics_addr, takeover=takeover,
                                    takeover_wait_s=daemon_settings.takeover_wait_s)
    except (AlreadyRunning, MetricsUnavailable) as error:
        print(f"enact: {error}" if isinstance(error, MetricsUnavailable) else str(error), file=sys.stderr)
        fence.release()
        storage.close()
        return EXIT_REFUSED
    if takeover:
        # Under systemd the daemon it fenced was the unit's main process and
        # is about to exit: the unit must track this one from now on, or it
        # counts the service as ended (deploy/systemd/enact.service lets any
        # process of the unit say so: NotifyAccess=all).
        notify_systemd(main_pid())
    try:  # only now: no other daemon writes to the home while it migrates
        migrate_home(home, storage, backup_before_migrating)
    except (SchemaError, OSError) as error:
        reason = error if isinstance(error, SchemaError) else f"cannot back up the home before migrating it: {error}"
        print(f"enact: {reason}", file=sys.stderr)
        metrics_server.stop()
        fence.release()
        storage.close()
        return EXIT_REFUSED
    kill_leftover_programs(home / PROGRAMS_RUN_DIR)  # only now: the home is ours
    try:
        daemon = _Daemon(home, settings, storage, fence, installed, commands, runtime, metrics, metrics_server,
                         command_server, moved=moved is not None)
    except ComponentError as error:  # a component's actor or request that is not its own
        print(f"enact: {error}", file=sys.stderr)
        metrics_server.stop()
        fence.release()
        storage.close()
        return EXIT_REFUSED
    return daemon.serve()


class _Daemon:
    def __init__(
        self,
        home: Path,
        settings: config.Config,
        storage: Storage,
        fence: Fence,
        installed: Components,
        commands: CommandRegistry,
        runtime: Runtime,
        metrics: Metrics,
        metrics_server: MetricsServer,
        command_server: Callable[[Path], CommandServer] | None,
        *,
        moved: bool = False,
    ) -> None:
        self.home = home
        self.settings = settings
        self.daemon_settings = settings.typed(DaemonSettings)
        runtime_settings = settings.typed(RuntimeSettings)
        self.storage = storage
        self.fence = fence
        started = time.monotonic()
        self.stop = StopRequest()
        self.metrics = metrics
        if fence.took_over:
            self.metrics.record_takeover()
        self.metrics.generation.set(fence.generation)
        self.commands = commands
        self.components = installed
        self.channels = DaemonChannels(installed, settings, moved=moved)
        self.metrics.initialise(adapters=(runtime.name,),
                                polling_channels=tuple(name for name in self.channels.channels if name != "local"))
        budget = BudgetGate(settings.typed(BudgetSettings), REAL_CLOCK)
        parts = DaemonParts(
            settings=settings,
            runtime=MeteredRuntime(runtime, self.metrics, on_spent=self._spent,
                                   allow_full_access=runtime_settings.allow_full_access, budget=budget),
            channels=dict(self.channels.channels),
            origins=dict(self.channels.origins),
            commands=commands,
            budget=budget,
        )
        installed.create_metrics(self.metrics.registry)
        actors = components.component_actors(installed, parts)
        self.supervisor = Supervisor(
            actors,
            home=home,
            config=settings,
            metrics=self.metrics,
            storage=storage,
            fence=fence,
            on_fatal=lambda why: self.stop.set(why, EXIT_FATAL),
        )
        self.reports = DaemonReports(home=home, settings=settings, storage=storage, fence=fence,
                                     supervisor=self.supervisor, channels=self.channels, budget=budget,
                                     metrics_addr=metrics_server.address, started=started,
                                     revision=revision_now())
        self.metrics.register_gauges(self.reports.scrape_gauges)
        self.metrics_server = metrics_server
        self.control = ControlServer(
            home,
            self.supervisor,
            self.metrics,
            idle_timeout_s=self.daemon_settings.idle_timeout_s,
            request_timeout_s=self.daemon_settings.request_timeout_s,
            setting=settings.get,
        )
        self.command_server = (command_server(home)
                               if command_server is not None and self.daemon_settings.command_server else None)
        self.journaled_commands = JournaledCommands(commands, self._ask)
        for message_type, handler in components.routes(self._wire_servers()).items():
            self.control.serve_locally(message_type, handler)
        self.control.serve_frames(Status, lambda message: self.reports.status_frame(brief=message.brief))
        self.services = [service for component in installed.items
                         for service in component.services(settings, self.control.dispatch)]
        # Calls on a conversation's session from a command (a task's brief),
        # made as the conversation's own turns make them.
        sessions = SessionCalls(parts.runtime, ask=self._ask, tell=self.supervisor.tell,
                                startup_context=startup_context(commands),
                                prompt_version=runtime_settings.prompt_version,
                                timeout_s=runtime_settings.timeout_s, token=fence.token, metrics=self.metrics)
        commands.bind(CommandContext(fence=fence, status=self.reports.status_line, ask=self._ask,
                                     converse=sessions.call,
                                     agentic=runtime.capabilities.agentic))

    def _wire_servers(self) -> list[tuple[str, Mapping[type[Any], WireHandler]]]:
        """Who serves which prefix in the control connection's thread; any
        other request goes to the actor its prefix names."""
        commands = self.commands
        return [
            ("control", {Status: lambda message: self.reports.status(brief=message.brief),
                         Shutdown: self._shutdown_requested, GetConfig: lambda _: self.reports.config()}),
            ("channel", {ListChannels: lambda _: Channels(channels=self.channels.states())}),
            ("commands", {Run: lambda message: run_command(self.journaled_commands, self.fence, message),
                          ListCommands: lambda _: Catalog(commands=tuple(commands.catalog()))}),
            *((component.name, component.handlers(self.settings, self._ask)) for component in self.components.items),
        ]

    def _ask(self, actor: str, message: Request[R], /) -> R:
        """The daemon's own asks (commands, components, channels), with the
        control deadline (a long request's, as the control socket gives it)."""
        registration = registration_of(type(message))
        timeout = wait_s(registration.long_wait if registration else "", self.daemon_settings.request_timeout_s,
                         self.settings.get)
        return self.supervisor.ask(actor, message, timeout=timeout)

    def serve(self) -> int:
        with stopped_by_signals(self.stop):
            return self._serve()

    def _serve(self) -> int:
        try:
            self.supervisor.start()
            self.channels.start(self._ask, fence=self.fence, metrics=self.metrics)
            self.control.start()
            for service in self.services:
                service.start()
            if self.command_server is not None:
                self.command_server.start()
        except Exception as error:
            log.exception("start-up failed")
            print(f"enact: cannot start: {type(error).__name__}: {error}", file=sys.stderr)
            self._shut_down()
            return EXIT_FATAL
        self.fence.watch(lambda current: self.stop.set(f"taken over by generation {current}", fenced=True))
        # What start-up made (modules, classes, the actors) lives as long as
        # the daemon: kept out of the collector's oldest generation, whose
        # full passes over it otherwise stall whichever thread triggers one
        # (a control request's tail latency) for milliseconds.
        gc.collect()  # start-up's own garbage first: frozen, it would be kept for good
        gc.freeze()
        gc.enable()  # `enact daemon run` starts without it (its passes over start-up's objects free nothing)
        log.info("ready: control socket %s, metrics on %s", self.control.path, self.metrics_server.address)
        notify_systemd(b"READY=1\n" + main_pid())
        while not self.stop.event.wait(0.5):
            check_contention()  # batch scheduling only while the daemon has its CPU to itself
        log.info("stopping: %s", self.stop.reason)
        if not self.stop.fenced:  # a fenced daemon's service goes on, in the daemon that took over
            notify_systemd(b"STOPPING=1")
        self._shut_down()
        return self.stop.exit_code

    def _stop_command_server(self, wait_s: float = 2.0) -> None:
        """It stops listening at once; it ends by itself once the commands it
        runs have (a fenced daemon does not wait for that)."""
        if self.command_server is not None:
            self.command_server.stop(wait_s)

    def _stop_services(self, wait_s: float) -> None:
        """Before the control socket: a service reaches the actors through it."""
        for service in reversed(self.services):
            service.stop(wait_s)

    def _spent(self, purpose: str, usage: Usage) -> None:
        tally_spend(self.supervisor, purpose, usage)

    def _shutdown_requested(self, _: Shutdown) -> ShuttingDown:
        self.stop.set("asked to stop (enact daemon stop)")
        return ShuttingDown(pid=os.getpid())

    def _shut_down(self) -> None:
        if self.stop.fenced:
            self._halt()
            return
        timeout = self.daemon_settings.shutdown_timeout_s
        deadline = time.monotonic() + timeout
        self._stop_command_server()
        self._stop_services(2.0)
        self.control.stop(self.stop.reason)
        # Before the drain: an `enact send` still waiting is answered
        # "interrupted" at once (its event is durable) rather than cut off.
        self.channels.stop()
        self.control.drain(timeout)
        metrics_stopping = self._stop_metrics_server_meanwhile()
        self.supervisor.stop(max(0.0, deadline - time.monotonic()))
        metrics_stopping.join(max(0.0, deadline - time.monotonic()))
        self.fence.release()
        self.storage.close()
        log.info("stopped")

    def _stop_metrics_server_meanwhile(self) -> threading.Thread:
        """The HTTP server stops once a connection wakes it (or at its
        poll, seconds apart): overlapped with the actors' stop rather than
        added to it."""
        stopping = threading.Thread(target=self.metrics_server.stop, name="enact-metrics-stop", daemon=True)
        stopping.start()
        return stopping

    def _halt(self) -> None:
        """A fenced daemon has nothing left to finish: its writes are refused
        and its long calls cancelled (by the fence), so it lets go of what the
        new daemon needs and goes, without waiting for work that cannot land."""
        started = time.monotonic()
        metrics_stopping = self._stop_metrics_server_meanwhile()
        self._stop_command_server(wait_s=0.0)
        self._stop_services(0.0)
        self.control.stop(self.stop.reason)
        self.channels.stop()
        self.supervisor.halt(_HALT_S)
        metrics_stopping.join(_HALT_S)
        self.fence.release()
        # Storage stays open: an actor thread that has not stopped may still
        # be inside a read, and the process exit closes it as safely as a kill.
        log.info("stopped (fenced) after %.2f s", time.monotonic() - started)
