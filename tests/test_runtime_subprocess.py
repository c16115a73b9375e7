"""run_command: what a real model CLI cannot be made to do, with small fake
executables (output then a crash; a hang whose children must all die)."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from enact.cancellation import CancellationToken
from enact.process import configure_logging
from enact.runtime import RuntimeCancelled, RuntimeTimeout, RuntimeUnavailable
from enact.runtime._subprocess import group_alive, run_command

from conftest import wait_for


def fake(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run(argv: list[str], *, stdin_text: str = "", timeout_s: float = 10, cancel: CancellationToken | None = None,
        cwd: Path | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_command(argv, stdin_text=stdin_text, cwd=cwd, env=env, timeout_s=timeout_s,
                       cancel=cancel or CancellationToken())


def test_prompt_goes_on_stdin_and_cwd_env_and_exit_code_come_back(tmp_path: Path) -> None:
    program = fake(tmp_path, "echoer", 'cat; pwd >&2; echo "$GREETING" >&2; exit 3\n')
    out = run([str(program)], stdin_text="the prompt", cwd=tmp_path, env={"GREETING": "hi", "PATH": "/usr/bin:/bin"})
    assert (out.exit_code, out.stdout) == (3, "the prompt")
    assert out.stderr.split() == [str(tmp_path), "hi"]
    assert out.duration_s > 0


def test_a_command_logs_its_start_at_debug_and_its_end_with_its_exit_status_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    program = fake(tmp_path, "quitter", "exit 3\n")
    caplog.set_level(logging.DEBUG)
    configure_logging("debug")  # the daemon's set-up: the sh library's own lines stay out
    try:
        run([str(program), "--flag"])
    finally:
        logging.getLogger("sh").setLevel(logging.NOTSET)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith(("sh", "enact.program"))]
    assert lines[0] == (logging.DEBUG, f"{program} --flag started")
    assert lines[1][0] == logging.INFO and lines[1][1].startswith(f"{program} --flag exited with status 3 after ")
    assert len(lines) == 2


def test_output_then_a_crash_keeps_the_output_and_reports_the_signal(tmp_path: Path) -> None:
    program = fake(tmp_path, "crasher", 'echo \'{"type":"thread.started"}\'; kill -SEGV $$\n')
    out = run([str(program)])
    assert out.exit_code == -11
    assert out.stdout == '{"type":"thread.started"}\n'


def test_a_missing_program_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(RuntimeUnavailable, match="no such program"):
        run([str(tmp_path / "not-there")])
    with pytest.raises(RuntimeUnavailable):
        run(["enact-no-such-cli-anywhere"])


def _hanging_family(tmp_path: Path, *, ignore_term: bool) -> Path:
    """A leader that starts two children and hangs; each writes its pid."""
    trap = "trap '' TERM; " if ignore_term else ""
    return fake(
        tmp_path,
        "hanger",
        f"{trap}echo $$ > {tmp_path}/leader\n"
        f"sh -c \"{trap}echo \\$\\$ >> {tmp_path}/children; sleep 60\" &\n"
        f"sh -c \"{trap}echo \\$\\$ >> {tmp_path}/children; sleep 60\" &\n"
        "sleep 60\n",
    )


def _started(tmp_path: Path) -> int:
    wait_for(lambda: (tmp_path / "children").exists() and len((tmp_path / "children").read_text().split()) == 2,
             what="the fake CLI and its children to start")
    return int((tmp_path / "leader").read_text())


def test_a_cancelled_call_returns_within_a_second_and_its_whole_group_dies(tmp_path: Path) -> None:
    program = _hanging_family(tmp_path, ignore_term=True)
    cancel = CancellationToken()
    seen: dict[str, float] = {}

    def cancel_once_started() -> None:
        seen["group"] = _started(tmp_path)
        seen["at"] = time.monotonic()
        cancel.cancel("owner said stop")

    threading.Thread(target=cancel_once_started).start()
    with pytest.raises(RuntimeCancelled, match="owner said stop"):
        run([str(program)], cancel=cancel, timeout_s=60)
    assert time.monotonic() - seen["at"] < 1.0
    group = int(seen["group"])
    # Every member ignores SIGTERM: the SIGKILL after the grace period ends them.
    wait_for(lambda: not group_alive(group), timeout=10, what="the hanging group to be killed")


def test_a_timed_out_call_terminates_its_group_at_once_when_it_honours_sigterm(tmp_path: Path) -> None:
    program = _hanging_family(tmp_path, ignore_term=False)
    started = time.monotonic()
    with pytest.raises(RuntimeTimeout, match="timed out after 1 s"):
        run([str(program)], timeout_s=1)
    assert time.monotonic() - started < 2.0
    group = int((tmp_path / "leader").read_text())
    wait_for(lambda: not group_alive(group), timeout=3, what="the group to end on SIGTERM")
    for pid in map(int, (tmp_path / "children").read_text().split()):
        assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_call_already_cancelled_starts_nothing(tmp_path: Path) -> None:
    cancel = CancellationToken()
    cancel.cancel("shutdown")
    with pytest.raises(RuntimeCancelled):
        run([str(fake(tmp_path, "marker", f"touch {tmp_path}/ran\n"))], cancel=cancel)
    assert not (tmp_path / "ran").exists()


def test_what_an_ended_command_left_running_in_its_group_is_killed_at_once(tmp_path: Path) -> None:
    program = fake(tmp_path, "leaver", f"sleep 60 >/dev/null 2>&1 &\necho $! > {tmp_path}/left\necho done\n")
    started = time.monotonic()
    out = run([str(program)])
    assert (out.exit_code, out.stdout) == (0, "done\n")
    assert time.monotonic() - started < 1.0  # not held up by the child
    left = int((tmp_path / "left").read_text())
    wait_for(lambda: not os.path.exists(f"/proc/{left}") or "Z" in Path(f"/proc/{left}/stat").read_text().split()[2],
             timeout=3, what="the child it left to be killed")


def test_a_large_prompt_goes_through_whole_and_one_the_program_does_not_read_is_no_error(tmp_path: Path) -> None:
    prompt = "x" * 1_000_000 + "\nend"  # far beyond a pipe's buffer, both ways
    out = run(["cat"], stdin_text=prompt)
    assert (out.exit_code, out.stdout) == (0, prompt)
    assert run([str(fake(tmp_path, "deaf", "exit 4\n"))], stdin_text=prompt).exit_code == 4


def test_a_command_gets_sigterm_when_the_process_that_started_it_dies(tmp_path: Path) -> None:
    program = fake(tmp_path, "sleeper", f"echo $$ > {tmp_path}/leader\nexec sleep 60\n")
    starter = subprocess.Popen([sys.executable, "-c", (
        "from enact.cancellation import CancellationToken\n"
        "from enact.runtime._subprocess import run_command\n"
        f"run_command([{str(program)!r}], stdin_text='', cwd=None, env=None, timeout_s=60,"
        " cancel=CancellationToken())\n")])
    try:
        wait_for(lambda: (tmp_path / "leader").exists() and (tmp_path / "leader").read_text().strip(),
                 what="the command to start")
        leader = int((tmp_path / "leader").read_text())
        starter.kill()
        starter.wait()
        wait_for(lambda: not group_alive(leader), timeout=5, what="the command to die with its starter")
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()


def test_a_child_left_holding_the_output_is_killed_and_what_was_printed_is_kept(tmp_path: Path) -> None:
    program = fake(tmp_path, "holder", f"(echo early; touch {tmp_path}/said; sleep 60) &\necho $! > {tmp_path}/left\n"
                   f"until [ -e {tmp_path}/said ]; do sleep 0.01; done\necho done\n")
    started = time.monotonic()
    out = run([str(program)])
    assert out.exit_code == 0 and sorted(out.stdout.split()) == ["done", "early"]
    assert time.monotonic() - started < 1.0
    left = int((tmp_path / "left").read_text())
    wait_for(lambda: not os.path.exists(f"/proc/{left}") or "Z" in Path(f"/proc/{left}/stat").read_text().split()[2],
             timeout=3, what="the child holding the output to be killed")
