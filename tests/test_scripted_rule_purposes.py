"""Scripted rules answer the owner's chat messages unless they name a
purpose: the documented example rules (docs/runtimes.md)
no longer answer the evidence scanner's or a task's calls, and a rule that
opts into a purpose answers that purpose's calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from task_repos import make_repo
from test_task_workers import add, wait_ended

from enact.evolution.scan_batch import EvidenceRecord
from enact.evolution.scan_prompt import scan_prompt
from enact.evolution.signals import EvidenceSource
from enact.messages.local import Send
from enact.runtime import PURPOSES, RuntimeRequest, RuntimeUnavailable
from enact.runtime.scripted import RulesError, ScriptedRuntime, parse_rules

from conftest import Daemon, DaemonFactory


def _documented_rules() -> str:
    """The first rule set of docs/runtimes.md's scripted runtime section, as a user copies it."""
    page = (Path(__file__).parent.parent / "docs" / "runtimes.md").read_text()
    section = page[page.index("## The scripted runtime"):]
    return section.split("```toml\n", 1)[1].split("```", 1)[0]


README_RULES = _documented_rules()
"""The documented example rules (the README's, before the docs moved): chat rules with no purpose."""

OPTED_IN = '''
[[rule]]
purpose = "scan"
match = "^enact evidence scan: feedback"
reply = "Sure! Here is what I found."

[[rule]]
purpose = "task"
match = "^remember (.+)"
reply = "task rule: \\\\1"
'''

SAID = ("remember I like green tea", "how are things", "it may explode")


def runtime(tmp_path: Path, text: str) -> ScriptedRuntime:
    path = tmp_path / "scripted.toml"
    path.write_text(text)
    return ScriptedRuntime(path)


def scan_request() -> RuntimeRequest:
    records = [EvidenceRecord(ref=f"turn:{n}", fields={"text": said}) for n, said in enumerate(SAID, 1)]
    return RuntimeRequest(session_key="", prompt=scan_prompt(EvidenceSource.FEEDBACK, records), purpose="scan")


def task_request(request: str) -> RuntimeRequest:
    return RuntimeRequest(session_key="task:1", prompt=f"You are working on task 1 ...\n\nRequest:\n{request}",
                          owner_message=request, purpose="task", sandbox="workspace-write")


def test_a_rule_of_no_purpose_answers_the_owners_message_not_a_composed_prompt(tmp_path: Path) -> None:
    scripted = runtime(tmp_path, README_RULES)
    chat = RuntimeRequest(session_key="local:me", prompt="[startup] the owner said: how are things\n\nremember tea",
                          owner_message="remember tea")
    assert scripted.invoke(chat).text == "Noted. [MEMORY]tea[/MEMORY]"
    assert scripted.invoke(scan_request()).text == "[]"
    assert scripted.invoke(task_request("remember the answer")).text == (
        "(scripted runtime) You said: remember the answer")
    probe = RuntimeRequest(session_key="", prompt="explode, then reply ready", purpose="probe")
    assert scripted.invoke(probe).text == "[]"  # the fail rule is the owner's, not the probe's


def test_a_rule_that_names_a_purpose_answers_only_that_purposes_calls(tmp_path: Path) -> None:
    scripted = runtime(tmp_path, OPTED_IN + README_RULES)
    assert scripted.invoke(scan_request()).text == "Sure! Here is what I found."
    assert scripted.invoke(task_request("remember the answer")).text == "task rule: the answer"
    chat = RuntimeRequest(session_key="local:me", prompt="p", owner_message="remember tea")
    assert scripted.invoke(chat).text == "Noted. [MEMORY]tea[/MEMORY]"
    failing = runtime(tmp_path, '[[rule]]\npurpose = "curation"\nmatch = "^enact evolution"\nfail = "down"\n'
                                'fail_as = "unavailable"\n')
    with pytest.raises(RuntimeUnavailable, match="scripted failure: down"):
        failing.invoke(RuntimeRequest(session_key="", prompt="enact evolution: curation", purpose="curation"))


@pytest.mark.parametrize(("rule", "problem"), [
    ('purpose = "banter"\nreply = "x"', "'purpose' is one of " + ", ".join(PURPOSES)),
    ('purpose = "scan"\naction = "status"', "'action' goes with the conversation purpose"),
    ('purpose = "scan"\nrun = ["true"]\nreply = "x"', "'run' goes with purpose = \"task\""),
])
def test_a_purpose_that_cannot_apply_is_refused_naming_the_rule(rule: str, problem: str) -> None:
    with pytest.raises(RulesError, match=f"rules.toml: rule #1: {problem}"):
        parse_rules(f'[[rule]]\nmatch = "a"\n{rule}\n', source="rules.toml")


def transcript(daemon: Daemon) -> list[dict[str, Any]]:
    path = daemon.home.parent / "transcript.jsonl"
    return [orjson.loads(line) for line in path.read_text().splitlines()]


def scanned(daemon: Daemon) -> dict[str, Any]:
    result = daemon.cli("evolve", "scan", "--source", "feedback", "--force", "--json")
    document: dict[str, Any] = orjson.loads(result.stdout)
    return {"code": result.returncode, **document}


def task_answer(daemon: Daemon, repo: Path, text: str) -> str:
    task_id = add(daemon, repo, text)
    assert wait_ended(daemon, task_id)["state"] == "succeeded"
    [answer] = [call["answer"] for call in transcript(daemon) if call["session_key"] == f"task:{task_id}"]
    return str(answer)


def test_the_readme_rules_leave_the_scan_and_a_task_alone_and_opted_in_rules_take_them(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(README_RULES)
    daemon = daemons.start(home, env={"ENACT_SCRIPTED_TRANSCRIPT": str(home.parent / "transcript.jsonl"),
                                      "ENACT_TASKS_CONFINEMENT": "off"})
    for said in SAID[:2]:
        daemon.request(Send(text=said))
    [scan] = scanned(daemon)["scans"]
    assert (scan["outcome"], scan["records"]) == ("completed", 2)
    repo = make_repo(tmp_path / "repo")
    assert task_answer(daemon, repo, "remember the answer") == "(scripted runtime) You said: remember the answer"

    (home / "scripted.toml").write_text(OPTED_IN + README_RULES)
    daemon.request(Send(text="remember I like black tea"))
    refused = scanned(daemon)
    assert refused["code"] == 1 and "not a JSON array" in refused["error"], refused
    assert task_answer(daemon, repo, "remember the question") == "task rule: the question"
