"""Evolution in a running daemon, through the CLI: a complaint in chat
becomes a signal, a candidate and a proposal; the owner approves it into a
task whose review, once landed, adopts the candidate. The scripted runtime
answers the scan, synthesis and curation calls (matched by their prompts'
headings) and does the task's work in a real git repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from task_repos import git, make_repo

from enact.evolution.candidates import Candidate, CandidateState, Draft, candidate_id
from enact.evolution.curator_actor import CANDIDATES, DATABASES
from enact.storage import RecordTable, Storage

from conftest import Daemon, DaemonFactory, wait_for

COMPLAINT = "your replies are far too long, keep them short please"
TITLE = "Keep replies short"


def reply_rule(purpose: str, match: str, answer: object) -> str:
    """A rule answering an isolated call of ``purpose`` whose prompt matches,
    with ``answer`` as JSON; the string "GROUP" becomes what the match's
    first group found."""
    text = orjson.dumps(answer).decode().replace('"GROUP"', '"\\1"')
    return f"[[rule]]\npurpose = '{purpose}'\nmatch = '{match}'\nreply = '{text}'\n\n"


SCAN = reply_rule('scan', r'(?s)^enact evidence scan: feedback.*?"ref":"(turn:\d+)"', [{
    "observation": "The owner finds the replies too long", "evidence_type": "complaint",
    "affected_area": "conversation", "desired_outcome": "short replies", "confidence": 0.9, "explicit": True,
    "evidence_refs": ["GROUP"]}])
SYNTHESIS = reply_rule('curation', r'(?s)^enact evolution: candidate synthesis.*?"id":"(sig-[0-9a-f]{12})"', [{
    "evidence_ids": ["GROUP"], "title": TITLE, "rationale": "The owner said the replies are too long",
    "proposed_change": "Add a note about brevity to lib.py", "expected_benefit": "Less to read",
    "risk": "Terse answers", "test_plan": "The existing tests still pass"}])
EXPERIENCE_SCAN = reply_rule('scan', r'(?s)^enact evidence scan: experience.*?"ref":"(task:\d+@\d+)"', [{
    "observation": "A task failed the repository checks and no repair fixed it", "evidence_type": "failure",
    "affected_area": "tasks", "desired_outcome": "tasks pass their checks", "confidence": 0.7, "explicit": False,
    "evidence_refs": ["GROUP"]}])
CURATION = reply_rule('curation', r'(?s)^enact evolution: curation.*?"id":"(cand-[0-9a-f]{12})"', {
    "recommended": "GROUP", "reason": "the owner asked for it in so many words", "guidance": "touch only lib.py",
    "removals": []})

TASK = """
[[rule]]
purpose = "task"
match = "Improve enact: Keep replies short"
run = ["sh", "-c", "echo '# keep replies short' >> lib.py"]
reply = "done"
"""


def model_action(action: str, text: str) -> str:
    return f'[[rule]]\nmatch = "^please {action}"\naction = "evolve.{action}"\nargs = {{ text = "{text}" }}\n' \
           'then = "The curator said: {receipt}"\n'


def start(daemons: DaemonFactory, repo: Path, rules: str) -> Daemon:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(rules)
    (home / "config.toml").write_text('[chat]\nallowed_conversations = ["local:owner"]\n')
    return daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": "off", "ENACT_TASKS_DEFAULT_REPO": str(repo)})


def complain_and_scan(daemon: Daemon) -> str:
    sent = daemon.cli_json("send", "--conversation", "owner", "--json", COMPLAINT)
    assert "scripted" in sent["reply"], sent
    wait_for(lambda: daemon.cli_json("turns", "--json"), what="the turn logged")
    scanned = daemon.cli_json("evolve", "scan", "--source", "feedback", "--json")
    [scan] = scanned["scans"] if isinstance(scanned, dict) else scanned
    assert scan["outcome"] == "completed", scanned
    [signal] = daemon.cli_json("evolve", "signals", "--json")["signals"]
    assert signal["state"] == "active" and signal["source"] == "feedback"
    signal_id: str = signal["id"]
    return signal_id


def candidate(daemon: Daemon, cid: str) -> dict[str, Any]:
    shown: dict[str, Any] = daemon.cli_json("evolve", "show", cid, "--json")
    return shown


def test_a_complaint_becomes_a_candidate_the_owner_approves_and_a_landed_review_adopts(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, repo, SCAN + SYNTHESIS + CURATION + TASK)
    signal_id = complain_and_scan(daemon)

    proposed = daemon.cli_json("evolve", "propose", "--json")
    cid = candidate_id("feedback", [signal_id], TITLE)
    assert proposed["synthesised"] == [cid] and proposed["candidate_id"] == cid, proposed
    assert proposed["fallback"] is False and proposed["state"] == "open"
    assert proposed["guidance"] == "touch only lib.py"
    [listed] = daemon.cli_json("evolve", "candidates", "--json")
    assert (listed["id"], listed["state"], listed["evidence_ids"]) == (cid, "active", [signal_id])
    assert daemon.cli("evolve", "candidates").stdout.startswith(cid)
    [linked] = daemon.cli_json("evolve", "signals", "--json")["signals"]
    assert (linked["state"], linked["candidate_id"]) == ("linked", cid)

    again = daemon.cli_json("evolve", "propose", "--json")
    assert again["synthesised"] == [] and again["candidate_id"] == cid
    history = daemon.cli_json("evolve", "history", "--json")
    states = {p["id"]: p["state"] for p in history["proposals"]}
    assert states == {proposed["id"]: "superseded", again["id"]: "open"}

    # A model may look, but not decide.
    (daemon.home / "scripted.toml").write_text(model_action("approve", cid) + model_action("remove", f"{cid} no")
                                               + SCAN + SYNTHESIS + CURATION + TASK)
    for action in ("approve", "remove"):
        asked = daemon.cli_json("send", "--conversation", "owner", "--json", f"please {action} it")
        assert f"evolve.{action} needs a human; a model action cannot run it" in asked["reply"], asked
    assert candidate(daemon, cid)["candidate"]["state"] == "active"

    approved = daemon.cli_json("evolve", "approve", cid, "--repo", str(repo), "--json")
    task_id = approved["task_id"]
    assert approved["existing"] is False
    assert daemon.cli_json("evolve", "approve", cid, "--json") == {**approved, "existing": True}
    task = daemon.cli_json("task", "show", str(task_id), "--json")
    assert task["request"].endswith("Open a review; never merge.")
    assert "Rationale: The owner said the replies are too long" in task["brief"] and signal_id in task["brief"]
    wait_for(lambda: candidate(daemon, cid)["candidate"]["review_id"], timeout=60, what="the task's review")
    shown = candidate(daemon, cid)
    assert shown["candidate"]["state"] == "approved" and shown["candidate"]["task_id"] == task_id
    review_id = shown["candidate"]["review_id"]
    assert daemon.cli_json("task", "show", str(task_id), "--json")["state"] == "succeeded"

    landed = daemon.cli("review", "land", review_id)
    assert landed.returncode == 0, landed.stderr
    assert "# keep replies short" in (repo / "lib.py").read_text()
    wait_for(lambda: candidate(daemon, cid)["candidate"]["state"] == "adopted", what="the candidate adopted")
    shown = candidate(daemon, cid)
    assert [s["state"] for s in shown["signals"]] == ["resolved"]
    kinds = [event["kind"] for event in shown["audit"]]
    assert kinds[:4] == ["adopted", "review-recorded", "approved", "proposed"], kinds
    assert "adopted" in daemon.cli("evolve", "history").stdout
    assert git(repo, "log", "-1", "--format=%s").startswith(("Land review", "enact task"))


def test_a_crash_between_a_candidates_commit_and_its_link_is_repaired_by_the_next_proposal(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, repo, SCAN + SYNTHESIS + CURATION)
    signal_id = complain_and_scan(daemon)
    assert daemon.terminate() == 0

    # What a crash right after the candidate's commit leaves: the candidate
    # stored, its signal still active and unlinked.
    cid = candidate_id("feedback", [signal_id], TITLE)
    storage = Storage(daemon.home / "state")
    try:
        store = storage.grant("curator", DATABASES)
        table = RecordTable(store.table(CANDIDATES), Candidate)
        draft = Draft(source="feedback", evidence_ids=(signal_id,), title=TITLE, rationale="r",
                      proposed_change="Add a note about brevity to lib.py", expected_benefit="b", risk="k",
                      test_plan="t")
        stored = Candidate(id=cid, draft=draft, state=CandidateState.ACTIVE, score=0.5, created_at=1.0,
                           updated_at=1.0)
        store.write(lambda txn: table.put(txn, cid.encode(), stored), fenced=False)
    finally:
        storage.close()

    daemon = daemons.start(daemon.home, env={"ENACT_TASKS_CONFINEMENT": "off"})
    proposed = daemon.cli_json("evolve", "propose", "--json")
    assert proposed["synthesised"] == [] and proposed["candidate_id"] == cid, proposed
    [signal] = daemon.cli_json("evolve", "signals", "--json")["signals"]
    assert (signal["state"], signal["candidate_id"]) == ("linked", cid)
    assert [c["id"] for c in daemon.cli_json("evolve", "candidates", "--json")] == [cid]
    audit = candidate(daemon, cid)["audit"]
    assert any(e["kind"] == "linked" and "repaired" in e["detail"] for e in audit), audit


def test_a_bad_synthesis_or_curation_answer_leaves_signals_active_and_falls_back(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    unsafe = SYNTHESIS.replace("Add a note about brevity to lib.py", "Deploy the change to every host")
    daemon = start(daemons, repo, SCAN + unsafe)
    signal_id = complain_and_scan(daemon)

    rejected = daemon.cli_json("evolve", "propose", "--json")
    assert rejected["synthesised"] == [] and rejected["candidate_id"] is None
    assert "touches deploying" in rejected["synthesis_note"], rejected
    assert daemon.cli_json("evolve", "signals", "--json")["signals"][0]["state"] == "active"
    assert daemon.cli_json("evolve", "candidates", "--json") == []

    prose = ('\n[[rule]]\npurpose = "curation"\nmatch = "^enact evolution: curation"\n'
             'reply = "I would pick the first one."\n')
    (daemon.home / "scripted.toml").write_text(SCAN + SYNTHESIS + prose)
    fallback = daemon.cli_json("evolve", "propose", "--json")
    cid = candidate_id("feedback", [signal_id], TITLE)
    assert fallback["candidate_id"] == cid and fallback["fallback"] is True
    assert "not one JSON object" in fallback["reason"], fallback
    refused = daemon.cli("evolve", "remove", cid, "--reason", "no", "--suggestion", f"{fallback['id']}-r1", "--json")
    assert refused.returncode == 2 and "no removal suggestion" in refused.stdout
    assert orjson.loads(refused.stdout)["status"] == "refused"
    removed = daemon.cli_json("evolve", "remove", cid, "--reason", "not now", "--json")
    assert removed["state"] == "removed"
    proposals = daemon.cli_json("evolve", "history", "--json")["proposals"]
    assert proposals[0]["id"] == fallback["id"] and proposals[0]["state"] == "closed"
    assert daemon.cli_json("evolve", "candidates", "--state", "removed", "--json")[0]["id"] == cid


def test_evolve_history_is_one_list_newest_first_scans_among_the_curators_events(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    daemon = start(daemons, make_repo(tmp_path / "repo"), SCAN + SYNTHESIS + CURATION)
    complain_and_scan(daemon)
    daemon.cli_json("evolve", "propose", "--json")  # the curator's events, after the first scan
    daemon.cli_json("send", "--conversation", "owner", "--json", "still far too long, shorter please")
    second = daemon.cli_json("evolve", "scan", "--source", "feedback", "--json")["scans"]
    assert [scan["outcome"] for scan in second] == ["completed"]

    history = daemon.cli_json("evolve", "history", "--json")
    timeline = history["timeline"]
    kinds = ["scan" if "scan" in entry else entry["event"]["kind"] for entry in timeline]
    assert kinds[0] == "scan" and kinds[-1] == "scan" and {"synthesised", "proposed"} <= set(kinds[1:-1])
    assert [entry["at"] for entry in timeline] == sorted((entry["at"] for entry in timeline), reverse=True)
    assert len(timeline) == len(history["events"]) + len(history["scans"])
    # The text is the same list, in the same order, one line each.
    lines = daemon.cli("evolve", "history").stdout.splitlines()
    assert [line.split()[2] for line in lines] == kinds  # "<date> <time> scan completed ..." or the event's kind
    assert lines == sorted(lines, key=lambda line: line[:19], reverse=True)
    # --limit keeps the newest of both.
    newest = daemon.cli_json("evolve", "history", "--limit", "2", "--json")["timeline"]
    assert newest == timeline[:2]


def test_a_failed_task_becomes_an_experience_signal_and_a_candidate(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", doctor="false")
    tidy = ('[[rule]]\npurpose = "task"\nmatch = "tidy the answer"\n'
            'run = ["sh", "-c", "echo x >> lib.py"]\nreply = "done"\n\n')
    daemon = start(daemons, repo, EXPERIENCE_SCAN + SYNTHESIS + CURATION + tidy)
    added = daemon.cli_json("task", "add", "--repo", str(repo), "--repairs", "0", "--json", "tidy the answer")
    wait_for(lambda: daemon.task_state(int(added["id"])) == "failed",
             timeout=60, what="the task to fail its checks")
    scanned = daemon.cli_json("evolve", "scan", "--source", "experience", "--json")
    assert [scan["outcome"] for scan in scanned["scans"]] == ["completed"], scanned
    [signal] = daemon.cli_json("evolve", "signals", "--json")["signals"]
    assert signal["source"] == "experience" and signal["evidence_refs"][0].startswith(f"task:{added['id']}@")

    proposed = daemon.cli_json("evolve", "propose", "--json")
    cid = candidate_id("experience", [signal["id"]], TITLE)
    assert proposed["candidate_id"] == cid and proposed["fallback"] is False, proposed
    [listed] = daemon.cli_json("evolve", "candidates", "--json")
    assert (listed["id"], listed["source"]) == (cid, "experience")
    assert f"task:{added['id']}" in daemon.cli("evolve", "show", cid).stdout


def test_a_retry_of_a_failed_evolve_task_carries_the_candidate_to_adoption(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    failing = tmp_path / "checks-fail"
    failing.write_text("")
    repo = make_repo(tmp_path / "repo", doctor=f"test ! -e {failing}")
    daemon = start(daemons, repo, SCAN + SYNTHESIS + CURATION + TASK)
    complain_and_scan(daemon)
    cid = daemon.cli_json("evolve", "propose", "--json")["candidate_id"]
    task_id = daemon.cli_json("evolve", "approve", cid, "--repo", str(repo), "--json")["task_id"]
    wait_for(lambda: daemon.task_state(int(task_id)) == "failed",
             timeout=90, what="the approved task to fail its checks")

    failing.unlink()
    retried = daemon.cli("task", "retry", str(task_id))
    assert retried.returncode == 0, retried.stderr
    wait_for(lambda: candidate(daemon, cid)["candidate"]["review_id"], timeout=60, what="the retry's review")
    shown = candidate(daemon, cid)["candidate"]
    assert shown["state"] == "approved" and shown["task_id"] == task_id
    landed = daemon.cli("review", "land", shown["review_id"])
    assert landed.returncode == 0, landed.stderr
    wait_for(lambda: candidate(daemon, cid)["candidate"]["state"] == "adopted", what="the candidate adopted")
