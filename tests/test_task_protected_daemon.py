"""What a task may change and what its doctor must run, in a running
daemon: the scripted runtime changes real git repositories made by the
test, their doctor is real pytest, and the owner unlocks through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from task_repos import git, make_repo
from unprivileged import WHO, place_for

from enact.tasks import task_branches

from conftest import Daemon, DaemonFactory, wait_for

UNCONFINED = {"ENACT_TASKS_CONFINEMENT": "off"}
SECOND = "def test_second():\n    assert True\n"
SKIP_ALL = ("import pytest\n\n\ndef pytest_collection_modifyitems(items):\n    for item in items:\n"
            "        item.add_marker(pytest.mark.skip(reason='later'))\n")
PYPROJECT = '[project]\nname = "lib"\nversion = "1"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'


def task_rules(*texts: str) -> str:
    """Rules for a task's calls: each opts into the task purpose (a rule of no purpose answers only
    the owner's chat messages) and matches the task's request, or a repair's ``repair N/M: …``."""
    return "".join(f'[[rule]]\npurpose = "task"\n{text.strip()}\n\n' for text in texts)


def start(daemons: DaemonFactory, *texts: str, env: dict[str, str] | None = None) -> Daemon:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(task_rules(*texts))
    return daemons.start(home, env=env)


def rule(match: str, script: str) -> str:
    """A scripted-runtime rule running ``script`` (JSON strings are TOML strings)."""
    return f'match = {json.dumps(match)}\nrun = {json.dumps(["sh", "-c", script])}\nreply = "done"'


def run_task(daemon: Daemon, repo: Path, text: str, *extra: str) -> dict[str, Any]:
    added = daemon.cli_json("task", "add", "--repo", str(repo), "--repairs", "0", "--json", *extra, text)
    task_id = str(added["id"])
    wait_for(lambda: daemon.task_state(int(task_id)) in ("succeeded", "failed"),
             timeout=90, what=f"task {task_id} to end")
    shown: dict[str, Any] = daemon.cli_json("task", "show", task_id, "--json")
    return shown


@pytest.mark.parametrize("who", WHO)
def test_a_request_saying_not_to_change_tests_unlocks_nothing_and_the_owners_allow_path_does(
        daemons: DaemonFactory, tmp_path: Path, require_binary: object, who: str) -> None:
    require_binary("bwrap")  # type: ignore[operator]
    with place_for(who, daemons, tmp_path) as place:
        repo = make_repo(place.base / "repo", doctor=f"{place.pytest} --color=yes")  # a doctor that insists on colour
        (place.home / "scripted.toml").write_text(task_rules(rule("answer", "echo '# reworded' >> tests/test_lib.py")))
        daemon = place.start(daemons)
        unlocked_only_by_the_owner(daemon, repo)


def unlocked_only_by_the_owner(daemon: Daemon, repo: Path) -> None:
    request = "Keep the answer as it is. Do not change anything under tests/"
    refused = run_task(daemon, repo, request)
    assert refused["state"] == "failed", refused
    assert "protected paths changed without the owner's leave" in refused["summary"]
    assert "tests/test_lib.py" in refused["summary"]
    allowed = run_task(daemon, repo, request, "--allow-path", "tests/")
    assert (allowed["state"], allowed["confined"]) == ("succeeded", True), \
        daemon.cli("task", "log", str(allowed["id"])).stdout
    assert allowed["allow_paths"] == ["tests/"] and allowed["allow_fewer_tests"] is False
    assert "unlocked  tests/" in daemon.cli("task", "show", str(allowed["id"])).stdout
    shown = daemon.cli("review", "show", str(allowed["review"])).stdout
    assert "unlocked  tests/" in shown
    assert "1 passed; base: 1 passed" in shown
    assert "protected paths changed with the owner's leave: tests/test_lib.py" in shown
    log = daemon.cli("task", "log", str(allowed["id"])).stdout
    assert "1 passed" in log and "\x1b" not in log
    landed = daemon.cli("review", "land", str(allowed["review"]), "--json")  # the target's doctor, confined
    assert landed.returncode == 0, landed.stdout + landed.stderr
    assert "1 passed; base: 1 passed" in json.loads(landed.stdout)["note"]
    assert (repo / "tests" / "test_lib.py").read_text().endswith("# reworded\n")


