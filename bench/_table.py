"""One comparison printed as a table: baseline and enact side by side."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(cell) for cell in cells])

    def note(self, text: str) -> None:
        self.notes.append(text)

    def render(self) -> str:
        widths = [max(len(row[i]) for row in [self.columns, *self.rows]) for i in range(len(self.columns))]

        def line(cells: list[str]) -> str:
            # The first column is a label; the rest are figures, right-aligned.
            first, *rest = cells
            return "  ".join([first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))])

        rule = "-" * len(line(self.columns))
        out = [self.title, "=" * len(self.title), line(self.columns), rule, *map(line, self.rows)]
        out += [f"  {text}" for text in self.notes]
        return "\n".join(out)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def rate(per_second: float) -> str:
    return f"{per_second:,.0f}"


def ratio(value: float) -> str:
    return f"{value:.2f}x"


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def run_together(threads: list[threading.Thread], ready: threading.Barrier, errors: list[BaseException]) -> float:
    """Start ``threads``, release them at once through ``ready`` (the caller is
    its last party) and return the seconds until all have finished. The first
    error a thread recorded in ``errors`` is raised here."""
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a thread failed: its error is raised below
        ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed
