"""The evidence scanner in a running daemon with the scripted runtime: turns
and tasks in, `enact evolve scan`, signals out through `enact evolve signals`."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import orjson
from task_repos import make_repo

from enact.messages.common import Done
from enact.messages.local import Send
from enact.messages.scanner import Scan, ScanReport
from enact.messages.tasks import Claim, Claimed, Finish
from enact.tasks.records import FailureClass, Outcome

from conftest import Daemon, DaemonFactory

GITHUB_TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
NO_WORKERS = {"ENACT_DAEMON_WORKERS": "0"}


def observation(refs: list[str], text: str = "The owner says the replies are far too long.",
                **overrides: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "observation": text, "evidence_type": "complaint", "affected_area": "replies",
        "desired_outcome": "short replies", "confidence": 0.9, "explicit": True, "evidence_refs": refs,
    }
    item.update(overrides)
    return item


def scan_rules(home: Path, source: str, answer: str) -> None:
    """The scripted model answers a scan of ``source`` with ``answer``."""
    literal = answer.replace("'''", "")
    (home / "scripted.toml").write_text(f"[[rule]]\npurpose = 'scan'\nmatch = 'enact evidence scan: {source}'\n"
                                        f"reply = '''{literal}'''\n")


def start(daemons: DaemonFactory, home: Path | None = None, env: dict[str, str] | None = None) -> Daemon:
    home = home or daemons.new_home()
    transcript = home.parent / "transcript.jsonl"
    return daemons.start(home, env={"ENACT_SCRIPTED_TRANSCRIPT": str(transcript), **(env or {})})


def say(daemon: Daemon, *texts: str) -> None:
    for text in texts:
        daemon.request(Send(text=text))


def scan(daemon: Daemon, *args: str, code: int = 0) -> list[dict[str, Any]]:
    result = daemon.cli("evolve", "scan", "--json", *args)
    assert result.returncode == code, (result.stdout, result.stderr)
    scans: list[dict[str, Any]] = orjson.loads(result.stdout)["scans"]
    return scans


def signals(daemon: Daemon, *args: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = daemon.cli_json("evolve", "signals", "--json", *args)["signals"]
    return found


def metrics_text(daemon: Daemon) -> str:
    address = daemon.cli_json("status", "--json")["metrics_addr"]
    return str(urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode())


def scan_prompts(daemon: Daemon) -> list[str]:
    transcript = daemon.home.parent / "transcript.jsonl"
    lines = transcript.read_text().splitlines() if transcript.exists() else []
    calls = [orjson.loads(line) for line in lines]
    return [call["prompt"] for call in calls if call["prompt"].startswith("enact evidence scan")]


def test_a_complaint_in_the_turns_becomes_a_signal_and_a_rescan_calls_no_model(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    scan_rules(home, "feedback", orjson.dumps([observation(["turn:2"])]).decode())
    daemon = start(daemons, home)
    say(daemon, "hello", f"your replies are far too long; here is my token {GITHUB_TOKEN}")
    (first,) = scan(daemon, "--source", "feedback")
    assert (first["outcome"], first["records"], first["pending"]) == ("completed", 2, 0)
    (signal,) = signals(daemon)
    assert signal["id"] == first["signals"][0] and signal["state"] == "active"
    assert signal["evidence_refs"] == ["turn:2"] and signal["source"] == "feedback"
    (prompt,) = scan_prompts(daemon)
    assert GITHUB_TOKEN not in prompt and "[redacted credential]" in prompt
    again = scan(daemon)
    assert [(s["source"], s["outcome"]) for s in again] == [("feedback", "nothing-new"), ("experience", "nothing-new")]
    assert len(scan_prompts(daemon)) == 1  # idle: no model call at all
    assert len(signals(daemon)) == 1
    text = daemon.cli("evolve", "signals", "--state", "active")
    assert text.returncode == 0 and "far too long" in text.stdout
    metrics = metrics_text(daemon)
    assert 'enact_evolution_scans_total{outcome="completed",source="feedback"} 1.0' in metrics
    assert 'enact_evolution_scans_total{outcome="nothing-new",source="experience"} 1.0' in metrics
    assert 'enact_evolution_signals{state="active"} 1.0' in metrics


def test_signals_show_the_newest_within_the_limit_and_say_how_many_more(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    found = [observation([f"turn:{n}"], text=f"complaint number {n}", explicit=n != 2) for n in (1, 2, 3)]
    scan_rules(home, "feedback", orjson.dumps(found).decode())
    daemon = start(daemons, home)
    say(daemon, "one", "two", "three")
    assert scan(daemon, "--source", "feedback")[0]["outcome"] == "completed"
    page = daemon.cli_json("evolve", "signals", "--limit", "2", "--json")
    assert len(page["signals"]) == 2 and page["more"] == 1
    assert daemon.cli_json("evolve", "signals", "--state", "linked", "--json") == {"signals": [], "more": 0}
    text = daemon.cli("evolve", "signals", "--limit", "1")
    assert text.returncode == 0 and text.stdout.splitlines()[-1] == "2 more, older (--limit shows more)"
    assert len(signals(daemon)) == 3  # the default limit (50) shows them all


def test_a_malformed_reply_leaves_the_turns_pending_until_a_good_reply(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    scan_rules(home, "feedback", "I noticed: " + orjson.dumps([observation(["turn:1"])]).decode())
    daemon = start(daemons, home)
    say(daemon, "that was wrong, again")
    (failed,) = scan(daemon, "--source", "feedback", code=1)
    assert failed["outcome"] == "failed" and "not a JSON array" in failed["error"] and failed["pending"] == 1
    refused = daemon.cli("evolve", "scan", "--source", "feedback")
    assert refused.returncode == 1 and "not a JSON array" in refused.stdout
    scan_rules(home, "feedback", orjson.dumps([observation(["turn:1"], mood="cross")]).decode())
    (extra,) = scan(daemon, "--source", "feedback", code=1)
    assert "not allowed: mood" in extra["error"]
    assert signals(daemon) == []
    scan_rules(home, "feedback", orjson.dumps([observation(["turn:1"])]).decode())
    (good,) = scan(daemon, "--source", "feedback")
    assert good["outcome"] == "completed" and good["records"] == 1 and good["pending"] == 0
    assert [s["evidence_refs"] for s in signals(daemon)] == [["turn:1"]]
    prompts = scan_prompts(daemon)
    assert len(prompts) == 4 and all("that was wrong, again" in prompt for prompt in prompts)
    # The evolve history shows the scans too, a failed one with its error.
    scans = daemon.cli_json("evolve", "history", "--json")["scans"]
    assert [record["outcome"] for record in scans] == ["completed", "failed", "failed", "failed"]
    assert "not a JSON array" in scans[-1]["error"]
    assert "scan failed" in daemon.cli("evolve", "history").stdout


def test_an_experience_scan_reads_a_failed_task_with_its_events(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = daemons.new_home()
    daemon = start(daemons, home, env=NO_WORKERS)
    daemon.cli_json("task", "add", "--repo", str(repo), "--json", "make the build faster")
    claimed = daemon.request(Claim(worker_id="w1"))
    assert isinstance(claimed, Claimed)
    finish = Finish(task_id=1, worker_id="w1", attempt=claimed.task.attempt, outcome=Outcome.FAILED,
                    failure_class=FailureClass.PERMANENT, summary="the doctor failed: 3 tests broke")
    assert isinstance(daemon.request(finish), Done)
    ref = f"task:1@{_latest_cursor(daemon)}"
    scan_rules(home, "experience", orjson.dumps([observation(
        [ref], "Task 1 failed because its tests broke", evidence_type="failure", explicit=False)]).decode())
    (done,) = scan(daemon, "--source", "experience")
    assert done["outcome"] == "completed" and done["records"] == 1
    (signal,) = signals(daemon)
    assert signal["source"] == "experience" and signal["evidence_refs"] == [ref]
    (prompt,) = scan_prompts(daemon)
    assert "make the build faster" in prompt and "3 tests broke" in prompt
    assert scan(daemon, "--source", "experience")[0]["outcome"] == "nothing-new"


def _latest_cursor(daemon: Daemon) -> int:
    from enact.messages.tasks import EventPage, Events

    page = daemon.request(Events(task_id=1))
    assert isinstance(page, EventPage)
    return page.events[-1].cursor


def test_signals_and_checkpoint_survive_kill_9(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    scan_rules(home, "feedback", orjson.dumps([observation(["turn:1"])]).decode())
    daemon = start(daemons, home)
    say(daemon, "the replies are far too long")
    assert scan(daemon, "--source", "feedback")[0]["outcome"] == "completed"
    before = signals(daemon)
    daemon.kill9()
    again = start(daemons, home)
    assert signals(again) == before
    assert scan(again, "--source", "feedback")[0]["outcome"] == "nothing-new"
    history = again.cli_json("call", "scanner.History", "{}")
    assert [s["outcome"] for s in history["body"]["scans"]] == ["completed"]


def test_force_drains_every_pending_batch(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    scan_rules(home, "feedback", "[]")
    daemon = start(daemons, home, env={"ENACT_EVOLVE_SCAN_BATCH": "2"})
    say(daemon, "one", "two", "three", "four", "five")
    (single,) = scan(daemon, "--source", "feedback")
    assert (single["records"], single["pending"]) == (2, 3)
    drained = scan(daemon, "--source", "feedback", "--force")
    assert [(s["outcome"], s["records"], s["pending"]) for s in drained] == [("completed", 2, 1),
                                                                             ("completed", 1, 0)]
    assert len(scan_prompts(daemon)) == 3


def test_force_drains_both_sources_one_batch_per_request_printing_each(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    scan_rules(home, "(feedback|experience)", "[]")
    daemon = start(daemons, home, env={"ENACT_EVOLVE_SCAN_BATCH": "2", **NO_WORKERS})
    say(daemon, "one", "two", "three", "four", "five")
    result = daemon.cli("evolve", "scan", "--force")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["feedback", "completed"]] * 3 + [["experience", "nothing-new"]]
    assert lines[0].endswith("3 pending") and lines[1].endswith("1 pending") and lines[2].endswith("0 signals")
    history = daemon.cli_json("evolve", "history", "--json")["scans"]
    assert [scan["records"] for scan in history] == [1, 2, 2]


def test_a_failed_batch_stops_the_drain_and_leaves_its_turns_pending(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    # The second batch (turns three and four) gets prose around its array: refused.
    (home / "scripted.toml").write_text(
        "[[rule]]\npurpose = 'scan'\nmatch = 'enact evidence scan: feedback[\\s\\S]*three'\nreply = 'Sure! []'\n"
        "[[rule]]\npurpose = 'scan'\nmatch = 'enact evidence scan: (feedback|experience)'\nreply = '[]'\n")
    daemon = start(daemons, home, env={"ENACT_EVOLVE_SCAN_BATCH": "2", **NO_WORKERS})
    say(daemon, "one", "two", "three", "four", "five")
    result = daemon.cli("evolve", "scan", "--force", "--json")
    assert result.returncode == 1, result.stderr
    document = orjson.loads(result.stdout)
    assert [(s["outcome"], s["records"]) for s in document["scans"]] == [("completed", 2), ("failed", 2)]
    assert document["status"] == "failed" and "drain stopped" in document["error"]
    assert "2 records stay pending" in document["error"] and "not a JSON array" in document["error"]
    assert len(scan_prompts(daemon)) == 2  # neither the third batch nor the experience source was asked
    (home / "scripted.toml").write_text("[[rule]]\npurpose = 'scan'\nmatch = 'enact evidence scan'\nreply = '[]'\n")
    again = scan(daemon, "--source", "feedback", "--force")
    assert [(s["outcome"], s["records"], s["pending"]) for s in again] == [("completed", 2, 1), ("completed", 1, 0)]


def test_a_drain_with_nothing_pending_prints_todays_json_document(daemons: DaemonFactory) -> None:
    daemon = start(daemons)
    result = daemon.cli("evolve", "scan", "--source", "experience", "--force", "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"scans": [{
        "scan_id": "", "source": "experience", "outcome": "nothing-new", "error": "", "records": 0, "signals": [],
        "pending": 0}]}


def test_a_scheduled_scan_skips_while_a_task_runs_and_waits_for_a_full_batch(daemons: DaemonFactory,
                                                                               tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = daemons.new_home()
    scan_rules(home, "feedback", "[]")
    daemon = start(daemons, home, env={**NO_WORKERS, "ENACT_EVOLVE_SCAN_BATCH": "2"})
    say(daemon, "one")
    waiting = daemon.request(Scan(scheduled=True))
    assert isinstance(waiting, ScanReport)
    assert [(s.source.value, s.outcome) for s in waiting.scans] == [("feedback", "skipped"),
                                                                    ("experience", "nothing-new")]
    assert "batch of 2" in waiting.scans[0].error
    say(daemon, "two")
    daemon.cli_json("task", "add", "--repo", str(repo), "--json", "tidy the docs")
    assert isinstance(daemon.request(Claim(worker_id="w1")), Claimed)
    busy = daemon.request(Scan(scheduled=True))
    assert isinstance(busy, ScanReport)
    assert {(s.outcome, s.error) for s in busy.scans} == {
        ("skipped", "a task is running; the scan waits until none is")}
    assert scan_prompts(daemon) == []
