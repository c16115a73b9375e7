"""The doctor and confinement on real repositories and real processes."""

from __future__ import annotations

import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from task_repos import git, make_repo, pytest_doctor

from enact import components, config
from enact.cancellation import CancellationToken
from enact.runtime import RuntimeCancelled
from enact.runtime._executable import install_root
from enact.runtime._subprocess import run_command
from enact.tasks import doctor, worktrees
from enact.tasks.confine import confinement, tools_under_tmp
from enact.tasks.repo_config import RepoConfigError
from enact.tasks.settings import TasksSettings

from conftest import wait_for

PYTEST = doctor.DoctorPlan(command=pytest_doctor(), timeout_s=60, source="test")


def settings(home: Path, **values: object) -> TasksSettings:
    home.mkdir(parents=True, exist_ok=True)
    return config.load(home, environ={}, overrides=values, settings=components.load().settings()).typed(TasksSettings)


def test_plan_prefers_the_repository_then_the_setting_then_pytest_when_there_are_tests(tmp_path: Path) -> None:
    home = tmp_path / "home"
    own = make_repo(tmp_path / "own", doctor="make check")
    assert doctor.plan_at(own, "HEAD", settings=settings(home)) == doctor.DoctorPlan(
        command="make check", timeout_s=60.0, source=".enact.toml")
    plain = make_repo(tmp_path / "plain", doctor=None)
    configured = settings(home, **{"tasks.doctor_command": "tox -q", "tasks.doctor_timeout_s": 30.0})
    assert doctor.plan_at(plain, "HEAD", settings=configured).command == "tox -q"
    assert doctor.plan_at(plain, "HEAD", settings=settings(home)).command == "python -m pytest -q"
    git(plain, "rm", "-q", "-r", "tests")
    git(plain, "commit", "-q", "-m", "no tests")
    assert doctor.plan_at(plain, "HEAD", settings=settings(home)).command == ""


def test_the_plan_is_read_from_the_revision_never_from_the_checkout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", doctor="make check")
    (repo / ".enact.toml").write_text('[doctor]\ncommand = "touch owned"\n')
    assert doctor.plan_at(repo, "HEAD", settings=settings(tmp_path / "home")).command == "make check"


def test_a_bad_repository_config_is_one_clear_error(tmp_path: Path) -> None:
    bad = '[doctor]\ncommand = "x"\ntimeout = "soon"\n'
    repo = make_repo(tmp_path / "repo", doctor=None, files={".enact.toml": bad})
    with pytest.raises(RepoConfigError, match=r"\[doctor\] timeout \(seconds\) expected float"):
        doctor.plan_at(repo, "HEAD", settings=settings(tmp_path / "home"))


@pytest.mark.parametrize("timeout", ["1e308", "inf", "nan", "0", "-5"])
def test_a_doctor_timeout_out_of_range_is_refused_in_one_line_naming_the_file(tmp_path: Path, timeout: str) -> None:
    own = f'[doctor]\ncommand = "x"\ntimeout = {timeout}\n'
    repo = make_repo(tmp_path / "repo", doctor=None, files={".enact.toml": own})
    with pytest.raises(RepoConfigError) as error:
        doctor.plan_at(repo, "HEAD", settings=settings(tmp_path / "home"))
    assert str(error.value).startswith(".enact.toml: [doctor] timeout (seconds) must be between 0.1 and 86400, got ")
    assert "\n" not in str(error.value)


