"""Typed-message ask through the supervisor's dispatch vs a bare pykka ask.

Both actors answer ``epoch.RequireCurrent`` with the same small reply. The
enact side goes the way every caller goes: ``Supervisor.ask(name, message)``
(addressing by name) into an ``EnactActor`` (counting, timing, handled
counts). Rounds alternate between the paths so drift hits all alike.

An ask is two thread hand-offs. With the threads free to use both cores the
time is mostly cross-core wake-ups, whose cost swings with scheduling (the
control row, a bare ask behind one extra function call, shows how much), so
the same asks are also timed with the process pinned to one core, where the
difference between the rows is the work enact adds.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka

from bench._table import Table, median, ratio, us
from enact import config
from enact.actors._base import ActorContext, EnactActor
from enact.actors.supervisor import ActorSlot, ActorSpec, Supervisor
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.messages.epoch import Current, RequireCurrent
from enact.metrics import Metrics
from enact.storage import Storage

TITLE = "2. Typed-message dispatch: Supervisor.ask vs bare pykka ask"
TARGET = 1.5
_NAME = "answering"
_MESSAGE: Any = RequireCurrent()
_REPLY = Current(generation=1)

Ask = Callable[[object], Any]


class _Answering(EnactActor):
    def handle(self, message: Any) -> Any:
        match message:
            case RequireCurrent():
                return _REPLY
        return super().handle(message)


class _Bare(pykka.ThreadingActor):
    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        match message:
            case RequireCurrent():
                return _REPLY
        raise TypeError(message)


def _seconds_per_call(call: Ask, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        call(_MESSAGE)
    return (time.perf_counter() - started) / count


@contextlib.contextmanager
def _pinned(cpus: set[int]) -> Iterator[None]:
    """Every thread of this process on ``cpus`` (affinity is per thread)."""
    before = os.sched_getaffinity(0)
    tasks = [int(tid) for tid in os.listdir("/proc/self/task")]

    def place(on: set[int]) -> None:
        for tid in tasks:
            with contextlib.suppress(ProcessLookupError):  # a thread that has ended since
                os.sched_setaffinity(tid, on)

    place(cpus)
    try:
        yield
    finally:
        place(before)


def _rounds(paths: dict[str, Ask], rounds: int, per_round: int) -> dict[str, float]:
    for ask in paths.values():
        _seconds_per_call(ask, per_round // 5)  # warm-up
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, ask in paths.items():
            samples[name].append(_seconds_per_call(ask, per_round))
    return {name: median(values) for name, values in samples.items()}


def _profile(call: Ask, count: int) -> list[str]:
    """Where one message's time goes inside the handler, by own time."""
    profile = cProfile.Profile()
    profile.runcall(_seconds_per_call, call, count)
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:8]
    return [f"  {tt / count * 1e6:6.2f} µs  {Path(file).name}:{line} {name}" for (file, line, name), (_, _, tt, _, _)
            in rows]


def run(quick: bool) -> Table:
    rounds, per_round = (3, 300) if quick else (15, 2000)
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    home = directory / "h"
    home.mkdir(mode=0o700)
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    settings = config.load(home, environ={})
    metrics = Metrics()
    supervisor = Supervisor(
        [ActorSpec(name=_NAME, actor=_Answering)],
        home=home,
        config=settings,
        metrics=metrics,
        storage=storage,
        fence=fence,
        on_fatal=lambda why: None,
    )
    bare = _Bare.start()
    try:
        supervisor.start()
        enact_ref = supervisor._current_ref(_NAME)
        paths: dict[str, Ask] = {
            "bare pykka ask (baseline)": bare.ask,
            "bare pykka ask via a wrapper (control)": lambda message: bare.ask(message),
            "ActorRef.ask into EnactActor": enact_ref.ask,
            "Supervisor.ask(name) into EnactActor (enact)": lambda message: supervisor.ask(_NAME, message, timeout=10),
        }
        handled_before = supervisor.statuses()[0].handled
        two_cores = _rounds(paths, rounds, per_round)
        with _pinned({min(os.sched_getaffinity(0))}):
            one_core = _rounds(paths, rounds, per_round)
        handled = supervisor.statuses()[0].handled - handled_before
        # Two enact paths, in both placements, each with its warm-up.
        expected = 2 * 2 * (rounds * per_round + per_round // 5)
        assert handled == expected, f"handled {handled} messages, expected {expected}"

        table = Table(TITLE, ["path", "1 core µs", "÷ bare", "2 cores µs", "÷ bare"])
        base_one, base_two = one_core["bare pykka ask (baseline)"], two_cores["bare pykka ask (baseline)"]
        for name in paths:
            table.add(name, us(one_core[name]), ratio(one_core[name] / base_one),
                      us(two_cores[name]), ratio(two_cores[name] / base_two))
        enact_name = list(paths)[-1]
        verdicts = []
        for where, figures, base in (("1 core", one_core, base_one), ("2 cores", two_cores, base_two)):
            overhead = figures[enact_name] / base
            verdicts.append("PASS" if overhead <= TARGET else "MISS")
            table.note(f"overhead on {where}: {ratio(overhead)} against a target of ≤ {TARGET}x: {verdicts[-1]}")
        table.note(f"median of {rounds} alternating rounds x {per_round:,} sequential asks from one thread; "
                   "on 2 cores the control row (no enact code) shows how far scheduling alone moves a figure")

        # The handler's own work, without the thread hand-off: one call in this thread.
        slot = ActorSlot(spec=ActorSpec(name=_NAME, actor=_Answering), family=_NAME)
        context = ActorContext(name=_NAME, home=home, config=settings, metrics=metrics, supervisor=supervisor,
                               fence=fence, store=None, slot=slot)
        in_thread = _Answering(context)
        count = per_round * 10
        table.note(
            f"CPU per message in the handler's thread: EnactActor.on_receive "
            f"{us(_seconds_per_call(in_thread.on_receive, count))} µs, bare on_receive "
            f"{us(_seconds_per_call(_Bare().on_receive, count))} µs; addressing by name "
            f"{us(_seconds_per_call(lambda _: supervisor._current_ref(_NAME), count))} µs"
        )
        if "MISS" in verdicts:
            table.note("cProfile of EnactActor.on_receive (per message, by own time; the profiler inflates each):")
            table.notes += _profile(in_thread.on_receive, count)
        return table
    finally:
        bare.stop()
        supervisor.stop(timeout=5)
        fence.release()
        storage.close()
        shutil.rmtree(directory, ignore_errors=True)
