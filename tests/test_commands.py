"""Registered commands through a running daemon: the step journal for direct
commands, arguments of programs, programs that die with the daemon, and the
reloading of commands.toml and scripted.toml."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from enact.commands import CommandRegistry, builtin_commands
from enact.programs import CommandsFileError, ProgramSource, kill_leftover_programs, load_program_commands
from enact.runtime import RuntimeRequest
from enact.runtime.scripted import RulesError, ScriptedRuntime, parse_rules

from conftest import Daemon, DaemonFactory, enact_env, wait_for


def program_home(daemons: DaemonFactory, commands: str, rules: str = "") -> Path:
    home = daemons.new_home()
    (home / "commands.toml").write_text(textwrap.dedent(commands))
    (home / "scripted.toml").write_text(textwrap.dedent(rules))
    return home


def bump_home(daemons: DaemonFactory) -> Path:
    marker = daemons.new_home().parent / "bumps.txt"
    home = program_home(daemons, f"""
        [[command]]
        name = "bump"
        summary = "appends a line, then takes a long time"
        run = ["sh", "-c", "echo bump >> {marker}; sleep 30"]
        """)
    (home / "marker").write_text(str(marker))
    return home


def bumps(home: Path) -> int:
    marker = Path((home / "marker").read_text())
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def send(daemon: Daemon, *args: str) -> dict[str, Any]:
    result = daemon.cli("send", "--json", *args)
    assert result.returncode == 0, result.stderr
    outcome: dict[str, Any] = orjson.loads(result.stdout)
    return outcome


RECEIPT_EXIT_CODES = {"ok": 0, "bad_args": 2, "unknown_command": 2, "refused": 2, "not_found": 2, "failed": 1}
"""``enact call commands.Run``'s exit code by the receipt's outcome: a failed
run is not a success (the codes of every command's refusal and failure)."""


def run_command(daemon: Daemon, body: dict[str, Any]) -> dict[str, Any]:
    result = daemon.cli("call", "commands.Run", orjson.dumps(body).decode())
    reply: dict[str, Any] = orjson.loads(result.stdout)
    assert reply["type"] == "commands.Receipt", reply
    assert result.returncode == RECEIPT_EXIT_CODES[reply["body"]["outcome"]], (result.returncode, reply)
    return dict(reply["body"])


def background(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "enact", *args], env=enact_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# -- every effect goes through the step journal ------------------------------


def test_direct_chat_command_interrupted_by_kill_9_is_not_repeated(daemons: DaemonFactory) -> None:
    home = bump_home(daemons)
    daemon = daemons.start(home)
    sender = background(home, "send", "--json", "--message-id", "b-1", "/bump")
    wait_for(lambda: bumps(home) == 1, what="/bump to start")
    daemon.kill9()
    sender.communicate(timeout=30)
    restarted = daemons.start(home)
    outcome = send(restarted, "--message-id", "b-1", "/bump")
    assert "The command /bump was interrupted before its result was recorded" in outcome["reply"]
    assert "It was not repeated" in outcome["reply"]
    assert outcome["attempts"] == 2
    assert bumps(home) == 1


def test_commands_run_with_a_request_id_interrupted_by_kill_9_is_not_repeated(daemons: DaemonFactory) -> None:
    home = bump_home(daemons)
    daemon = daemons.start(home)
    caller = background(home, "call", "commands.Run", '{"name": "bump", "request_id": "r1"}')
    wait_for(lambda: bumps(home) == 1, what="bump to start")
    daemon.kill9()
    caller.communicate(timeout=30)
    restarted = daemons.start(home)
    receipt = run_command(restarted, {"name": "bump", "request_id": "r1"})
    assert receipt["ok"] is False
    assert receipt["text"].startswith("bump was interrupted before its result was recorded")
    assert "It was not repeated" in receipt["text"]
    assert bumps(home) == 1


def test_commands_run_retried_with_its_request_id_answers_from_the_journal(daemons: DaemonFactory) -> None:
    marker = daemons.new_home().parent / "touches.txt"
    daemon = daemons.start(program_home(daemons, f"""
        [[command]]
        name = "touch"
        run = ["sh", "-c", "echo x >> {marker}; echo touched"]
        """))
    first = run_command(daemon, {"name": "touch", "request_id": "t1"})
    again = run_command(daemon, {"name": "touch", "request_id": "t1"})
    assert first == again == {"command": "touch", "ok": True, "text": "touched", "outcome": "ok"}
    assert len(marker.read_text().splitlines()) == 1
    run_command(daemon, {"name": "touch"})  # no request id: a fresh one each time
    run_command(daemon, {"name": "touch"})
    assert len(marker.read_text().splitlines()) == 3


def test_the_daemon_log_has_one_info_line_per_finished_program_with_its_exit_status(daemons: DaemonFactory) -> None:
    daemon = daemons.start(program_home(daemons, """
        [[command]]
        name = "quit"
        run = ["sh", "-c", "exit 3"]
        """))
    assert run_command(daemon, {"name": "quit"})["outcome"] == "failed"
    assert run_command(daemon, {"name": "quit"})["outcome"] == "failed"
    daemon.terminate()
    lines = daemon.log_text().splitlines()
    ended = [line for line in lines if " INFO enact.program: sh -c 'exit 3' exited with status 3 after " in line]
    assert len(ended) == 2
    # A start is debug, not shown: at info, a program is one line, its end (the
    # daemon's own git calls at start end the same way).
    assert [line for line in lines if " enact.program: " in line and " exited with status " not in line] == []
    assert not [line for line in lines if " sh.command" in line]


def test_commands_run_with_the_request_id_of_a_running_call_is_not_started_again(daemons: DaemonFactory) -> None:
    home = bump_home(daemons)
    daemon = daemons.start(home)
    background(home, "call", "commands.Run", '{"name": "bump", "request_id": "r2"}')
    wait_for(lambda: bumps(home) == 1, what="bump to start")
    receipt = run_command(daemon, {"name": "bump", "request_id": "r2"})
    assert receipt == {"command": "bump", "ok": False,
                       "text": "bump is still running for this request; it was not started again",
                       "outcome": "failed"}
    assert bumps(home) == 1


def test_unknown_slash_command_gets_a_pointer_to_help(daemons: DaemonFactory) -> None:
    home = program_home(daemons, "")
    calls = home.parent / "transcript.jsonl"
    daemon = daemons.start(home, env={"ENACT_SCRIPTED_TRANSCRIPT": str(calls)})
    assert send(daemon, "/nosuch thing")["reply"] == "unknown command /nosuch; /help lists them"
    assert send(daemon, "/usr/bin is full")["reply"] == "(scripted runtime) You said: /usr/bin is full"
    assert len(calls.read_text().splitlines()) == 1  # only the second went to the model


# -- arguments of registered programs -------------------------------------------


COPY_RULES = """
[[rule]]
match = "copy by rule"
action = "copy"
args = { x = 1, tags = ["a", "b"] }
then = "Copied: {receipt}"
"""


def copy_home(daemons: DaemonFactory, params: str = "") -> tuple[Path, Path]:
    stdin = daemons.new_home().parent / "stdin.json"
    home = program_home(daemons, f"""
        [[command]]
        name = "copy"
        run = ["sh", "-c", "cat > {stdin}; echo copied"]
        {params}
        """, COPY_RULES)
    return home, stdin


def test_program_arguments_reach_standard_input_as_json_on_each_path(daemons: DaemonFactory) -> None:
    home, stdin = copy_home(daemons)
    daemon = daemons.start(home)
    assert send(daemon, "/copy foo  bar")["reply"] == "copied"
    assert orjson.loads(stdin.read_text()) == {"text": "foo  bar"}
    assert send(daemon, "/copy")["reply"] == "copied"
    assert orjson.loads(stdin.read_text()) == {}
    assert run_command(daemon, {"name": "copy", "args": {"a": [1, 2]}})["ok"] is True
    assert orjson.loads(stdin.read_text()) == {"a": [1, 2]}
    assert send(daemon, "copy by rule")["reply"] == "Copied: copied"
    assert orjson.loads(stdin.read_text()) == {"x": 1, "tags": ["a", "b"]}


def test_declared_parameters_are_checked_before_the_program_runs(daemons: DaemonFactory) -> None:
    home, stdin = copy_home(daemons, """params = [
            {name = "path", type = "string"},
            {name = "count", type = "integer", required = false},
        ]""")
    daemon = daemons.start(home)
    refused = run_command(daemon, {"name": "copy", "args": {"path": "x", "count": "three"}})
    assert refused == {"command": "copy", "ok": False, "text": "bad arguments for copy: 'count' must be integer",
                       "outcome": "bad_args"}
    assert run_command(daemon, {"name": "copy", "args": {}})["text"] == (
        "bad arguments for copy: missing argument 'path'"
    )
    assert not stdin.exists()
    assert run_command(daemon, {"name": "copy", "args": {"path": "x", "count": 3}})["ok"] is True
    assert orjson.loads(stdin.read_text()) == {"path": "x", "count": 3}
    # Chat text is the argument "text", which this command does not declare: its arguments come as JSON.
    assert send(daemon, "/copy foo")["reply"] == (
        "/copy takes no arguments in chat; a model's action or `enact call commands.Run` gives its path, count")
    assert send(daemon, "/copy")["reply"] == (
        "/copy cannot be run from chat: it needs path, which a model's action or `enact call commands.Run` gives")


def test_call_commands_run_exits_non_zero_when_the_run_did_not_succeed(daemons: DaemonFactory) -> None:
    home, _ = copy_home(daemons, """params = [{name = "path", type = "string"}]""")
    (home / "commands.toml").write_text((home / "commands.toml").read_text() + """
[[command]]
name = "quit"
run = ["sh", "-c", "exit 3"]
""")
    daemon = daemons.start(home)
    runs = {
        "bad arguments": ({"name": "copy", "args": {"count": 1}}, 2, "bad_args"),
        "unknown command": ({"name": "cpy"}, 2, "unknown_command"),
        "failed program": ({"name": "quit"}, 1, "failed"),
        "success": ({"name": "copy", "args": {"path": "x"}}, 0, "ok"),
    }
    for what, (body, exit_code, outcome) in runs.items():
        result = daemon.cli("call", "commands.Run", orjson.dumps(body).decode())
        receipt = orjson.loads(result.stdout)  # the typed reply is printed whatever the outcome
        assert (result.returncode, receipt["body"]["outcome"]) == (exit_code, outcome), what
        assert receipt["body"]["ok"] is (exit_code == 0), what


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ('params = "some"', "command #1 (x): 'params' must be \"free\" or a list"),
        ('params = [{name = "a", type = "float"}]', "command #1 (x): params #1 (a): 'type' must be one of string"),
        ('params = [{name = "a", type = "string", colour = 1}]', "params #1: unknown key 'colour'"),
        ('params = [{type = "string"}]', "params #1: 'name' must be a word"),
        ('params = [{name = "a", type = "list", required = "yes"}]', "(a): 'required' must be true or false"),
        ('params = [{name = "a", type = "list"}, {name = "a", type = "string"}]', "'a' is declared twice"),
    ],
)
def test_bad_parameter_declarations_are_one_line_errors_naming_the_command(
    tmp_path: Path, params: str, problem: str
) -> None:
    path = tmp_path / "commands.toml"
    path.write_text(f'[[command]]\nname = "x"\nrun = ["true"]\n{params}\n')
    with pytest.raises(CommandsFileError) as raised:
        load_program_commands(path)
    assert problem in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("timeout", ["1e308", "inf", "nan", "0", "-1", '"soon"', "true"])
