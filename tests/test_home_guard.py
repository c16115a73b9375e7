"""A home and the files the daemon takes instructions from are the owner's
(owned by the daemon's uid, not writable by group or others) or refused in
one line; what the daemon writes in its home is private."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from task_repos import git, make_repo

from enact.memory.identity import IdentityError, read_identity_file

from conftest import Daemon, DaemonFactory, run_cli, wait_for

OTHER_UID = 12345
"""A uid no test user has: a file chowned to it was planted by someone else."""

QUIET = {"ENACT_DAEMON_COMMAND_SERVER": "false", "ENACT_DAEMON_METRICS_ADDR": "127.0.0.1:0"}

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def _start_or_run(home: Path, command: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, "daemon", command, env=QUIET, timeout=30)


@pytest.mark.parametrize("command", ["run", "start"])
@pytest.mark.parametrize("kind", ["file", "link to a file", "dangling link"])
def test_a_home_that_is_not_a_directory_is_refused_in_one_line_with_exit_2(tmp_path: Path, kind: str,
                                                                           command: str) -> None:
    home = tmp_path / "home"
    (tmp_path / "a-file").write_text("not a home")
    if kind == "file":
        home.write_text("not a home")
    else:
        home.symlink_to(tmp_path / ("a-file" if kind == "link to a file" else "nowhere"))
    result = _start_or_run(home, command)
    assert result.returncode == 2, result
    [line] = result.stderr.splitlines()
    expected = "which does not exist" if kind == "dangling link" else "is not a directory"
    assert line.startswith(f"enact: the home {home} ") and line.endswith(expected), line


def _plant(path: Path, problem: str) -> None:
    if problem == "owned by another user":
        os.chown(path, OTHER_UID, OTHER_UID)
    else:
        path.chmod(path.stat().st_mode | stat.S_IWOTH)


@needs_root
@pytest.mark.parametrize("problem", ["owned by another user", "writable by others"])
@pytest.mark.parametrize("target", ["", "config.toml", "commands.toml", "scripted.toml"])
def test_a_home_or_an_instruction_file_that_is_not_the_owners_is_refused_and_nothing_starts(
        tmp_path: Path, target: str, problem: str) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    if target:
        (home / target).write_text("")
    _plant(home / target if target else home, problem)
    for command in ("run", "start"):
        result = _start_or_run(home, command)
        assert result.returncode == 2, result
        [line] = [line for line in result.stderr.splitlines() if line.strip()]
        assert line.startswith("enact: ") and str(home / target if target else home) in line, line
        assert ("is owned by uid 12345" if problem == "owned by another user" else "writable by group or others") \
            in line
    assert not (home / "state").exists() and not (home / "control.sock").exists()
    assert not (home / "daemon.lock").exists()


@needs_root
def test_an_identity_file_of_another_user_is_not_installed(tmp_path: Path) -> None:
    identity = tmp_path / "identity.toml"
    identity.write_text('name = "Ada"\n')
    os.chown(identity, OTHER_UID, OTHER_UID)
    with pytest.raises(IdentityError, match="is owned by uid 12345"):
        read_identity_file(identity)


def test_an_identity_file_others_may_write_is_not_installed(tmp_path: Path) -> None:
    identity = tmp_path / "identity.toml"
    identity.write_text('name = "Ada"\n')
    identity.chmod(0o666)
    with pytest.raises(IdentityError, match="writable by group or others"):
        read_identity_file(identity)


def _loose(home: Path) -> list[str]:
    """Every entry under ``home`` that group or others could read, write or enter."""
    loose = []
    for directory, names, files in os.walk(home):
        for name in (*names, *files):
            path = os.path.join(directory, name)
            if not os.path.islink(path) and os.lstat(path).st_mode & 0o077:
                loose.append(f"{path} {stat.filemode(os.lstat(path).st_mode)}")
    return loose


def test_every_file_a_started_daemon_writes_in_its_home_is_private(tmp_path: Path) -> None:
    home = tmp_path / "home"  # made by `daemon start`
    started = run_cli(home, "daemon", "start", env=QUIET)
    assert started.returncode == 0, started
    try:
        remembered = run_cli(home, "memory", "remember", "--json", "the owner likes tea")
        assert remembered.returncode == 0, remembered
        wait_for(lambda: (home / "memory-index").exists(), what="the memory index")
        names = {path.name for path in home.rglob("*")}
        assert {"data.mdb", "lock.mdb", "daemon.log", "daemon.lock", "memory-index"} <= names
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        assert _loose(home) == []
    finally:
        assert run_cli(home, "daemon", "stop").returncode == 0


def test_a_home_with_loose_modes_is_tightened_at_start_and_the_log_says_so(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    home.chmod(0o755)
    (home / "config.toml").write_text("")
    (home / "old").mkdir(mode=0o755)
    (home / "old" / "daemon.log").write_text("from before")
    for path in (home / "config.toml", home / "old", home / "old" / "daemon.log"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    daemon = daemons.start(home)
    assert _loose(home) == [] and stat.S_IMODE(home.stat().st_mode) == 0o700
    assert "tightened 4 entries in" in daemon.log_text()


_LAND_AS_THE_DAEMON = """
import sys
from pathlib import Path
from enact.home_guard import make_private
from enact.tasks.worktrees import git
make_private(Path(sys.argv[1]))
git(Path(sys.argv[2]), "merge", "--ff-only", "--quiet", "feature")
"""


def test_git_the_daemon_runs_in_the_owners_repository_keeps_the_owners_umask(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", make_repo(tmp_path / "repo", doctor=None)
    home.mkdir(mode=0o700)
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "landed.py").write_text("x = 1\n")
    git(repo, "add", "landed.py")
    git(repo, "commit", "-q", "-m", "landed")
    git(repo, "checkout", "-q", "main")
    subprocess.run([sys.executable, "-c", _LAND_AS_THE_DAEMON, str(home), str(repo)], check=True,
                   preexec_fn=lambda: os.umask(0o022))
    assert stat.S_IMODE((repo / "landed.py").stat().st_mode) == 0o644


def _send(daemon: Daemon, text: str) -> str:
    sent = daemon.cli("send", "--json", text)
    assert sent.returncode == 0, sent
    reply: str = orjson.loads(sent.stdout)["reply"]
    return reply


def test_a_commands_or_rules_file_others_may_write_is_not_reloaded_and_the_previous_stays(
        daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    (home / "commands.toml").write_text('[[command]]\nname = "one"\nrun = ["echo", "first"]\n')
    (home / "scripted.toml").write_text('[[rule]]\nmatch = "ping"\nreply = "pong"\n')
    daemon = daemons.start(home)
    for name, text in (("commands.toml", '[[command]]\nname = "planted"\nrun = ["echo", "planted"]\n'),
                       ("scripted.toml", '[[rule]]\nmatch = "ping"\nreply = "planted"\n')):
        (home / name).write_text(text)
        (home / name).chmod(0o666)
    assert _send(daemon, "/planted") == "unknown command /planted; /help lists them"
    assert _send(daemon, "/one") == "first"
    assert _send(daemon, "ping") == "pong"
    log = daemon.log_text()
    assert f"keeping the previous commands: {home / 'commands.toml'} is writable by group or others" in log
    assert f"keeping the previous scripted rules: {home / 'scripted.toml'} is writable by group or others" in log
