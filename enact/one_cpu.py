"""The daemon's threads on one CPU, batch-scheduled; the programs it starts
on every CPU, scheduled as usual.

CPython runs the Python of one thread at a time (the GIL), so the daemon's
threads cannot use a second CPU for Python. Left to the kernel they spread
over the CPUs anyway, and every hand-off between them (a message put in a
mailbox, a reply, the GIL itself) wakes a thread on another CPU: an
inter-processor interrupt (in a virtual machine, an exit to the hypervisor),
paid while the waker holds the GIL. On one CPU the woken thread preempts
its waker instead, only to find the GIL held and sleep again. Batch
scheduling (``SCHED_BATCH``: the same share of the CPU, no preemption on
wake-up) lets the waker run on until it blocks, and the woken thread then
finds the GIL free. Measured on the 2-core bench machine (row 4, eight
conversations, the actors in one process): a chat event took about 40
context switches and 0.4 ms of system CPU spread out as the kernel left
them; about 20 and 0.2 ms on one CPU (events/s 1.0 to 1.5 thousand); about
9 and 0.08 ms on one CPU batch-scheduled (events/s about 2.2 thousand).
Batch scheduling without the one CPU changed nothing. What the threads give
up is the overlap of work done outside the GIL on another CPU (the kernel's
side of an fsync, a large hash), and a woken batch thread waits for the
running process's turn to end rather than cutting in: nothing while the
kernel can move other processes to another CPU (one busy loop beside the
bench: still about 1.5 times the events/s), but with every CPU busy each
hand-off would wait a slice.

So ``daemon run`` pins its main thread before it starts any other (a thread
is created with its creator's CPUs and policy), and every place the daemon
starts a program starts it inside ``unpinned``, which gives the starting
thread every CPU and the ordinary policy for the moment of the start (a
process is created with its parent thread's): a runtime CLI, git, a task's
tests use the whole machine as any program does. ``daemon.one_cpu = false``
leaves the threads to the kernel.

Batch scheduling pays off only while the daemon has its CPU to itself. So
the daemon looks about once a second (``check_contention``, which its main
loop calls twice a second; a look covers at least ``_LOOK_TICKS``) at how
much of its CPU other processes used since the last look (``/proc/stat``'s
line for the CPU, less the daemon's own time) and at how long its woken
threads waited to run (each thread's ``schedstat``): when others use a
quarter or more and the threads waited half a millisecond or more on
average (the slices of a busy process: clients that answer at once use the
CPU without holding it), every thread of the daemon is scheduled as usual
again (still on the one CPU, where a woken thread cuts in as anywhere), and
once others use less than a tenth, batch again. Measured through the control socket with two busy
loops on 2 CPUs: 850 to 950 chat events/s with eight conversations against
500 to 540 with the threads left to the kernel, and one conversation 490 to 550
against 300 to 370 (batch kept throughout, as first built, had made it a half
to an eighth of the kernel's figures instead).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from enact.frozen_dataclass import dataclass

log = logging.getLogger(__name__)

_pinned: _Pinned | None = None
"""Where the daemon's threads are, once pinned."""
_policy = os.SCHED_OTHER
"""The pinned threads' policy now: batch, or the ordinary one while other processes use their CPU."""

SHARED_FROM = 0.25
"""Other processes' share of the daemon's CPU from which its threads are scheduled as usual."""
ALONE_BELOW = 0.10
"""Their share under which the threads are batch-scheduled again."""
WAITED_FROM_S = 0.0005
"""How long the daemon's woken threads waited for the CPU on average, from
which (with ``SHARED_FROM``) batch is left: the daemon's own threads queue
behind each other for tens of microseconds; a busy process's slice is
milliseconds."""
_LOOK_TICKS = 90
"""A look covers at least this many clock ticks of the CPU (about 0.9 s at the usual 100 a second)."""


def pin_threads() -> int | None:
    """Put the calling thread, and so every thread it starts from now on, on
    one CPU (the one it runs on; another the process may use if that is not
    known), batch-scheduled. Nothing changes where the process has a single
    CPU or the system has no per-thread affinity. Returns the CPU, or None."""
    global _pinned, _policy
    if not (hasattr(os, "sched_setaffinity") and hasattr(os, "SCHED_BATCH")):
        return None
    every = os.sched_getaffinity(0)
    if len(every) < 2:
        return None
    current = _current_cpu()
    cpu = current if current in every else max(every)
    try:
        os.sched_setaffinity(0, {cpu})
        _schedule(os.SCHED_BATCH)
    except OSError as error:  # a sandbox that forbids it: the threads stay where they were
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, every)
        log.warning("the daemon's threads are left to the kernel: %s", error)
        return None
    _pinned, _policy = _Pinned(cpu={cpu}, every=every, watch=CpuWatch(cpu)), os.SCHED_BATCH
    return cpu


def unpin_threads() -> None:
    """The calling thread back on every CPU it had, scheduled as usual
    (threads it started while pinned stay as they are): for a process that
    pinned for a while."""
    global _pinned, _policy
    if _pinned is not None:
        os.sched_setaffinity(0, _pinned.every)
        _schedule(os.SCHED_OTHER)
    _pinned, _policy = None, os.SCHED_OTHER


@contextlib.contextmanager
def unpinned() -> Iterator[None]:
    """The calling thread on every CPU, scheduled as usual, while the block
    runs: a program started in it is an ordinary process."""
    pinned = _pinned
    if pinned is None:
        yield
        return
    os.sched_setaffinity(0, pinned.every)
    _schedule(os.SCHED_OTHER)
    try:
        yield
    finally:
        os.sched_setaffinity(0, pinned.cpu)
        _schedule(_policy)


