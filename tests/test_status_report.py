"""What the status request reuses between requests: the frame the control
socket writes (the last report's encoding with each request's uptime put in,
byte for byte what ``encode`` writes), and the day its spending is asked of."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import orjson
import pytest
from actor_system import running_actors

from enact import components
from enact._app.channels import DaemonChannels
from enact._app.reports import NOT_FRAMED, AskedToday, DaemonReports, _MadeStatus, asked_today, framed_status
from enact.clock import ManualClock
from enact.messages import decode, encode
from enact.messages.accounting import SpentOn
from enact.messages.channel import ChannelState
from enact.messages.control import StatusReport

# A home whose path holds the very text the uptime field is found by.
TRICKY_HOME = '/h/,"uptime_s":0.0,"x'


def _report() -> StatusReport:
    return StatusReport(version="1", pid=7, home=TRICKY_HOME, generation=3, uptime_s=0.0, metrics_addr="127.0.0.1:1",
                        actor_names=("epoch", "inbox"), restarts={"inbox": 2},
                        channels=(ChannelState(name="local", state="up"),), confinement='say "uptime_s":1.0,')


@pytest.mark.parametrize("uptime", [0.0, 0.001, 12.345, 86_400.5, 1e17])
def test_the_frame_is_what_encode_writes_for_the_uptime(uptime: float) -> None:
    made = _MadeStatus.of(("said",), _report())
    frame = made.head + orjson.dumps(uptime) + made.tail
    assert frame == encode(dataclasses.replace(_report(), uptime_s=uptime))
    assert decode(frame) == dataclasses.replace(_report(), uptime_s=uptime)


def test_the_last_frame_is_given_again_only_for_the_same_status_made_and_uptime() -> None:
    made = _MadeStatus.of(("said",), _report())
    first = framed_status(made, 1.234, NOT_FRAMED)
    assert decode(first.frame) == dataclasses.replace(_report(), uptime_s=1.234)
    assert framed_status(made, 1.234, first) is first
    later = framed_status(made, 1.235, first)
    assert decode(later.frame) == dataclasses.replace(_report(), uptime_s=1.235)
    # Something it says changed (the status made again): its own frame, never the last one's.
    changed = dataclasses.replace(_report(), generation=4)
    remade = framed_status(_MadeStatus.of(("said again",), changed), 1.235, later)
    assert remade is not later and decode(remade.frame) == dataclasses.replace(changed, uptime_s=1.235)


def test_the_spending_is_asked_of_the_local_day_and_the_same_request_kept_through_it() -> None:
    noon = time.mktime((2026, 3, 14, 12, 0, 0, 0, 0, -1))
    first = asked_today(noon, AskedToday(SpentOn(day=""), 0.0, 0.0))
    assert first.asked == SpentOn(day="2026-03-14")
    assert asked_today(noon + 3600, first) is first
    last_second = time.mktime((2026, 3, 14, 23, 59, 59, 0, 0, -1))
    assert asked_today(last_second, first) is first
    after = asked_today(last_second + 1, first)
    assert after.asked == SpentOn(day="2026-03-15") and after.since == last_second + 1
    assert asked_today(noon, after).asked == SpentOn(day="2026-03-14")  # a clock set back asks of its day again


def test_a_brief_status_is_the_one_made_last_until_an_actor_does_something(tmp_path: Path) -> None:
    """The daemon's own actors in this process: while none of them does
    anything, a brief status is the one made last, not gathered again; a
    chat turn (its tally told to the accounting actor) shows in the next."""
    with running_actors(tmp_path / "home", ManualClock()) as system:
        reports = DaemonReports(home=tmp_path / "home", settings=system.settings, storage=system.storage,
                                fence=system.fence, supervisor=system.supervisor,
                                channels=DaemonChannels(components.load(), system.settings), budget=system.budget,
                                metrics_addr="", started=time.monotonic(), revision="")
        made = reports._status_made(brief=True)
        assert made.report.spending == () and "accounting" in made.report.actor_names
        assert reports._status_made(brief=True) is made  # nothing happened in between

        system.send("hello")
        after = reports.status(brief=True)
        assert [(line.purpose, line.calls) for line in after.spending] == [("conversation", 1)]
        assert reports._status_made(brief=True).report == dataclasses.replace(after, uptime_s=0.0)
        assert reports.status(brief=False).spending == after.spending  # the full one is always gathered