def test_a_program_timeout_out_of_range_is_a_one_line_error_naming_file_and_command(
    tmp_path: Path, timeout: str
) -> None:
    path = tmp_path / "commands.toml"
    path.write_text(f'[[command]]\nname = "x"\nrun = ["true"]\ntimeout_s = {timeout}\n')
    with pytest.raises(CommandsFileError) as raised:
        load_program_commands(path)
    message = str(raised.value)
    assert str(path) in message and "(x): 'timeout_s' " in message and "\n" not in message
    assert "must be between 0.1 and 86400" in message or "expected float" in message


def test_a_program_may_not_take_the_name_of_a_built_in_command(tmp_path: Path) -> None:
    path = tmp_path / "commands.toml"
    path.write_text('[[command]]\nname = "status"\nrun = ["true"]\n')
    registry = CommandRegistry()
    for command in builtin_commands(registry):
        registry.register(command)
    with pytest.raises(ValueError, match="command 'status' is a built-in command"):
        registry.watch(ProgramSource(path))


def test_bad_commands_file_stops_the_daemon_with_one_line(daemons: DaemonFactory) -> None:
    home = program_home(daemons, '[[command]]\nname = "x"\nrun = ["true"]\nparams = [{name = "a"}]\n')
    daemon = daemons.start(home, wait=False)
    assert daemon.wait_exit() == 2
    [line] = [line for line in daemon.log_text().splitlines() if line.startswith("enact:")]
    assert "command #1 (x): params #1 (a): 'type' must be one of" in line


