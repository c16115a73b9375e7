"""One comparison printed as a table: baseline and enact side by side."""

from __future__ import annotations

import statistics
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
