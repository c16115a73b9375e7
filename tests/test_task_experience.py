"""Experience records: a task that succeeds with a change leaves one (what
was asked, what changed, the doctor's outcome, the repairs it took), kept by
the task queue, and the evidence scanner reads it as experience."""

from __future__ import annotations

from pathlib import Path

import orjson
from task_repos import make_repo

from enact.messages.tasks import ChangedSince, ChangedTasks
from enact.tasks.records import MAX_EXPERIENCE_FILES, MAX_EXPERIENCE_REQUEST, Experience

from conftest import Daemon, DaemonFactory, wait_for

RULES = """
[[rule]]
purpose = "task"
match = "^repair 1/2"
run = ["sed", "-i", "s/return 41/return 42/", "lib.py"]
reply = "fixed"

[[rule]]
purpose = "task"
match = "tune"
run = ["sed", "-i", "s/return 42/return 41  # tuned/", "lib.py"]
reply = "tuned"

[[rule]]
purpose = "scan"
match = "enact evidence scan: experience"
reply = "[]"
"""


def start(daemons: DaemonFactory, home: Path) -> Daemon:
    return daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": "off",
                                    "ENACT_SCRIPTED_TRANSCRIPT": str(home.parent / "transcript.jsonl")})


def experience_of(daemon: Daemon, task_id: int) -> Experience | None:
    page = daemon.request(ChangedSince(after=0, limit=100))
    assert isinstance(page, ChangedTasks)
    return next(snapshot.experience for snapshot in page.tasks if snapshot.task.id == task_id)


def scan_prompts(home: Path) -> list[str]:
    transcript = home.parent / "transcript.jsonl"
    calls = [orjson.loads(line) for line in transcript.read_text().splitlines()] if transcript.exists() else []
    return [call["prompt"] for call in calls if call["prompt"].startswith("enact evidence scan")]


def test_a_task_that_succeeds_leaves_an_experience_record_the_scanner_reads(daemons: DaemonFactory,
                                                                            tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = daemons.new_home()
    (home / "scripted.toml").write_text(RULES)
    daemon = start(daemons, home)
    task_id = int(daemon.cli_json("task", "add", "--repo", str(repo), "--json", "tune the answer")["id"])
    wait_for(lambda: daemon.task_state(int(task_id)) not in ("queued", "running"),
             timeout=60, what="the task to end")
    shown = daemon.cli_json("task", "show", str(task_id), "--json")
    assert shown["state"] == "succeeded", shown["summary"]
    assert daemon.terminate() == 0

    again = start(daemons, home)  # durable: the record outlives the daemon that kept it
    experience = experience_of(again, task_id)
    assert experience is not None
    assert (experience.task_id, experience.request, experience.files, experience.files_changed) == (
        task_id, "tune the answer", ("lib.py",), 1)
    assert "1 file changed" in experience.diffstat and "lib.py" in experience.diffstat
    assert experience.repairs == 1 and experience.attempt == 1 and experience.review_id == shown["review_id"]
    assert experience.tests_passed >= 1 and experience.tests_failed == 0 and "passed" in experience.doctor

    result = again.cli("evolve", "scan", "--source", "experience", "--json")
    assert result.returncode == 0, result.stderr
    (done,) = orjson.loads(result.stdout)["scans"]
    assert done["outcome"] == "completed" and done["records"] == 2  # the task and its experience
    (prompt,) = scan_prompts(home)
    [record] = [orjson.loads(line) for line in prompt.splitlines() if line.startswith('{"ref":"experience:')]
    assert record["ref"] == f"experience:{task_id}" and record["request"] == "tune the answer"
    assert record["files"] == ["lib.py"] and record["repairs"] == 1 and record["review"] == shown["review_id"]
    assert record["tests"]["failed"] == 0 and "1 file changed" in record["diffstat"]


def test_a_task_that_changes_nothing_leaves_no_experience_record(daemons: DaemonFactory,
                                                                          tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = daemons.new_home()
    (home / "scripted.toml").write_text('[[rule]]\npurpose = "task"\nmatch = "look"\nreply = "nothing to do"\n')
    daemon = start(daemons, home)
    task_id = int(daemon.cli_json("task", "add", "--repo", str(repo), "--json", "look around")["id"])
    wait_for(lambda: daemon.task_state(int(task_id)) == "succeeded",
             timeout=60, what="the task to succeed")
    assert experience_of(daemon, task_id) is None


def test_an_experience_record_is_bounded_whoever_made_it() -> None:
    made = Experience(task_id=1, request="x" * 5_000, files=tuple(f"f{n}.py" for n in range(80)),
                      diffstat="y" * 10_000).bounded()
    assert len(made.request) == MAX_EXPERIENCE_REQUEST and len(made.files) == MAX_EXPERIENCE_FILES
    assert made.files_changed == 80 and len(made.diffstat) == 2_000
