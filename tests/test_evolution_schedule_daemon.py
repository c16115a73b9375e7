"""The evolve schedule with the scripted runtime: a due run in co-evolve
scans, proposes and tells the owner, and approves nothing; disabled, an idle
home and a fenced daemon call no model; auto-evolve brainstorms once per
theme per day; the mode survives a restart and a model cannot change it.
Where only the schedule's clock is at stake, the daemon's actors run in this
process on a manual clock (``actor_system``); the rest in a real daemon."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
import schedule_clock
from actor_system import ActorSystem, running_actors
from home_state import snapshot
from schedule_clock import FAST_TICK_S, FaultyActors, taken_over

from enact.clock import ManualClock
from enact.evolution.brainstorm import PROMPT_HEADING as BRAINSTORM
from enact.evolution.candidates import candidate_id
from enact.evolution.curator_actor import DATABASES as CURATOR_DATABASES
from enact.evolution.curator_records import SETTINGS
from enact.evolution.modes import EvolveMode
from enact.evolution.signals import EvidenceSource, signal_id
from enact.messages.common import HUMAN_CLI
from enact.messages.curator import Candidates, GetMode, ModeSet, ModeShown, SetMode
from enact.messages.evolve import ClockShown, GetClock
from enact.messages.inbox import ReadTurns, Turn
from enact.messages.scheduler import ListSchedules

from conftest import Daemon, DaemonFactory, wait_for

COMPLAINT = "The owner says the replies are far too long."
TITLE = "Keep replies short"
OWNER = ["send", "--conversation", "owner", "--json"]
ONE_SECOND_TICKS = {"ENACT_SCHEDULER_TICK_S": "1"}
"""For the actors in this process: one tick a second of the manual clock, which tests advance a second at a time."""


def settings(home: Path, **evolve: str) -> Path:
    """A locked conversation (the owner's), fast ticks, a 2-second schedule,
    batches of 2 turns, no workers; the transcript records every model call."""
    transcript = home.parent / "transcript.jsonl"
    evolve = {"schedule": "every 2s", **evolve}
    lines = ["[chat]", 'allowed_conversations = ["local:owner"]', "[daemon]", "workers = 0", "[scheduler]",
             f"tick_s = {FAST_TICK_S}", "[scripted]", f'transcript = "{transcript}"', "[evolve]", "scan_batch = 2",
             *(f"{key} = {orjson.dumps(value).decode()}" for key, value in evolve.items())]
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    return transcript


def rules(home: Path, *rules: tuple[str, str, object]) -> None:
    """Rules answering (purpose, prompt pattern) with JSON, and one chat rule that switches the mode."""
    text = "".join(f"[[rule]]\npurpose = '{purpose}'\nmatch = '{match}'\n"
                   f"reply = '''{orjson.dumps(reply).decode()}'''\n\n" for purpose, match, reply in rules)
    text += ("[[rule]]\nmatch = 'switch evolve'\naction = 'evolve.mode'\nargs = { text = 'auto-evolve' }\n"
             "then = 'done: {receipt}'\n")
    (home / "scripted.toml").write_text(text)


def candidate(title: str, evidence: list[str]) -> dict[str, object]:
    return {"evidence_ids": evidence, "title": title, "rationale": "the owner asked twice",
            "proposed_change": "clip replies to a few sentences unless asked for more",
            "expected_benefit": "replies the owner reads", "risk": "too terse", "test_plan": "a reply-length test"}


def isolated_calls(transcript: Path) -> list[str]:
    lines = transcript.read_text().splitlines() if transcript.exists() else []
    return [call["prompt"] for call in map(orjson.loads, lines) if call["session_key"] == ""]


def notices(daemon: Daemon) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = daemon.cli_json("turns", "--json")
    return [turn for turn in turns if turn["message_id"].startswith("notice:")]


def shown(daemon: Daemon) -> dict[str, Any]:
    mode: dict[str, Any] = daemon.cli_json("evolve", "mode", "--json")
    return mode


def runs_after(daemon: Daemon, moment: float, what: str) -> None:
    wait_for(lambda: (shown(daemon)["last_run_at"] or 0) > moment, what=what)


def candidates(daemon: Daemon) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = daemon.cli_json("evolve", "candidates", "--json")
    return listed


def test_a_due_run_in_co_evolve_scans_proposes_and_tells_the_owner_and_approves_nothing(
        daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    transcript = settings(home)
    signal = signal_id(EvidenceSource.FEEDBACK, COMPLAINT, ["turn:2"])
    cand = candidate_id("feedback", [signal], TITLE)
    observation = {"observation": COMPLAINT, "evidence_type": "complaint", "affected_area": "replies",
                   "desired_outcome": "short replies", "confidence": 0.9, "explicit": True,
                   "evidence_refs": ["turn:2"]}
    rules(home, ("scan", "enact evidence scan: feedback", [observation]),
          ("curation", "enact evolution: candidate synthesis", [candidate(TITLE, [signal])]),
          ("curation", "enact evolution: curation", {"recommended": cand, "reason": "the owner asked for it",
                                         "guidance": "keep it to the reply path", "removals": []}))
    daemon = daemons.start(home)
    daemon.cli(*OWNER, "hello")
    daemon.cli(*OWNER, "your replies are far too long")
    wait_for(lambda: notices(daemon), timeout=30, what="the evolve report to the owner")
    [notice] = notices(daemon)
    assert notice["conversation"] == "owner" and notice["message_id"].startswith("notice:evolve:")
    report = notice["reply"]
    assert report.startswith("Evolve run (co-evolve):"), report
    assert "feedback scan completed over 2 records: 1 signals" in report
    assert f"recommends {cand}" in report
    assert f"approve with `/evolve.approve {cand}` (nothing is approved for you)" in report
    # Nothing approved: the candidate stays active and no task was queued.
    [made] = candidates(daemon)
    assert (made["id"], made["state"], made["task_id"]) == (cand, "active", None)
    assert daemon.cli_json("task", "list", "--json") == []
    state = shown(daemon)
    assert state["mode"] == "co-evolve" and not state["stored"] and state["schedule"] == "every 2s"
    assert state["last_run_at"] is not None and state["next_due_at"] >= state["last_run_at"]
    # Later runs find nothing new: the same proposal is not curated again.
    calls = len(isolated_calls(transcript))
    runs_after(daemon, state["last_run_at"] + 2, "two more runs")
    assert len(isolated_calls(transcript)) == calls and len(notices(daemon)) == 1


def mode_in(system: ActorSystem) -> ModeShown:
    return system.ask("curator", GetMode())


def clock_in(system: ActorSystem) -> ClockShown:
    """The evolve run's clock, from the evolve actor that keeps it."""
    return system.ask("evolve", GetClock())


def notices_in(system: ActorSystem) -> list[Turn]:
    return [turn for turn in system.ask("inbox", ReadTurns()).turns if turn.message_id.startswith("notice:")]


def tick(system: ActorSystem, seconds: int) -> None:
    """Advance the clock a second at a time, each time until the run that
    came due (if one did) has ended: its clock's next due time is ahead."""
    for _ in range(seconds):
        system.clock.advance(1)
        wait_for(lambda: (clock_in(system).next_due_at or 0) > system.clock.time(), what="the due evolve run ended")


def test_disabled_runs_nothing_and_calls_no_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    transcript = settings(home, mode="disabled")
    rules(home, ("scan", "enact evidence scan", []))
    with running_actors(home, ManualClock(), ONE_SECOND_TICKS) as system:
        system.send("hello", conversation="owner")
        system.send("your replies are far too long", conversation="owner")
        tick(system, 2)  # a run after the turns
        shown = clock_in(system)
        assert shown.last_run_at == system.clock.time() and shown.last_outcome.startswith("disabled")
        assert isolated_calls(transcript) == [] and notices_in(system) == []


def test_an_idle_home_calls_no_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    transcript = settings(home)
    rules(home)
    with running_actors(home, ManualClock(), ONE_SECOND_TICKS) as system:
        tick(system, 2)
        first = clock_in(system).last_run_at
        tick(system, 2)
        shown = clock_in(system)
        assert first is not None and shown.last_run_at == first + 2
        assert shown.last_outcome == "co-evolve: nothing new, no model called"
        assert isolated_calls(transcript) == [] and notices_in(system) == []


def test_auto_evolve_brainstorms_once_per_theme_a_day_and_the_mode_survives_a_restart(tmp_path: Path) -> None:
    home, clock = tmp_path / "home", ManualClock()
    home.mkdir()
    transcript = settings(home, theme="make replies easier to read")
    ideas = [candidate("Summaries first", []), candidate("summaries  FIRST.", []),
             candidate("Number the steps", [])]
    rules(home, ("brainstorm", BRAINSTORM, ideas))

    def brainstorms() -> int:
        return len([prompt for prompt in isolated_calls(transcript) if prompt.startswith(BRAINSTORM)])

    with running_actors(home, clock, ONE_SECOND_TICKS) as system:
        changed = system.ask("curator", SetMode(mode="auto-evolve", origin=HUMAN_CLI))
        assert isinstance(changed, ModeSet) and (changed.mode, changed.previous) == ("auto-evolve", "co-evolve")
        tick(system, 2)  # the run waits for the brainstorm's model call
        made = system.ask("curator", Candidates()).candidates
        assert sorted(c.draft.title for c in made) == ["Number the steps", "Summaries first"]
        assert all(c.brainstorm and c.draft.source == "brainstorm" and c.draft.evidence_ids == () for c in made)
        assert all(c.theme == "make replies easier to read" for c in made)
        wait_for(lambda: any("brainstorm: 2 candidates" in notice.reply for notice in notices_in(system)),
                 what="the brainstorm reported")  # the inbox logs a notice as a turn of its own
        tick(system, 4)  # two more runs the same day: no second brainstorm
        assert brainstorms() == 1

    with running_actors(home, clock, ONE_SECOND_TICKS) as again:
        state = mode_in(again)
        assert state.mode == "auto-evolve" and state.stored
        ran = clock_in(again).last_run_at
        tick(again, 4)
        assert (clock_in(again).last_run_at or 0) > (ran or 0)
        assert brainstorms() == 1 and len(again.ask("curator", Candidates()).candidates) == 2


def test_the_clock_is_kept_by_the_evolve_actor_only_and_a_copy_an_older_version_kept_is_removed(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with schedule_clock.home(home, "curator", CURATOR_DATABASES, FaultyActors()) as context:
        old_copy = {"schedule": "every 2s", "next_due_at": 1.0, "last_run_at": 1.0, "last_outcome": "long ago"}
        context.own_store().write(lambda txn: context.own_store().table(SETTINGS).put(txn, b"clock", old_copy))
    settings(home)
    rules(home)
    with running_actors(home, ManualClock(), ONE_SECOND_TICKS) as system:
        tick(system, 2)
        shown = clock_in(system)
        assert shown.last_run_at == system.clock.time() and shown.last_outcome != "long ago"
        assert mode_in(system) == ModeShown(mode=EvolveMode.CO_EVOLVE, stored=False)
        said = system.send("/evolve.mode", conversation="owner").reply  # the mode's and the clock's owners asked
        assert said.startswith("evolve mode: co-evolve; schedule every 2s, next due ") and "last run never" not in said
    with schedule_clock.home(home, "curator", CURATOR_DATABASES, FaultyActors()) as context:
        assert context.own_store().read(lambda txn: context.own_store().table(SETTINGS).get(txn, b"clock")) is None


def test_a_model_action_cannot_change_the_mode_and_the_owner_can_from_chat(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    settings(home, schedule="daily 09:00")
    rules(home)
    daemon = daemons.start(home)
    refused = orjson.loads(daemon.cli(*OWNER, "switch evolve to auto").stdout)
    assert refused["actions"][0]["ok"] is False
    assert "evolve.mode needs a human" in refused["actions"][0]["receipt"]
    assert shown(daemon)["mode"] == "co-evolve" and not shown(daemon)["stored"]
    owner = orjson.loads(daemon.cli(*OWNER, "/evolve.mode disabled").stdout)
    assert owner["reply"] == "evolve mode: disabled (was co-evolve)"
    assert shown(daemon)["mode"] == "disabled"
    bad = daemon.cli("evolve", "mode", "sometimes", "--json")
    assert bad.returncode == 2 and shown(daemon)["mode"] == "disabled"
    text = daemon.cli("evolve", "mode").stdout
    assert "mode:      disabled (set by `enact evolve mode`)" in text and "schedule:  daily 09:00" in text


def test_a_fenced_daemon_runs_nothing_when_the_evolve_schedule_comes_due(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    home.mkdir()
    transcript = settings(home, schedule="every 6s")
    rules(home, ("scan", "enact evidence scan", []))
    with running_actors(home, ManualClock(), ONE_SECOND_TICKS) as system:
        system.send("hello", conversation="owner")
        system.send("your replies are far too long", conversation="owner")  # a full batch: a run would scan it
        with taken_over(home), caplog.at_level(logging.INFO):
            system.clock.advance(6)  # due, after another process took the home over
            system.ask("scheduler", ListSchedules())  # answered after that tick
    clock = snapshot(home).document("scheduler.evolve", b"clock")
    assert clock["acknowledged"] is None and clock["claim"]["claimed"] is None
    assert "this daemon is fenced" in caplog.text and "evolve run" not in caplog.text
    assert isolated_calls(transcript) == []
