"""The daemon's threads on one CPU, batch-scheduled; the programs it starts
ordinary processes (enact.one_cpu, ``daemon.one_cpu``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from enact import one_cpu

from conftest import DaemonFactory, wait_for

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: there is nothing to pin")

EVERY_CPU = os.sched_getaffinity(0)
WHERE = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)), os.sched_getscheduler(0))"]
"""A program that says which CPUs it may use and its scheduling policy."""


def _in_a_thread(work: Callable[[], Any]) -> Any:
    """``work``'s result, run in a thread of its own: pinning is per thread,
    and the test process's own threads must stay as they are."""
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as error:
            errors.append(error)
        finally:
            one_cpu.unpin_threads()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


def _where() -> tuple[set[int], int]:
    return os.sched_getaffinity(0), os.sched_getscheduler(0)


def test_a_pinned_thread_and_the_threads_it_starts_share_one_cpu_batch_scheduled() -> None:
    def pinned() -> tuple[int | None, tuple[set[int], int], tuple[set[int], int]]:
        cpu = one_cpu.pin_threads()
        started: list[tuple[set[int], int]] = []
        child = threading.Thread(target=lambda: started.append(_where()))
        child.start()
        child.join()
        return cpu, _where(), started[0]

    cpu, own, started = _in_a_thread(pinned)
    assert cpu in EVERY_CPU
    assert own == started == ({cpu}, os.SCHED_BATCH)
    assert _where() == (EVERY_CPU, os.SCHED_OTHER)  # the test's own thread never was


def test_a_program_started_unpinned_gets_every_cpu_and_the_ordinary_policy() -> None:
    def start() -> tuple[str, tuple[set[int], int], tuple[set[int], int]]:
        cpu = one_cpu.pin_threads()
        pinned = _where()
        with one_cpu.unpinned():
            said = subprocess.run(WHERE, capture_output=True, text=True, check=True).stdout.strip()
        assert cpu is not None
        return said, pinned, _where()

    said, before, after = _in_a_thread(start)
    assert said == f"{sorted(EVERY_CPU)} {os.SCHED_OTHER}"
    assert before == after  # pinned again once the program started
    assert len(after[0]) == 1 and after[1] == os.SCHED_BATCH


def test_unpinned_changes_nothing_in_a_process_that_never_pinned() -> None:
    with one_cpu.unpinned():
        assert _where() == (EVERY_CPU, os.SCHED_OTHER)
    assert _where() == (EVERY_CPU, os.SCHED_OTHER)


