"""Tokens per day and purpose as an SVG bar chart, drawn on the server (no
script): one stacked bar a day, one colour a purpose, and a dashed line at
each daily budget (the total's dark, a purpose's in its colour)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

from enact.frozen_dataclass import dataclass

TOTAL = "total"
TOTAL_COLOUR = "#1d2126"
PALETTE = ("#2458a6", "#d9822b", "#1f7a3a", "#b3261e", "#7b4fa6", "#0f8b8d", "#8a5a00", "#5c6670")
WIDTH, HEIGHT = 760, 260
_LEFT, _BOTTOM, _TOP = 64, 40, 12


@dataclass(frozen=True, slots=True)
class DayTokens:
    day: str
    """``YYYY-MM-DD``."""
    by_purpose: dict[str, int]


def purposes_of(days: Sequence[DayTokens], limits: Mapping[str, int] | None = None) -> list[str]:
    """Every purpose with use in ``days`` or a budget in ``limits``."""
    budgeted = {name for name, limit in (limits or {}).items() if limit and name != TOTAL}
    return sorted({purpose for day in days for purpose in day.by_purpose} | budgeted)


def colour(purposes: Sequence[str], purpose: str) -> str:
    return PALETTE[purposes.index(purpose) % len(PALETTE)]


def _short(count: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= limit:
            return f"{count / limit:.3g}{suffix}"
    return f"{count:.0f}"


def chart(days: Sequence[DayTokens], limits: Mapping[str, int] | None = None) -> Markup:
    """``limits``: each daily budget (a purpose's or ``total``; 0 or absent: none), drawn as a line."""
    budgets = {name: limit for name, limit in (limits or {}).items() if limit > 0}
    purposes = purposes_of(days, budgets)
    highest = max([*(sum(day.by_purpose.values()) for day in days), *budgets.values()], default=0) or 1
    plot_h = HEIGHT - _BOTTOM - _TOP
    step = (WIDTH - _LEFT - 8) / max(len(days), 1)
    bar_w = step * 0.7
    parts = [f'<svg class="chart" role="img" aria-label="tokens per day and purpose" width="{WIDTH}" '
             f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">']
    for fraction in (0, 0.5, 1):
        y = _TOP + plot_h * (1 - fraction)
        parts.append(f'<line x1="{_LEFT}" x2="{WIDTH - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d9dee3"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_short(highest * fraction)}</text>')
    for index, day in enumerate(days):
        x = _LEFT + index * step + (step - bar_w) / 2
        y = _TOP + plot_h
        for purpose in purposes:
            tokens = day.by_purpose.get(purpose, 0)
            if not tokens:
                continue
            h = plot_h * tokens / highest
            y -= h
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                         f'fill="{colour(purposes, purpose)}"><title>{escape(day.day)} {escape(purpose)}: '
                         f'{tokens} tokens</title></rect>')
        parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle">'
                     f'{escape(day.day[5:])}</text>')
    for name, limit in sorted(budgets.items(), key=lambda item: (item[0] != TOTAL, item[0])):
        y = _TOP + plot_h * (1 - limit / highest)
        stroke = TOTAL_COLOUR if name == TOTAL else colour(purposes, name)
        parts.append(f'<line class="budget" data-budget="{escape(name)}" x1="{_LEFT}" x2="{WIDTH - 8}" '
                     f'y1="{y:.1f}" y2="{y:.1f}" stroke="{stroke}" stroke-width="1.5" stroke-dasharray="6 4">'
                     f'<title>{escape(name)} budget: {limit} tokens a day</title></line>')
    parts.append("</svg>")
    return Markup("".join(parts))
