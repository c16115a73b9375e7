"""Evolve modes, as plain values and rules.

The mode says what the scheduled evolve run may do: ``disabled`` nothing,
``co-evolve`` scan and propose (reported to the owner, never approved by the
scheduler), ``auto-evolve`` that and brainstorm. When it runs is the evolve
schedule (``enact.schedules``).
"""

from __future__ import annotations

import enum

from enact.schedules import ScheduleError


class EvolveMode(enum.StrEnum):
    DISABLED = "disabled"
    CO_EVOLVE = "co-evolve"
    AUTO_EVOLVE = "auto-evolve"

    @property
    def scans(self) -> bool:
        return self is not EvolveMode.DISABLED

    @property
    def brainstorms(self) -> bool:
        return self is EvolveMode.AUTO_EVOLVE


MODES = tuple(mode.value for mode in EvolveMode)


def parse_mode(text: str) -> EvolveMode:
    try:
        return EvolveMode(text.strip().lower())
    except ValueError:
        raise ScheduleError(f"unknown evolve mode {text!r}; one of {', '.join(MODES)}") from None
