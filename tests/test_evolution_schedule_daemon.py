"""The evolve schedule in a running daemon with the scripted runtime: a due
run in co-evolve scans, proposes and tells the owner, and approves nothing;
disabled and an idle home call no model; auto-evolve brainstorms once per
theme per day; the mode survives a restart and a model cannot change it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
from home_state import snapshot
from schedule_clock import FAST_TICK_S, fenced_past

from enact.evolution.brainstorm import PROMPT_HEADING as BRAINSTORM
from enact.evolution.candidates import candidate_id
from enact.evolution.signals import EvidenceSource, signal_id

from conftest import Daemon, DaemonFactory, wait_for

COMPLAINT = "The owner says the replies are far too long."
TITLE = "Keep replies short"
OWNER = ["send", "--conversation", "owner", "--json"]


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


def rules(home: Path, *rules: tuple[str, object]) -> None:
    text = "".join(f"[[rule]]\nmatch = '{match}'\nreply = '''{orjson.dumps(reply).decode()}'''\n\n"
                   for match, reply in rules)
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
    rules(home, ("enact evidence scan: feedback", [observation]),
          ("enact evolution: candidate synthesis", [candidate(TITLE, [signal])]),
          ("enact evolution: curation", {"recommended": cand, "reason": "the owner asked for it",
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
    assert f"recommends {cand}" in report and f"enact evolve approve {cand}" in report
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


def test_disabled_runs_nothing_and_calls_no_model(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    transcript = settings(home, mode="disabled")
    rules(home, ("enact evidence scan", []))
    daemon = daemons.start(home)
    daemon.cli(*OWNER, "hello")
    daemon.cli(*OWNER, "your replies are far too long")
    runs_after(daemon, time.time(), "a run after the turns")
    assert shown(daemon)["last_outcome"].startswith("disabled")
    assert isolated_calls(transcript) == [] and notices(daemon) == []


def test_an_idle_home_calls_no_model(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    transcript = settings(home)
    rules(home)
    daemon = daemons.start(home)
    runs_after(daemon, 0, "a first run")
    runs_after(daemon, shown(daemon)["last_run_at"], "a second run")
    assert shown(daemon)["last_outcome"] == "co-evolve: nothing new, no model called"
    assert isolated_calls(transcript) == [] and notices(daemon) == []


def test_auto_evolve_brainstorms_once_per_theme_a_day_and_the_mode_survives_a_restart(
        daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    transcript = settings(home, theme="make replies easier to read")
    ideas = [candidate("Summaries first", []), candidate("summaries  FIRST.", []),
             candidate("Number the steps", [])]
    rules(home, (BRAINSTORM, ideas))
    daemon = daemons.start(home)
    changed = daemon.cli_json("evolve", "mode", "auto-evolve", "--json")
    assert (changed["mode"], changed["previous"]) == ("auto-evolve", "co-evolve")
    wait_for(lambda: len(candidates(daemon)) == 2, timeout=30, what="the brainstormed candidates")
    made = candidates(daemon)
    assert sorted(c["title"] for c in made) == ["Number the steps", "Summaries first"]
    assert all(c["brainstorm"] and c["source"] == "brainstorm" and c["evidence_ids"] == [] for c in made)
    assert all(c["theme"] == "make replies easier to read" for c in made)
    wait_for(lambda: any("brainstorm: 2 candidates" in n["reply"] for n in notices(daemon)),
             what="the brainstorm reported")
    runs_after(daemon, shown(daemon)["last_run_at"] + 2, "more runs")
    assert len([p for p in isolated_calls(transcript) if p.startswith(BRAINSTORM)]) == 1
    assert daemon.terminate() == 0

    again = daemons.start(home)
    state = shown(again)
    assert state["mode"] == "auto-evolve" and state["stored"]
    runs_after(again, state["last_run_at"] + 2, "runs after the restart")
    assert len([p for p in isolated_calls(transcript) if p.startswith(BRAINSTORM)]) == 1
    assert len(candidates(again)) == 2


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


def test_a_fenced_daemon_runs_nothing_when_the_evolve_schedule_comes_due(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    transcript = settings(home, schedule="every 6s")
    rules(home, ("enact evidence scan", []))
    daemon = daemons.start(home)
    daemon.cli(*OWNER, "hello")
    daemon.cli(*OWNER, "your replies are far too long")  # a full batch: an unfenced run would scan it
    due = shown(daemon)["next_due_at"]
    assert due > time.time(), "the schedule came due before the test could stop the daemon"
    fenced_past(daemon, due)
    clock = snapshot(home).document("scheduler.evolve", b"clock")
    assert clock["acknowledged"] is None and clock["claim"]["claimed"] is None
    assert isolated_calls(transcript) == [] and "evolve run" not in daemon.log_text()