def test_a_system_that_refuses_the_policy_leaves_the_threads_to_the_kernel(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def refused(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refused)  # as a sandbox's seccomp filter may

    def pin() -> tuple[int | None, tuple[set[int], int]]:
        return one_cpu.pin_threads(), _where()

    cpu, where = _in_a_thread(pin)
    assert cpu is None
    assert where == (EVERY_CPU, os.SCHED_OTHER)
    assert "left to the kernel: [Errno 1] Operation not permitted" in caplog.text


def _threads_of(pid: int) -> dict[int, tuple[set[int], int]]:
    placed: dict[int, tuple[set[int], int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            placed[int(task.name)] = (os.sched_getaffinity(int(task.name)), os.sched_getscheduler(int(task.name)))
        except ProcessLookupError:
            continue  # a thread that ended meanwhile
    return placed


def test_the_daemons_threads_share_one_cpu_and_the_programs_it_runs_use_every_cpu(
        daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    (home / "commands.toml").write_text(textwrap.dedent(f"""
        [[command]]
        name = "where"
        summary = "which CPUs a program the daemon starts may use"
        run = {orjson.dumps(WHERE).decode()}
        """))
    daemon = daemons.start(home)
    threads = _threads_of(daemon.pid)
    assert len(threads) > 5  # the actors' and the servers' threads, not only the main one
    cpus = {frozenset(cpus) for cpus, _ in threads.values()}
    assert len(cpus) == 1 and len(next(iter(cpus))) == 1, threads
    # Batch-scheduled, unless other processes (a busy test run's) took a
    # quarter of its CPU since it started, which its log then says.
    shared = "its threads are scheduled as usual" in daemon.log_text()
    assert {policy for _, policy in threads.values()} <= {os.SCHED_BATCH, os.SCHED_OTHER if shared else -1}

    result = daemon.cli("call", "commands.Run", '{"name": "where"}')
    receipt = orjson.loads(result.stdout)["body"]
    assert receipt["ok"], receipt
    assert receipt["text"] == f"{sorted(EVERY_CPU)} {os.SCHED_OTHER}"


def test_a_daemon_with_one_cpu_off_leaves_its_threads_to_the_kernel(daemons: DaemonFactory) -> None:
    daemon = daemons.start(env={"ENACT_DAEMON_ONE_CPU": "false"})
    threads = _threads_of(daemon.pid)
    assert len(threads) > 5
    assert all(placed == (EVERY_CPU, os.SCHED_OTHER) for placed in threads.values()), threads


BUSY_LOOP = 0.002
"""A woken thread's wait behind a busy process's slice, in seconds."""
OWN_QUEUE = 0.00005
"""Its wait behind the daemon's own threads, or a client that answers at once."""


@pytest.mark.parametrize(("policy", "share", "wait_s", "then"), [
    (os.SCHED_BATCH, 0.0, OWN_QUEUE, os.SCHED_BATCH),
    (os.SCHED_BATCH, 0.24, BUSY_LOOP, os.SCHED_BATCH),
    (os.SCHED_BATCH, 0.6, OWN_QUEUE, os.SCHED_BATCH),  # busy clients that answer at once: batch pays
    (os.SCHED_BATCH, 0.25, BUSY_LOOP, os.SCHED_OTHER),
    (os.SCHED_BATCH, 0.9, None, os.SCHED_BATCH),  # the waits not read yet: the next look reads them
    (os.SCHED_OTHER, 0.5, OWN_QUEUE, os.SCHED_OTHER),
    (os.SCHED_OTHER, 0.10, OWN_QUEUE, os.SCHED_OTHER),  # the margin: not back at the first dip
    (os.SCHED_OTHER, 0.09, OWN_QUEUE, os.SCHED_BATCH),
])
def test_batch_is_left_while_others_hold_the_cpu_for_long_and_taken_up_again_once_they_use_little(
        policy: int, share: float, wait_s: float | None, then: int) -> None:
    assert one_cpu.next_policy(policy, one_cpu.Look(others_share=share, wait_s=wait_s)) == then


def test_the_wait_of_a_look_counts_only_the_threads_there_at_both_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = [{"1": (100, 10), "2": (5_000_000, 1)},  # thread 2 ends before the next look,
                {"1": (300, 20), "3": (9_000_000, 1)}]  # thread 3 starts with a long life behind it
    monkeypatch.setattr(one_cpu.CpuWatch, "_read_waits", staticmethod(lambda: readings.pop(0)))
    watch = one_cpu.CpuWatch(0)
    assert watch.wait_s() is None  # the first reading
    assert watch.wait_s() == pytest.approx(20e-9)  # thread 1's 200 ns over its 10 runs


def _policies(pid: int) -> set[int]:
    return {policy for _, policy in _threads_of(pid).values()}


def test_a_daemon_sharing_its_cpu_with_a_busy_process_schedules_its_threads_as_usual(
        daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    (cpu,) = os.sched_getaffinity(daemon.pid)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(busy.pid, {cpu})  # on the daemon's CPU, as a task's tests may be
        wait_for(lambda: _policies(daemon.pid) == {os.SCHED_OTHER}, timeout=30,
                 what="the daemon's threads to be scheduled as usual")
    finally:
        busy.kill()
        busy.wait()
    assert "its threads are scheduled as usual" in daemon.log_text()
    assert os.sched_getaffinity(daemon.pid) == {cpu}  # still on its one CPU


LOOKS = """
import dataclasses, os, sys, threading
from enact import one_cpu

class Scripted:  # what each look sees of the CPU: others' share; a woken thread waits 2 ms
    def __init__(self, shares): self.shares = list(shares)
    def others_share(self): return self.shares.pop(0)
    def wait_s(self): return 0.002
    def forget_waits(self): pass

started = threading.Event()
one_cpu.pin_threads()
worker = threading.Thread(target=started.wait, daemon=True)
worker.start()
one_cpu._pinned = dataclasses.replace(one_cpu._pinned, watch=Scripted(float(share) for share in sys.argv[1:]))
for _ in sys.argv[1:]:
    one_cpu.check_contention()
    print(sorted({os.sched_getscheduler(int(task)) for task in os.listdir("/proc/self/task")}))
started.set()
"""


def test_the_threads_are_batch_scheduled_again_once_the_others_leave_their_cpu() -> None:
    """The looks' answers scripted (in a process of its own: its threads'
    policies change): every thread follows each change, with the margin."""
    looks = subprocess.run([sys.executable, "-c", LOOKS, "0.05", "0.5", "0.2", "0.1", "0.05"],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    batch, usual = f"[{os.SCHED_BATCH}]", f"[{os.SCHED_OTHER}]"
    assert looks[:5] == [batch, usual, usual, usual, batch]