def test_passing_and_failing_runs_log_everything_and_show_the_model_a_bounded_head_and_tail(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    log = tmp_path / "home" / "tasks" / "1" / "task.log"
    passed = doctor.run_doctor(repo, PYTEST, log_path=log, cancel=CancellationToken())
    assert passed.passed and "passed" in passed.summary
    assert passed.tests is not None and passed.tests.passed == ("tests.test_lib::test_answer",)
    loud = doctor.DoctorPlan(command="python3 -c 'print(\"x\" * 100000)'; echo the-end; exit 3", timeout_s=60,
                             source="test")
    failed = doctor.run_doctor(repo, loud, log_path=log, cancel=CancellationToken())
    assert not failed.passed and "exit 3" in failed.summary
    assert len(failed.head_tail) <= doctor.HEAD_TAIL_LIMIT
    assert failed.head_tail.startswith("xxx") and "the-end" in failed.head_tail[-100:]
    assert "characters omitted" in failed.head_tail
    assert "x" * 100000 in log.read_text()


def test_a_repository_below_another_projects_pytest_config_names_its_tests_from_its_own_root(
        tmp_path: Path) -> None:
    """An ENACT_HOME inside a directory with a pytest config (an owner's
    checkout, a home with a pytest.ini) puts the base's worktree and the
    task's at different places below it: the same test must keep one name,
    or validation finds the base's tests "not run at all"."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    names = []
    for place in ("doctor-baselines/work-1", "worktrees/task-1"):
        repo = make_repo(tmp_path / place)
        ran = doctor.run_doctor(repo, PYTEST, log_path=tmp_path / "log", cancel=CancellationToken())
        assert ran.passed and ran.tests is not None, ran
        names.append(ran.tests.passed)
    assert names == [("tests.test_lib::test_answer",)] * 2


def test_the_doctor_runs_without_colour_and_its_output_is_stripped_of_escapes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    log = tmp_path / "task.log"
    shown = doctor.DoctorPlan(command="echo NO_COLOR=$NO_COLOR PY_COLORS=$PY_COLORS FORCE=${FORCE_COLOR-unset}; "
                                      "test -t 1 || echo no-terminal; printf '\\033[31mred\\033[0m\\n'",
                              timeout_s=60, source="test")
    result = doctor.run_doctor(repo, shown, log_path=log, cancel=CancellationToken())
    assert "NO_COLOR=1 PY_COLORS=0 FORCE=unset" in result.head_tail and "no-terminal" in result.head_tail
    assert "red" in result.head_tail and "\x1b" not in result.head_tail and "\x1b" not in log.read_text()


def test_timeout_fails_the_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", doctor="sleep 30")
    started = time.monotonic()
    result = doctor.run_doctor(repo, doctor.DoctorPlan(command="sleep 30", timeout_s=0.5, source="test"),
                               log_path=tmp_path / "log", cancel=CancellationToken())
    assert not result.passed and "timed out" in result.summary
    assert time.monotonic() - started < 5


def test_cancel_kills_the_doctors_process_tree(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    repo = make_repo(tmp_path / "repo", doctor=None)
    plan = doctor.DoctorPlan(command=f"sh -c 'echo $$ > {pid_file}; sleep 60' & wait", timeout_s=60, source="test")
    cancel = CancellationToken()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            doctor.run_doctor(repo, plan, log_path=tmp_path / "log", cancel=cancel)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the grandchild started")
    grandchild = int(pid_file.read_text())
    cancel.cancel("the owner cancelled the task")
    thread.join(5)
    assert not thread.is_alive() and isinstance(errors[0], RuntimeCancelled)
    wait_for(lambda: not Path(f"/proc/{grandchild}").exists() or "Z" in _state(grandchild),
             what="the grandchild to be killed")


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rfind(")") + 2]


def test_confined_command_writes_only_its_worktree_and_cannot_reach_the_control_socket(
        tmp_path: Path, require_binary: object) -> None:
    require_binary("bwrap")  # type: ignore[operator]
    home = Path(__import__("tempfile").mkdtemp(prefix="enact-c-", dir="/tmp")) / "h"
    home.mkdir()
    try:
        control = home / "control.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(control))
        server.listen()
        outside = Path(__file__).parent / f"escaped-{home.parent.name}.txt"
        repo = make_repo(tmp_path / "repo", doctor=None)
        tree = worktrees.prepare(repo, home, 9)
        script = (
            "import socket, sys\n"
            "open('inside.txt', 'w').write('ok')\n"
            "for target in sys.argv[1:3]:\n"
            "    try:\n"
            "        open(target, 'w').write('escaped')\n"
            "        print('wrote', target)\n"
            "    except OSError as error:\n"
            "        print('refused', target, type(error).__name__)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.connect(sys.argv[3]); print('reached the socket')\n"
            "except OSError as error:\n"
            "    print('socket refused', type(error).__name__)\n"
            "import os; print('home visible:', os.listdir(sys.argv[4]))\n"
        )
        with confinement("auto", home=home, worktree=tree.path) as confined:
            assert confined.confined
            argv = confined.wrap([sys.executable, "-c", script, str(outside), str(home / "state.mdb"),
                                  str(control), str(home)])
            output = run_command(argv, stdin_text="", cwd=tree.path, env=confined.env, timeout_s=30,
                                 cancel=CancellationToken())
        assert output.exit_code == 0, output.stderr
        assert (tree.path / "inside.txt").read_text() == "ok"
        assert not outside.exists() and not (home / "state.mdb").exists()
        assert "reached the socket" not in output.stdout and "socket refused" in output.stdout
        assert "wrote" not in output.stdout and output.stdout.count("refused") == 3
        assert "home visible: ['worktrees']" in output.stdout  # only the way to its own worktree
        server.close()
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


def test_tools_under_the_real_tmp_are_found_for_the_confined_command(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    found = tools_under_tmp({"PATH": f"/usr/bin:{tools}:/tmp:{tmp_path / 'missing'}"})
    assert tools.resolve() in found and Path("/tmp") not in found
    assert all(path.is_relative_to("/tmp") for path in found)


def test_an_npm_installed_cli_runs_from_its_prefix_and_any_other_from_its_directory(tmp_path: Path) -> None:
    package = tmp_path / "tools" / "node_modules" / "@openai" / "codex" / "bin"
    package.mkdir(parents=True)
    (package / "codex.js").write_text("")
    (tmp_path / "tools" / "node_modules" / ".bin").mkdir()
    link = tmp_path / "tools" / "node_modules" / ".bin" / "codex"
    link.symlink_to(package / "codex.js")
    assert install_root(link) == (tmp_path / "tools").resolve()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("")
    assert install_root(tmp_path / "bin" / "tool") == (tmp_path / "bin").resolve()


def test_a_confined_command_runs_a_program_that_lives_under_the_real_tmp(
        tmp_path: Path, require_binary: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The private /tmp hides the real one: a checkout, a virtualenv or a
    tool installed there must still run (they are bound back, read-only)."""
    require_binary("bwrap")  # type: ignore[operator]
    tools = tmp_path / "bin"
    tools.mkdir()
    program = tools / "hello-from-tmp"
    program.write_text("#!/bin/sh\necho hello from tmp\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{__import__('os').environ['PATH']}")
    worktree = tmp_path / "home" / "worktrees" / "task-1"
    worktree.mkdir(parents=True)
    with confinement("auto", home=tmp_path / "home", worktree=worktree) as confined:
        output = run_command(confined.wrap(["hello-from-tmp"]), stdin_text="", cwd=worktree, env=confined.env,
                             timeout_s=30, cancel=CancellationToken())
        refused = run_command(confined.wrap(["sh", "-c", f"echo x > {program}"]), stdin_text="", cwd=worktree,
                              env=confined.env, timeout_s=30, cancel=CancellationToken())
    assert output.exit_code == 0 and "hello from tmp" in output.stdout, output.stderr
    assert refused.exit_code != 0 and "hello from tmp" in program.read_text()  # bound back read-only


def test_without_confinement_the_command_runs_and_says_so(tmp_path: Path) -> None:
    with confinement("off", home=tmp_path / "home", worktree=tmp_path) as unconfined:
        assert not unconfined.confined and unconfined.wrap(["true"]) == ["true"]
        assert unconfined.tmp is not None and unconfined.tmp.is_dir()
        assert not any(key.startswith("ENACT_") for key in unconfined.env)
