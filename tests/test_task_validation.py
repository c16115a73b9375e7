"""What a task may change and what its doctor must run (enact.tasks.protected,
enact.tasks.test_report, enact.tasks.validation) on real git repositories,
with real pytest as the doctor."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import lmdb
import orjson
import pytest
from task_repos import git, make_repo

from enact import components, config
from enact.cancellation import CancellationToken
from enact.messages.common import RefusalCode, Refused
from enact.messages.tasks import Found, Submit, Submitted
from enact.storage import Storage
from enact.tasks import worktrees
from enact.tasks.protected import Guards, covers
from enact.tasks.queue import TaskQueue
from enact.tasks.settings import TasksSettings
from enact.tasks.tables import DATABASES, QUEUE
from enact.tasks.test_report import ReportError, TestRun, not_run, read_junit
from enact.tasks.validation import BASELINES_DIR, Validation, remove_leftovers

PYPROJECT = '[project]\nname = "lib"\nversion = "1"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
SETUP_CFG = "[metadata]\nname = lib\n\n[tool:pytest]\naddopts = -q\n"
SECOND = "def test_second():\n    assert True\n"


def settings(home: Path) -> TasksSettings:
    home.mkdir(parents=True, exist_ok=True)
    return config.load(home, environ={}, overrides={"tasks.confinement": "off"},
                       settings=components.load().settings()).typed(TasksSettings)


def guards(repo: Path, home: Path, *allowed: str) -> Guards:
    return Validation.against(repo, git(repo, "rev-parse", "HEAD").strip(), home=home, settings=settings(home),
                              allow_paths=allowed).guards


def test_patterns_name_root_directories_file_names_at_any_depth_and_paths() -> None:
    assert covers("tests/", "tests/test_lib.py") and not covers("tests/", "src/tests/test_lib.py")
    assert covers("conftest.py", "conftest.py") and covers("conftest.py", "src/pkg/conftest.py")
    assert not covers("conftest.py", "conftest.py.bak")
    assert covers(".github/", ".github/workflows/ci.yml") and covers("./docs/api", "docs/api/index.md")
    assert covers("tests", "tests/test_lib.py")  # an owner's unlock without the trailing slash
    assert not covers("", "lib.py")


def test_default_guards_cover_tests_ci_test_run_configuration_and_the_repository_config(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    changed = ["lib.py", "tests/test_lib.py", ".enact.toml", "tests_extra.py", "pkg/conftest.py", "pytest.ini",
               "tox.ini", "noxfile.py", ".github/workflows/ci.yml", ".gitlab-ci.yml", ".ci/run", "docs/x.md"]
    verdict = guards(repo, tmp_path / "home").check(repo, changed)
    assert set(verdict.blocked) == set(changed) - {"lib.py", "tests_extra.py", "docs/x.md"}
    assert verdict.unlocked == ()


def test_the_words_of_a_request_unlock_nothing_only_the_owners_allowance_does(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    changed = ["tests/test_lib.py", "conftest.py"]
    assert guards(repo, tmp_path / "home").check(repo, changed).blocked == tuple(changed)
    verdict = guards(repo, tmp_path / "home", "tests/").check(repo, changed)
    assert (verdict.blocked, verdict.unlocked) == (("conftest.py",), ("tests/test_lib.py",))


@pytest.mark.parametrize(("name", "before", "other_section", "test_section"), [
    ("pyproject.toml", PYPROJECT, PYPROJECT.replace('version = "1"', 'version = "2"'),
     PYPROJECT.replace('"-q"', '"-q -k nothing"')),
    ("setup.cfg", SETUP_CFG, SETUP_CFG.replace("name = lib", "name = lib2"),
     SETUP_CFG.replace("-q", "-q -k nothing")),
])
def test_only_the_test_sections_of_pyproject_and_setup_cfg_are_protected(
        tmp_path: Path, name: str, before: str, other_section: str, test_section: str) -> None:
    repo = make_repo(tmp_path / "repo", files={name: before})
    check = guards(repo, tmp_path / "home")
    (repo / name).write_text(other_section)
    assert check.check(repo, [name]).blocked == ()
    (repo / name).write_text(test_section)
    assert check.check(repo, [name]).blocked == (name,)
    (repo / name).write_text("[tool.pytest.ini_options\nbroken")
    assert check.check(repo, [name]).blocked == (name,)  # what cannot be read is not judged harmless


def test_a_new_pyproject_with_a_pytest_section_is_protected(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    check = guards(repo, tmp_path / "home")
    (repo / "pyproject.toml").write_text('[project]\nname = "lib"\n')
    assert check.check(repo, ["pyproject.toml"]).blocked == ()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    assert check.check(repo, ["pyproject.toml"]).blocked == ("pyproject.toml",)


def test_the_repository_adds_its_own_guards_from_the_base_never_from_the_change(tmp_path: Path) -> None:
    own = f'[doctor]\ncommand = "{sys.executable} -m pytest -q"\n\n[tasks]\nprotected = ["schema.sql"]\n'
    repo = make_repo(tmp_path / "repo", doctor=None, files={".enact.toml": own})
    (repo / ".enact.toml").write_text('[tasks]\nprotected = []\n')  # the change's own words count for nothing
    assert guards(repo, tmp_path / "home").check(repo, ["schema.sql"]).blocked == ("schema.sql",)


def test_a_junit_report_is_read_and_one_with_a_doctype_is_refused(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    assert read_junit(report) is None
    report.write_text('<?xml version="1.0"?><testsuites><testsuite>'
                      '<testcase classname="t" name="a"/><testcase classname="t" name="b"><skipped/></testcase>'
                      '<testcase classname="t" name="c"><failure/></testcase>'
                      '<testcase classname="t" name="d"><error/></testcase></testsuite></testsuites>')
    run = read_junit(report)
    assert run == TestRun(passed=("t::a",), skipped=("t::b",), failed=("t::c",), errors=("t::d",))
    assert run.counts == "1 passed, 1 failed, 1 errors, 1 skipped"
    report.write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><testsuites>&a;</testsuites>')
    with pytest.raises(ReportError, match="DOCTYPE"):
        read_junit(report)


def test_not_run_names_the_tests_skipped_now_and_those_gone() -> None:
    base = TestRun(passed=("t::a", "t::b", "t::c"), skipped=("t::z",))
    assert not_run(base, TestRun(passed=("t::a", "t::b", "t::c", "t::new"), skipped=("t::z",))) == ""
    refusal = not_run(base, TestRun(passed=("t::a",), skipped=("t::b",)))
    assert "1 skipped now: t::b" in refusal and "1 not run at all: t::c" in refusal


def test_a_change_that_skips_the_tests_the_base_ran_fails_naming_them_and_the_base_is_measured_once(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo", files={"tests/test_second.py": SECOND})
    validation = Validation.against(repo, git(repo, "rev-parse", "HEAD").strip(), home=home, settings=settings(home),
                                    allow_paths=("conftest.py",))
    tree = worktrees.prepare(repo, home, 1)
    log = tmp_path / "task.log"
    passed = validation.check(tree.path, log_path=log, cancel=CancellationToken(), changed=[])
    assert passed.passed and passed.summary.endswith("2 passed; base: 2 passed"), passed.summary
    (tree.path / "conftest.py").write_text(
        "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='later'))\n")
    skipped = validation.check(tree.path, log_path=log, cancel=CancellationToken(), changed=["conftest.py"])
    assert not skipped.passed, skipped.summary
    assert "2 skipped; base: 2 passed" in skipped.summary
    assert "2 skipped now: tests.test_lib::test_answer, tests.test_second::test_second" in skipped.summary
    assert "protected paths changed with the owner's leave: conftest.py" in skipped.summary
    assert skipped.head_tail.startswith("the change runs fewer")
    assert log.read_text().count("first on the base") == 1


def test_with_the_owners_leave_a_change_may_run_fewer_tests(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo", files={"tests/test_second.py": SECOND})
    validation = Validation.against(repo, git(repo, "rev-parse", "HEAD").strip(), home=home, settings=settings(home),
                                    allow_paths=("tests/",), allow_fewer_tests=True)
    told = validation.rules()  # what the model is told
    assert "conftest.py" in told and "the owner unlocked: tests/" in told and "does not run" not in told
    tree = worktrees.prepare(repo, home, 1)
    (tree.path / "tests" / "test_second.py").unlink()
    result = validation.check(tree.path, log_path=tmp_path / "log", cancel=CancellationToken(),
                              changed=["tests/test_second.py"])
    assert result.passed, result.summary
    assert "1 not run at all: tests.test_second::test_second), which the owner allowed" in result.summary


def test_only_the_owners_cli_may_unlock_and_a_retry_keeps_the_unlocks(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "state")
    try:
        queue = TaskQueue(storage.grant("tasks", DATABASES), default_repo="/repo", lease_ttl_s=60)
        for origin in ("chat:local", "model-action", "scheduler"):
            refused = queue.submit(Submit(request="fix", origin=origin, allow_paths=("tests/",)), 1.0)
            assert isinstance(refused, Refused) and "only the owner's CLI" in refused.reason
            assert refused.code == RefusalCode.NOT_HUMAN
        assert isinstance(queue.submit(Submit(request="fix", origin="chat:local", allow_fewer_tests=True), 1.0),
                          Refused)
        owned = queue.submit(Submit(request="fix", origin="human-cli", allow_paths=("tests/",),
                                    allow_fewer_tests=True), 1.0)
        assert isinstance(owned, Submitted) and owned.task.allow_paths == ("tests/",)
        queue.cancel(owned.task.id, 2.0)
        retried = queue.retry(owned.task.id, "chat:local", 3.0)
        assert isinstance(retried, Submitted)
        assert (retried.task.allow_paths, retried.task.allow_fewer_tests) == (("tests/",), True)
    finally:
        storage.close()


def test_a_task_stored_before_the_unlocks_existed_reads_as_having_none(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "state")
    try:
        store = storage.grant("tasks", DATABASES)
        queue = TaskQueue(store, default_repo="/repo", lease_ttl_s=60)
        submitted = queue.submit(Submit(request="fix", origin="human-cli", allow_paths=("tests/",)), 1.0)
        assert isinstance(submitted, Submitted)
        old = store.table(QUEUE, version=1)
        key = submitted.task.id.to_bytes(8, "big")

        def downgrade(txn: lmdb.Transaction) -> None:
            document = orjson.loads(txn.get(key, db=old.handle))
            for name in ("v", "allow_paths", "allow_fewer_tests"):
                document.pop(name)
            old.put(txn, key, document)

        store.write(downgrade, fenced=False)
        found = queue.get(submitted.task.id)
        assert isinstance(found, Found)
        assert (found.task.allow_paths, found.task.allow_fewer_tests) == ((), False)
    finally:
        storage.close()


def test_base_run_worktrees_a_crash_left_are_removed_but_not_one_in_use(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old, fresh = home / BASELINES_DIR / "work-old", home / BASELINES_DIR / "work-fresh"
    old.mkdir(parents=True)
    fresh.mkdir()
    os.utime(old, (1_000.0, 1_000.0))
    assert remove_leftovers(home, older_than_s=7_200) == [old]
    assert fresh.is_dir() and not old.exists()


def test_a_report_the_tests_turned_into_a_link_out_or_a_fifo_is_not_read(tmp_path: Path) -> None:
    # The command under test writes where the report goes: it may leave a
    # link to a host file there, or a FIFO no one will ever write.
    private, elsewhere = tmp_path / "tmp", tmp_path / "host"
    private.mkdir()
    elsewhere.mkdir()
    secret = elsewhere / "secret.xml"
    secret.write_text('<?xml version="1.0"?><testsuites><testcase classname="secret" name="token"/></testsuites>')
    (private / "report.xml").symlink_to(secret)
    with pytest.raises(ReportError, match="leads outside"):
        read_junit(private / "report.xml")
    os.mkfifo(private / "fifo.xml")
    with pytest.raises(ReportError, match="not a regular file"):
        read_junit(private / "fifo.xml")
