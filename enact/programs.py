"""Programs the owner registers in ``<home>/commands.toml``, and how they run.

Each program runs in its own process group under a small ``sh`` wrapper that
is the group leader. Two things make sure a group never outlives the daemon:

- the wrapper gets ``PR_SET_PDEATHSIG`` (SIGTERM) before it executes
  (``enact.process.dying_with_parent``), exits at once if the daemon died
  before the signal was armed, and on SIGTERM kills its whole group
  (``kill -KILL 0``), so the program's own children die too, not only the
  direct child;
- each running group is recorded as ``<home>/run/programs/<pgid>`` holding the
  leader's start time (from ``/proc/<pid>/stat``); the next daemon start kills
  the groups whose leader is still the process that was recorded, never a
  recycled pid.

The parent-death signal fires when the *thread* that forked the child ends,
not the process. A program is started and waited for by the same thread
(``run_program`` is synchronous: the conversation actor's or the control
connection's), and that thread cannot end while it waits, so the signal
fires only when the daemon dies. Never start a program from a thread that
may end before the program does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson

from enact.cancellation import CancellationToken
from enact.commands import Authority, Command, CommandCall, CommandContext, CommandFailed, Handler, Param
from enact.config import DAY, Setting, between, checked
from enact.errors import EnactError
from enact.home_guard import HomeRefused, check_owned_file
from enact.one_cpu import unpinned
from enact.process import dying_with_parent, program_ended, program_started
from enact.tables import table_list

log = logging.getLogger(__name__)

RUN_DIR = Path("run") / "programs"
"""Records of running program groups, relative to the home."""

PARAM_TYPES: dict[str, type[Any] | tuple[type[Any], ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "list": list,
    "object": dict,
}

# The wrapper: a trapped SIGTERM (the parent-death signal) kills the group.
# A background job's standard input would be /dev/null, so it is passed on fd 3.
# It starts with a check that the daemon (whose pid is put in place of
# {daemon}) is still its parent.
_WRAPPER = '[ "$PPID" = {daemon} ] || exit 1; trap "kill -KILL 0" TERM; exec 3<&0; "$@" <&3 3<&- & wait $!'


class CommandsFileError(EnactError, ValueError):
    pass


PROGRAM_TIMEOUT = Setting("command.timeout_s", float, 60.0, "Timeout of one run of a commands.toml program",
                          between(0.1, DAY))
"""A ``[[command]]``'s ``timeout_s``: declared like a configuration key, so
that its range is checked (and documented) the way every setting's is."""


# -- commands.toml ----------------------------------------------------------