def test_changes_to_conftest_pytest_ini_or_the_pytest_section_of_pyproject_fail_validation(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"pyproject.toml": PYPROJECT})
    daemon = start(daemons, rule("conftest", "mkdir -p src && echo 'x = 1' > src/conftest.py"),
                   rule("ini file", "printf '[pytest]\\naddopts = -k nothing\\n' > pytest.ini"),
                   rule("pyproject", """sed -i 's/addopts = "-q"/addopts = "-k nothing"/' pyproject.toml"""),
                   rule("version", """sed -i 's/version = "1"/version = "2"/' pyproject.toml"""),
                   env=UNCONFINED)
    for text, path in (("add a conftest", "conftest.py"), ("add an ini file", "pytest.ini"),
                       ("tune pyproject", "pyproject.toml")):
        shown = run_task(daemon, repo, text)
        assert shown["state"] == "failed", shown
        assert "protected paths changed without the owner's leave" in shown["summary"] and path in shown["summary"]
    bumped = run_task(daemon, repo, "bump the version")
    assert bumped["state"] == "succeeded", bumped  # pyproject.toml outside its test sections is the task's


def test_a_conftest_skipping_every_test_fails_naming_the_tests_even_when_conftest_is_unlocked(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, rule("speed", f"cat > conftest.py <<'EOF'\n{SKIP_ALL}EOF"), env=UNCONFINED)
    shown = run_task(daemon, repo, "speed up the tests", "--allow-path", "conftest.py")
    assert shown["state"] == "failed", shown
    assert "1 skipped; base: 1 passed" in shown["summary"]
    assert "1 skipped now: tests.test_lib::test_answer" in shown["summary"]
    assert daemon.cli_json("review", "list", "--json") == []


def test_a_change_deleting_a_test_file_fails_for_running_fewer_tests_unless_the_owner_allowed_it(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"tests/test_second.py": SECOND})
    daemon = start(daemons, rule("tidy", "rm tests/test_second.py"), env=UNCONFINED)
    shown = run_task(daemon, repo, "tidy the tests", "--allow-path", "tests/")
    assert shown["state"] == "failed", shown
    assert "1 passed; base: 2 passed" in shown["summary"]
    assert "1 not run at all: tests.test_second::test_second" in shown["summary"]
    allowed = run_task(daemon, repo, "tidy the tests", "--allow-path", "tests/", "--allow-fewer-tests")
    assert allowed["state"] == "succeeded", allowed
    assert "which the owner allowed" in daemon.cli("review", "show", str(allowed["review"])).stdout
    landed = daemon.cli("review", "land", str(allowed["review"]), "--json")  # the owner's leave holds at the land
    assert landed.returncode == 0, landed.stdout
    assert "1 passed; base: 2 passed" in json.loads(landed.stdout)["note"]
    assert not (repo / "tests" / "test_second.py").exists()
    base_runs = sum(daemon.cli("task", "log", str(task["id"])).stdout.count("first on the base")
                    for task in (shown, allowed))
    assert base_runs == 1  # one base commit, one doctor command: measured once


def test_land_runs_the_targets_doctor_never_the_one_the_task_wrote_into_enact_toml(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "the-tasks-doctor-ran"
    own = f'[doctor]\ncommand = "touch {marker}; true"\n'
    daemon = start(daemons, rule("doctor", f"cat > .enact.toml <<'EOF'\n{own}EOF"), env=UNCONFINED)
    shown = run_task(daemon, repo, "make the doctor quicker", "--allow-path", ".enact.toml")
    assert shown["state"] == "succeeded", shown
    assert "touch" in git(repo, "show", f"{task_branches.branch_of(daemon.home, shown['id'])}:.enact.toml")
    landed = daemon.cli("review", "land", str(shown["review"]), "--json")
    assert landed.returncode == 0, landed.stdout
    assert "1 passed; base: 1 passed" in json.loads(landed.stdout)["note"]
    assert not marker.exists()  # neither at validation nor at the land


def test_land_refuses_a_branch_that_runs_fewer_of_the_targets_tests(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"tests/test_second.py": SECOND})
    base = git(repo, "rev-parse", "main").strip()
    git(repo, "checkout", "-q", "-b", "enact/task-1")
    git(repo, "rm", "-q", "tests/test_second.py")
    git(repo, "commit", "-q", "-m", "fewer tests")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    daemon = start(daemons, env=UNCONFINED)
    body = {"task_id": 1, "repo": str(repo), "branch": "enact/task-1", "base": base, "head": head}
    opened = daemon.cli("call", "--json", "reviews.Open", json.dumps(body))
    assert opened.returncode == 0, opened.stdout + opened.stderr
    refused = daemon.cli("review", "land", "1", "--json")
    assert refused.returncode == 2 and json.loads(refused.stdout)["code"] == "doctor-failed", refused.stdout
    assert "not run at all: tests.test_second::test_second" in json.loads(refused.stdout)["error"]
    assert git(repo, "rev-parse", "main").strip() == base
