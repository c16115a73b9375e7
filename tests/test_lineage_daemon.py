"""The lineage inbox in a running daemon, through the CLI: a parent
repository made here gains commits; a scan assesses them (the scripted
runtime answers the ``lineage`` calls), the inbox lists them, approval yields
a task and a review whose land marks the change adopted; a scan with nothing
new calls no model; a rewritten parent and a malformed reply are reported in
one line and record nothing; a merge with its commits is one change, assessed
once, and a change whose adaptation the guard refuses is marked refused
(reason shown) without failing the scan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from task_repos import git, make_repo

from conftest import Daemon, DaemonFactory, wait_for

ASSESSMENT = {"summary": "The parent keeps its replies short", "behavioural_change": "shorter replies",
              "rationale": "its owner asked for brevity", "adaptation": "Add a note about brevity to lib.py",
              "risks": "terse answers", "files": ["lib.py"], "tests": "the existing tests still pass",
              "confidence": 0.8}
TASK = """
[[rule]]
purpose = "task"
match = "Improve enact: From the parent"
run = ["sh", "-c", "echo '# keep replies short' >> lib.py"]
reply = "done"
"""


def lineage_rule(answer: object) -> str:
    return f"[[rule]]\npurpose = 'lineage'\nmatch = '^enact lineage assessment'\n" \
           f"reply = '''{orjson.dumps(answer).decode()}'''\n\n"


def parent_commit(parent: Path, name: str, text: str) -> str:
    (parent / name).write_text(text)
    git(parent, "add", name)
    git(parent, "commit", "-q", "-m", f"parent: {name}")
    return git(parent, "rev-parse", "HEAD").strip()


def start(daemons: DaemonFactory, tmp_path: Path, rules: str) -> tuple[Daemon, Path, Path, Path]:
    parent = make_repo(tmp_path / "parent")
    since = git(parent, "rev-parse", "HEAD").strip()
    repo = make_repo(tmp_path / "repo")
    home = daemons.new_home()
    transcript = tmp_path / "transcript.jsonl"
    (home / "scripted.toml").write_text(rules)
    (home / "config.toml").write_text(
        f'[chat]\nallowed_conversations = ["local:owner"]\n[scripted]\ntranscript = "{transcript}"\n'
        f'[lineage]\nparent = "{parent}"\nbranch = "{git(parent, "branch", "--show-current").strip()}"\n'
        f'since = "{since}"\n')
    daemon = daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": "off", "ENACT_TASKS_DEFAULT_REPO": str(repo)})
    return daemon, parent, repo, transcript


def lineage_calls(transcript: Path) -> int:
    lines = transcript.read_text().splitlines() if transcript.exists() else []
    return sum(call["prompt"].startswith("enact lineage assessment") for call in map(orjson.loads, lines))


def entries(daemon: Daemon, *state: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = daemon.cli_json("lineage", "list", *state, "--json")
    return listed


def test_a_parent_change_is_assessed_listed_approved_landed_and_adopted(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    daemon, parent, repo, transcript = start(daemons, tmp_path, lineage_rule(ASSESSMENT) + TASK)
    commit = parent_commit(parent, "brevity.txt", "keep it short\n")

    scanned = daemon.cli_json("lineage", "scan", "--json")
    assert scanned["outcome"] == "assessed" and scanned["entries"] == [f"lin-{commit[:12]}"], scanned
    assert lineage_calls(transcript) == 1
    [entry] = entries(daemon)
    assert entry["state"] == "linked" and entry["commit"] == commit
    assert entry["assessment"]["summary"] == ASSESSMENT["summary"]
    cid = entry["candidate_id"]
    shown = daemon.cli_json("evolve", "show", cid, "--json")
    assert shown["candidate"]["source"] == "lineage" and shown["candidate"]["state"] == "active"

    again = daemon.cli_json("lineage", "scan", "--json")
    assert again["outcome"] == "nothing-new" and lineage_calls(transcript) == 1, again
    # Counted in the spending under its own purpose.
    spent = {row["purpose"]: row["calls"] for row in daemon.cli_json("status", "--json")["spending"]}
    assert spent.get("lineage") == 1, spent

    approved = daemon.cli_json("evolve", "approve", cid, "--repo", str(repo), "--json")
    brief = daemon.cli_json("task", "show", str(approved["task_id"]), "--json")["brief"]
    assert commit[:12] in brief and "brevity.txt" in brief and ASSESSMENT["summary"] in brief
    wait_for(lambda: daemon.cli_json("evolve", "show", cid, "--json")["candidate"]["review_id"], timeout=60,
             what="the task's review")
    review_id = daemon.cli_json("evolve", "show", cid, "--json")["candidate"]["review_id"]
    landed = daemon.cli("review", "land", review_id)
    assert landed.returncode == 0, landed.stderr
    wait_for(lambda: entries(daemon, "--state", "adopted"), what="the lineage entry adopted")
    assert daemon.cli_json("lineage", "show", entry["id"], "--json")["state"] == "adopted"


def test_a_malformed_reply_records_nothing_and_a_rewritten_parent_waits_for_a_reset(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    daemon, parent, _, transcript = start(daemons, tmp_path, lineage_rule({"summary": "only this"}))
    parent_commit(parent, "one.txt", "1\n")

    failed = daemon.cli("lineage", "scan")
    assert failed.returncode != 0 and "refused" in failed.stderr and "lacks" in failed.stderr, failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
    assert entries(daemon) == [] and lineage_calls(transcript) == 1

    # The parent's history is rewritten: the revision taken in is gone from its branch.
    git(parent, "reset", "-q", "--hard", "HEAD~1")
    rewritten_head = parent_commit(parent, "two.txt", "2\n")
    (daemon.home / "scripted.toml").write_text(lineage_rule(ASSESSMENT))
    first_since = daemon.cli("lineage", "scan")
    assert first_since.returncode == 0, first_since.stderr  # since is still the root: two.txt is new

    git(parent, "commit", "-q", "--amend", "-m", "parent: two, reworded")
    rewritten = daemon.cli("lineage", "scan")
    assert rewritten.returncode != 0 and "rewritten" in rewritten.stderr, rewritten.stderr
    calls = lineage_calls(transcript)
    reset = daemon.cli("lineage", "reset", git(parent, "rev-parse", "HEAD").strip())
    assert reset.returncode == 0, reset.stderr
    assert daemon.cli_json("lineage", "scan", "--json")["outcome"] == "nothing-new"
    assert lineage_calls(transcript) == calls
    assert [e["commit"] for e in entries(daemon)] == [rewritten_head]  # the reworded one was not assessed

    ignored = daemon.cli("lineage", "ignore", f"lin-{rewritten_head[:12]}", "not", "for", "us")
    assert ignored.returncode == 0, ignored.stderr
    [entry] = entries(daemon, "--state", "ignored")
    assert entry["reason"] == "not for us"


def test_a_merge_is_one_change_assessed_once_and_a_refused_change_marks_only_itself(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    merge = {**ASSESSMENT, "summary": "The parent takes in its helpers branch",
             "adaptation": "Take in the parent's merge of the helpers; merge duplicate notes when saving them"}
    refused = {**ASSESSMENT, "summary": "The parent ships faster",
               "adaptation": "merge the task branch into main automatically after each run"}
    rules = (f"[[rule]]\npurpose = 'lineage'\nmatch = '(?s)^enact lineage assessment.*ship.txt'\n"
             f"reply = '''{orjson.dumps(refused).decode()}'''\n\n" + lineage_rule(merge))
    daemon, parent, _, transcript = start(daemons, tmp_path, rules)
    main = git(parent, "branch", "--show-current").strip()
    git(parent, "checkout", "-q", "-b", "helpers")
    first, second = parent_commit(parent, "a.txt", "a\n"), parent_commit(parent, "b.txt", "b\n")
    git(parent, "checkout", "-q", main)
    git(parent, "merge", "-q", "--no-ff", "-m", "parent: merge helpers", "helpers")
    merged = git(parent, "rev-parse", "HEAD").strip()
    shipped = parent_commit(parent, "ship.txt", "ship\n")

    scanned = daemon.cli_json("lineage", "scan", "--json")  # exits 0: a refused change fails no scan
    assert scanned["outcome"] == "assessed", scanned
    assert scanned["entries"] == [f"lin-{merged[:12]}", f"lin-{shipped[:12]}"]
    assert scanned["refused"] == [f"lin-{shipped[:12]}"] and scanned["revision"] == shipped
    # The merge and the two commits it brought in are one change, assessed in one call.
    assert lineage_calls(transcript) == 2
    prompts = [orjson.loads(line)["prompt"] for line in transcript.read_text().splitlines()]
    assert "a.txt" in prompts[0] and "b.txt" in prompts[0] and "ship.txt" not in prompts[0]
    linked, marked = entries(daemon)
    assert (linked["commit"], linked["merged"], linked["state"]) == (merged, [first, second], "linked")
    assert marked["state"] == "refused" and marked["candidate_id"] == ""
    assert "merging" in marked["reason"] and "human-controlled" in marked["reason"]
    assert [e["commit"] for e in entries(daemon, "--state", "refused")] == [shipped]
    shown = daemon.cli("lineage", "show", marked["id"])
    assert shown.returncode == 0 and "refused" in shown.stdout and "merging" in shown.stdout, shown.stdout
    candidates = daemon.cli_json("evolve", "candidates", "--json")
    assert [c["id"] for c in candidates if c["source"] == "lineage"] == [linked["candidate_id"]]
    assert daemon.cli_json("lineage", "scan", "--json")["outcome"] == "nothing-new"
