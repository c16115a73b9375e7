"""``enact evolve``: enact's proposals to improve itself, and their evidence."""

from __future__ import annotations

import click

from enact.cli._evolve_mode import mode
from enact.cli._evolve_scan import scan, signals


@click.group("evolve")
def evolve() -> None:
    """Evidence, candidates and approval: how enact proposes changes to itself."""


evolve.add_command(scan)
evolve.add_command(signals)
evolve.add_command(mode)