def check_contention() -> None:
    """Batch-schedule the daemon's threads, or not, by what the last look
    saw of their CPU (the daemon's main loop calls this); nothing when they
    are not pinned. The threads' waits are read (a file per thread, about
    a millisecond for forty) only while others' share could make batch go."""
    global _policy
    if _pinned is None:
        return
    watch = _pinned.watch
    share = watch.others_share()
    if share is None:
        return
    wait_s: float | None = None
    if _policy == os.SCHED_BATCH and share >= SHARED_FROM:
        wait_s = watch.wait_s()
    else:
        watch.forget_waits()
    look = Look(others_share=share, wait_s=wait_s)
    policy = next_policy(_policy, look)
    if policy == _policy:
        return
    _policy = policy  # first: a thread leaving ``unpinned`` meanwhile takes this one
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setscheduler(int(task), policy, os.sched_param(0))
    waited = f", a woken thread of its waited {wait_s * 1000:.2f} ms on average" if wait_s is not None else ""
    log.info("other processes use %.0f%% of the daemon's CPU%s: its threads are %s", share * 100, waited,
             "scheduled as usual" if policy == os.SCHED_OTHER else "batch-scheduled again")


@dataclass(frozen=True, slots=True)
class Look:
    """What one look saw of the daemon's CPU since the last."""

    others_share: float
    """The share of the CPU's time other processes used."""
    wait_s: float | None
    """How long a thread of the daemon waited for the CPU, on average, each
    time it was woken (None: not read, or only from this look on)."""


def next_policy(policy: int, look: Look) -> int:
    """The threads' policy after ``look``. Batch is left only when other
    processes both use a good share of the CPU and keep the daemon's woken
    threads waiting (a busy loop's slices; a client that answers at once
    does not), and taken up again once others use little of it."""
    waited = look.wait_s is not None and look.wait_s >= WAITED_FROM_S
    if policy == os.SCHED_BATCH and look.others_share >= SHARED_FROM and waited:
        return os.SCHED_OTHER
    if policy == os.SCHED_OTHER and look.others_share < ALONE_BELOW:
        return os.SCHED_BATCH
    return policy


class CpuWatch:
    """What other processes did to one CPU, and how long this process's
    threads waited for it, between two looks."""

    def __init__(self, cpu: int) -> None:
        self._cpu = cpu
        self._last = self._read_cpu()
        self._last_waits: dict[str, tuple[int, int]] | None = None

    def others_share(self) -> float | None:
        """Others' share of the CPU since the last look; None until a look
        covers ``_LOOK_TICKS`` (or the counters cannot be read)."""
        reading = self._read_cpu()
        if reading is None or self._last is None:
            self._last = reading
            return None
        busy, total, own = (now - then for now, then in zip(reading, self._last, strict=True))
        if total < _LOOK_TICKS:
            return None
        self._last = reading
        return max(0.0, (busy - own) / total)

    def wait_s(self) -> float | None:
        """The threads' average wait to run since the last call (None at the first)."""
        reading, last = self._read_waits(), self._last_waits
        self._last_waits = reading
        if reading is None or last is None:
            return None
        # Only the threads there both times: one that started or ended between
        # the looks would count a whole life's waits, or take them away.
        both = reading.keys() & last.keys()
        waited_ns = sum(reading[task][0] - last[task][0] for task in both)
        runs = sum(reading[task][1] - last[task][1] for task in both)
        return waited_ns / max(runs, 1) / 1e9

    def forget_waits(self) -> None:
        """Not read this time: the next ``wait_s`` starts afresh."""
        self._last_waits = None

    def _read_cpu(self) -> tuple[int, int, int] | None:
        """The CPU's busy and total clock ticks, and this process's own."""
        try:
            with open("/proc/stat", "rb") as stat:
                prefix = b"cpu%d " % self._cpu
                line = next(line for line in stat if line.startswith(prefix))
            ticks = [int(field) for field in line.split()[1:9]]  # user to steal
            own = Path("/proc/self/stat").read_bytes()  # utime and stime: every thread's
            own_ticks = _stat_field(own, 14) + _stat_field(own, 15)
        except (OSError, StopIteration, IndexError, ValueError):
            return None
        idle = ticks[3] + ticks[4]  # idle and iowait
        return sum(ticks) - idle, sum(ticks), own_ticks

    @staticmethod
    def _read_waits() -> dict[str, tuple[int, int]] | None:
        """How long each of this process's threads waited to run (ns), over how many runs."""
        waits = {}
        try:
            for task in os.listdir("/proc/self/task"):
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    _, delay, count = Path(f"/proc/self/task/{task}/schedstat").read_bytes().split()
                    waits[task] = (int(delay), int(count))
        except (OSError, ValueError):
            return None
        return waits


def _schedule(policy: int) -> None:
    """The calling thread's policy (a thread may move between these two
    unprivileged, at its own nice value)."""
    os.sched_setscheduler(0, policy, os.sched_param(0))


def _current_cpu() -> int | None:
    """The CPU the calling thread last ran on (``/proc``'s ``processor``, field 39)."""
    try:
        return _stat_field(Path("/proc/thread-self/stat").read_bytes(), 39)
    except (OSError, IndexError, ValueError):
        return None


def _stat_field(stat: bytes, number: int) -> int:
    """Field ``number`` (from 1) of a ``/proc`` ``stat`` line, counted after
    the program's name, which may hold spaces and parentheses."""
    return int(stat[stat.rindex(b")") + 2:].split()[number - 3])


@dataclass(frozen=True, slots=True)
class _Pinned:
    cpu: set[int]
    """The one CPU of the daemon's threads."""
    every: set[int]
    """Every CPU the process was given before it pinned them."""
    watch: CpuWatch
