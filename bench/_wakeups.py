"""How often an idle process wakes: every thread's context switches, and
the threads it starts, read from /proc while it is left alone.

A thread's ``voluntary_ctxt_switches`` counts the times it went to sleep
(each one a wake-up later); one made and ended inside the window is seen
by sampling often enough that none lives unseen between two samples (a
timer thread lives as long as its delay), and counts its own switches
and one more for being started."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Wakeups:
    per_second: float
    """Every thread's voluntary context switches, and each thread started, per second."""
    threads_started_per_second: float


def _switches(pid: int) -> dict[str, int]:
    """Each live thread's voluntary context switches (its sleeps), by its id."""
    counts: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            lines = (task / "status").read_text().splitlines()
        except OSError:  # it ended between the listing and the read
            continue
        counts[task.name] = sum(int(line.split()[1]) for line in lines
                                if line.startswith("voluntary_ctxt_switches"))
    return counts


def idle_wakeups(pid: int, seconds: float = 5.0, sample_s: float = 0.02) -> Wakeups:
    """Process ``pid``'s wake-ups per second over ``seconds``, sampled every
    ``sample_s`` (which the sampling itself does not add to: it reads files
    of another process)."""
    first = _switches(pid)
    last = dict(first)
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(sample_s)
        last.update(_switches(pid))
    elapsed = time.monotonic() - started
    new = [tid for tid in last if tid not in first]
    switches = sum(count - first.get(tid, 0) for tid, count in last.items())
    return Wakeups(per_second=(switches + len(new)) / elapsed, threads_started_per_second=len(new) / elapsed)


if __name__ == "__main__":
    import sys

    found = idle_wakeups(int(sys.argv[1]), float(sys.argv[2]) if sys.argv[2:] else 10.0)
    print(f"{found.per_second:.1f} wake-ups/s, {found.threads_started_per_second:.1f} threads started/s")