def load_program_commands(path: Path, *, run_dir: Path | None = None) -> list[Command]:
    """``[[command]]`` tables: ``name``, ``run`` (argv list), ``summary``,
    ``authority`` (default ``effect``), ``timeout_s`` (default 60), ``params``
    (``"free"``, the default, or a list of ``{name, type, required, doc}``).
    The arguments reach the program as one JSON object on its standard input."""
    if not path.exists():
        return []
    try:
        check_owned_file(path)  # its programs run as the daemon: read again on every change, checked each time
        text = path.read_text(encoding="utf-8")
    except HomeRefused as error:
        raise CommandsFileError(str(error)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise CommandsFileError(f"{path}: {error}") from None
    commands: list[Command] = []
    keys = frozenset({"name", "run", "summary", "authority", "timeout_s", "params"})
    for where, table in table_list(text, source=str(path), name="command", keys=keys, error=CommandsFileError):
        name, run = table.get("name"), table.get("run")
        if not isinstance(name, str) or not name.replace(".", "").replace("_", "").replace("-", "").isalnum():
            raise CommandsFileError(f"{where}: 'name' must be a word (letters, digits, . _ -)")
        where = f"{where} ({name})"
        if any(c.name == name for c in commands):
            raise CommandsFileError(f"{where}: the name {name!r} is used twice")
        if not isinstance(run, list) or not run or not all(isinstance(part, str) for part in run):
            raise CommandsFileError(f"{where}: 'run' must be a non-empty list of strings")
        try:
            authority = Authority(table.get("authority", "effect"))
        except ValueError:
            raise CommandsFileError(f"{where}: 'authority' must be public, read, effect or human") from None
        timeout, problem = checked(PROGRAM_TIMEOUT, table.get("timeout_s", PROGRAM_TIMEOUT.default))
        if problem:
            raise CommandsFileError(f"{where}: 'timeout_s' {problem}")
        params = _params(table.get("params", "free"), where)
        commands.append(
            Command(
                name=name,
                summary=str(table.get("summary", f"runs {run[0]}")),
                authority=authority,
                params=params or {},
                free=params is None,
                handler=_program_handler(list(run), float(timeout), run_dir),
            )
        )
    return commands


def _params(value: Any, where: str) -> dict[str, Param] | None:
    """None means free arguments."""
    if value == "free":
        return None
    if not isinstance(value, list):
        raise CommandsFileError(f"{where}: 'params' must be \"free\" or a list of {{name, type, required}} tables")
    params: dict[str, Param] = {}
    for index, spec in enumerate(value, start=1):
        at = f"{where}: params #{index}"
        if not isinstance(spec, dict):
            raise CommandsFileError(f"{at}: must be a table {{name, type, required, doc}}")
        extra = set(spec) - {"name", "type", "required", "doc"}
        if extra:
            raise CommandsFileError(f"{at}: unknown key {sorted(extra)[0]!r}")
        name = spec.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise CommandsFileError(f"{at}: 'name' must be a word (letters, digits, _)")
        if name in params:
            raise CommandsFileError(f"{at}: parameter {name!r} is declared twice")
        kind = spec.get("type")
        if kind not in PARAM_TYPES:
            raise CommandsFileError(f"{at} ({name}): 'type' must be one of {', '.join(PARAM_TYPES)}")
        required = spec.get("required", True)
        if not isinstance(required, bool):
            raise CommandsFileError(f"{at} ({name}): 'required' must be true or false")
        doc = spec.get("doc", "")
        if not isinstance(doc, str):
            raise CommandsFileError(f"{at} ({name}): 'doc' must be a string")
        params[name] = Param(type=PARAM_TYPES[kind], required=required, doc=doc, type_name=kind)
    return params


class ProgramSource:
    """``commands.toml``, read again when its stat stamp changes. A broken
    edit keeps the previous commands and logs why, once per edit."""

    def __init__(self, path: Path, *, run_dir: Path | None = None) -> None:
        self.path = path
        self.run_dir = run_dir
        self._stamp: tuple[int, int] | None = None

    def stamp(self) -> tuple[int, int] | None:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        return (info.st_mtime_ns, info.st_size)

    def load(self) -> tuple[tuple[int, int] | None, list[Command]]:
        """Raises CommandsFileError."""
        stamp = self.stamp()
        return stamp, load_program_commands(self.path, run_dir=self.run_dir)


# -- running a program ------------------------------------------------------


def _program_handler(argv: list[str], timeout_s: float, run_dir: Path | None) -> Handler:
    def run(call: CommandCall, _: CommandContext) -> str:
        return run_program(argv, orjson.dumps(call.args), timeout_s=timeout_s, cancel=call.cancel, run_dir=run_dir)

    return run


def run_program(
    argv: list[str],
    stdin: bytes,
    *,
    timeout_s: float,
    cancel: CancellationToken,
    run_dir: Path | None = None,
) -> str:
    """Run a program in its own process group, killing the group on timeout
    or cancellation; the group dies with the daemon (see the module doc)."""
    cancel.raise_if_cancelled()
    started = program_started(argv)
    command, preexec = dying_with_parent(["sh", "-c", _WRAPPER.format(daemon=os.getpid()), argv[0], *argv])
    with unpinned():
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
        )
    record = _record_group(run_dir, process.pid)
    killer = threading.Event()
    guard = threading.Lock()
    reaped = False

    def kill_group() -> None:
        # Only before the leader is reaped: after that its pid may be reused.
        with guard, contextlib.suppress(ProcessLookupError):
            if not reaped:
                os.killpg(process.pid, signal.SIGKILL)

    def on_cancel(_: str) -> None:
        killer.set()
        kill_group()

    cancel.on_cancel(on_cancel)
    try:
        try:
            output, _ = process.communicate(stdin, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group()
            process.communicate()
            program_ended(argv, started, f"timed out after {timeout_s:g} s")
            raise CommandFailed(f"{argv[0]} timed out after {timeout_s:g} s") from None
    finally:
        with guard:
            reaped = True
        if record is not None:
            record.unlink(missing_ok=True)
    if killer.is_set():
        program_ended(argv, started, "was cancelled")
        raise CommandFailed(f"{argv[0]} was cancelled: {cancel.reason}")
    program_ended(argv, started, process.returncode)
    text = output.decode(errors="replace").strip()
    if process.returncode != 0:
        raise CommandFailed(f"{argv[0]} exited with status {process.returncode}: {text}")
    return text or f"{argv[0]} finished"


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot): with the pid it
    names one process, so a recycled pid is told apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _record_group(run_dir: Path | None, pgid: int) -> Path | None:
    if run_dir is None:
        return None
    started = _start_time(pgid)
    if started is None:
        return None
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        record = run_dir / str(pgid)
        record.write_text(started)
    except OSError as error:
        log.warning("cannot record program group %d in %s: %s", pgid, run_dir, error)
        return None
    return record


def kill_leftover_programs(run_dir: Path) -> int:
    """At start: kill the program groups a previous daemon left running.
    Returns how many were killed."""
    if not run_dir.is_dir():
        return 0
    killed = 0
    for record in run_dir.iterdir():
        try:
            pgid, recorded = int(record.name), record.read_text().strip()
        except (OSError, ValueError):
            record.unlink(missing_ok=True)
            continue
        if recorded and _start_time(pgid) == recorded:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
                log.info("killed program group %d left running by a previous daemon", pgid)
        record.unlink(missing_ok=True)
    return killed


__all__ = [
    "PARAM_TYPES",
    "RUN_DIR",
    "CommandsFileError",
    "ProgramSource",
    "kill_leftover_programs",
    "load_program_commands",
    "run_program",
]