# -- programs do not outlive the daemon ------------------------------------------


def alive(pid: int) -> bool:
    """A zombie (nobody reaped it yet, as in a container without an init) is dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_running_program_dies_with_the_daemon_on_kill_9(daemons: DaemonFactory) -> None:
    pidfile = daemons.new_home().parent / "sleep.pid"
    # The sleep is a child of the program, not the program itself: the whole group must go.
    home = program_home(daemons, f"""
        [[command]]
        name = "nap"
        run = ["sh", "-c", "sleep 30 & echo $! > {pidfile}; wait"]
        """)
    daemon = daemons.start(home)
    caller = background(home, "call", "commands.Run", '{"name": "nap"}')
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip().isdigit(), what="the program to start")
    sleeper = int(pidfile.read_text())
    assert alive(sleeper)
    assert list((home / "run" / "programs").iterdir())  # its group is recorded
    daemon.kill9()
    caller.communicate(timeout=30)
    wait_for(lambda: not alive(sleeper), timeout=5, what="the program to die with the daemon")
    daemons.start(home)
    assert list((home / "run" / "programs").iterdir()) == []


def test_the_next_start_kills_a_recorded_group_but_never_a_recycled_pid(tmp_path: Path) -> None:
    run_dir = tmp_path / "programs"
    run_dir.mkdir()
    left = subprocess.Popen(["sleep", "30"], start_new_session=True)
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        started = Path(f"/proc/{left.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        (run_dir / str(left.pid)).write_text(started)
        (run_dir / str(other.pid)).write_text("1")  # another process once had this pid
        assert kill_leftover_programs(run_dir) == 1
        assert left.wait(timeout=5) == -signal.SIGKILL
        assert other.poll() is None
        assert list(run_dir.iterdir()) == []
    finally:
        for process in (left, other):
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()


# -- commands.toml and scripted.toml are read again when they change -----------------


def test_commands_file_is_reread_when_it_changes_and_a_broken_edit_keeps_the_previous(
    daemons: DaemonFactory,
) -> None:
    home = program_home(daemons, '[[command]]\nname = "one"\nrun = ["echo", "first"]\n')
    daemon = daemons.start(home)
    assert send(daemon, "/one")["reply"] == "first"
    (home / "commands.toml").write_text('[[command]]\nname = "two"\nrun = ["echo", "second"]\n')
    assert send(daemon, "/two")["reply"] == "second"
    assert send(daemon, "/one")["reply"] == "unknown command /one; /help lists them"
    (home / "commands.toml").write_text('[[command]]\nname = "three"\nrun = "not a list"\n')
    assert send(daemon, "/two")["reply"] == "second"
    log = daemon.log_text()
    assert "commands reloaded from" in log
    [broken] = [line for line in log.splitlines() if "keeping the previous commands" in line]
    assert "command #1 (three): 'run' must be a non-empty list" in broken


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ('match = "(a)"\nreply = "x \\\\2"', "rule #1: 'reply' names a group its 'match' does not have"),
        ('match = "(?P<who>a)"\nreply = "\\\\g<whom>"', "rule #1: 'reply' names a group"),
        ('match = "(a)"\naction = "status"\nthen = "\\\\3 {receipt}"', "rule #1: 'then' names a group"),
    ],
)
def test_rule_naming_a_group_its_match_lacks_is_refused_at_load(rule: str, problem: str) -> None:
    with pytest.raises(RulesError, match=problem):
        parse_rules(f"[[rule]]\n{rule}\n", source="rules.toml")


def test_rule_groups_expand_in_reply_and_then(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nmatch = "say (?P<word>\\\\w+)"\nreply = "\\\\g<word>!"\n'
                     '[[rule]]\nmatch = "check (\\\\w+)"\naction = "status"\nthen = "\\\\1: {receipt}"\n')
    runtime = ScriptedRuntime(rules)
    assert runtime.invoke(RuntimeRequest(session_key="k", prompt="", owner_message="say hi")).text == "hi!"
    first = runtime.invoke(RuntimeRequest(session_key="k", prompt="", owner_message="check disk"))
    assert orjson.loads(first.text) == {"action": "status", "args": {}}
    then = runtime.invoke(RuntimeRequest(session_key="k", prompt="", owner_message="check disk",
                                         receipt="C:\\1 fine"))
    assert then.text == "disk: C:\\1 fine"  # a backslash in the receipt is kept as it is


def test_scripted_rules_log_reloads_and_unknown_actions_and_refuse_bad_groups(daemons: DaemonFactory) -> None:
    home = program_home(daemons, "", '[[rule]]\nmatch = "x"\nreply = "y"\n'
                                     '[[rule]]\nmatch = "made up"\naction = "no.such"\n')
    daemon = daemons.start(home)
    [warning] = [line for line in daemon.log_text().splitlines() if "no.such" in line]
    assert " WARNING " in warning and "scripted.toml: rule #2: action 'no.such' is not a registered command" in warning
    (home / "scripted.toml").write_text('[[rule]]\nmatch = "(p)ing"\nreply = "\\\\1ong"\n')
    assert send(daemon, "ping")["reply"] == "pong"
    [reload] = [line for line in daemon.log_text().splitlines() if "scripted rules reloaded" in line]
    assert " INFO " in reload and "1 rules" in reload
    (home / "scripted.toml").write_text('[[rule]]\nmatch = "(p)ing"\nreply = "\\\\2ong"\n')
    assert send(daemon, "ping")["reply"] == "pong"  # refused at load; the previous rules stay
    [refused] = [line for line in daemon.log_text().splitlines() if "keeping the previous scripted rules" in line]
    assert "rule #1: 'reply' names a group its 'match' does not have" in refused
    assert daemon.process.poll() is None


def test_scripted_rules_naming_a_missing_file_is_an_error_at_start(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    daemon = daemons.start(home, env={"ENACT_SCRIPTED_RULES": str(home / "absent.toml")}, wait=False)
    assert daemon.wait_exit() == 2
    [line] = [line for line in daemon.log_text().splitlines() if line.strip()]
    assert line.startswith("enact: scripted.rules (environment): ") and line.endswith("absent.toml does not exist")


# -- scripted sessions after a restart ---------------------------------------------------


def test_unknown_scripted_session_after_a_restart_is_expected_not_a_failure(daemons: DaemonFactory) -> None:
    home = program_home(daemons, "")
    daemon = daemons.start(home)
    send(daemon, "one")
    assert daemon.terminate() == 0
    restarted = daemons.start(home)
    assert send(restarted, "two")["reply"] == "(scripted runtime) You said: two"
    address = restarted.cli_json("status", "--json")["metrics_addr"]
    metrics = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    calls = 'enact_runtime_calls_total{adapter="scripted",outcome="%s",purpose="conversation"} %s'
    assert calls % ("ok", "1.0") in metrics
    assert calls % ("resume_failed", "0.0") in metrics
    assert calls % ("failed", "0.0") in metrics
    log = restarted.log_text()
    assert "resuming session" not in log
    [line] = [line for line in log.splitlines() if "is not known to the runtime" in line]
    assert " INFO " in line and "session local:cli" in line and "starting a fresh one" in line


def test_the_chat_pages_example_of_commands_toml_loads(tmp_path: Path) -> None:
    page = (Path(__file__).parent.parent / "docs" / "chat.md").read_text()
    [example] = [block for block in page.split("```toml\n")[1:] if block.startswith("[[command]]")]
    path = tmp_path / "commands.toml"
    path.write_text(example.split("```", 1)[0])
    [backup] = load_program_commands(path)
    assert set(backup.params) == {"path", "keep"} and not backup.free
