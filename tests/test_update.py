"""Self-update through running daemons: a clone of this very repository
gets a commit that changes ``enact --version``; ``enact update`` installs it
as a release under the home, hands the home over with ``--takeover`` and
keeps it only when it holds, while senders keep sending."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from git_repos import commit, git

import enact
from enact.cancellation import CancellationToken
from enact.commands import CommandCall, CommandContext, CommandRegistry
from enact.messages.common import HUMAN_CLI, MODEL_ACTION
from enact.tasks.repositories import own_checkout
from enact.update.commands import update_commands

from conftest import DaemonFactory, enact_env, run_cli, wait_for

NEW_VERSION = f"{enact.__version__}+update"
OWNER = "local:owner"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """This repository at its HEAD, cloned: the repository updates come from."""
    repo = tmp_path / "enact-repo"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", own_checkout(), str(repo)], check=True)
    git(repo, "config", "user.name", "t")
    git(repo, "config", "user.email", "t@example.org")
    return repo


def new_revision(repo: Path, *, doctor: str, extra: dict[str, str] | None = None) -> str:
    """A commit that makes ``enact --version`` say NEW_VERSION, with the doctor ``doctor``."""
    init = (repo / "enact" / "__init__.py").read_text()
    changed = init.replace(f'__version__ = "{enact.__version__}"', f'__version__ = "{NEW_VERSION}"')
    assert changed != init
    return commit(repo, {"enact/__init__.py": changed, ".enact.toml": f"[doctor]\ncommand = '''{doctor}'''\n",
                         **(extra or {})}, "a new version")


def update_home(daemons: DaemonFactory, repo: Path) -> Path:
    home = daemons.new_home()
    (home / "config.toml").write_text(
        f'[update]\nrepository = "{repo}"\nprobation_s = 1\nready_timeout_s = 60\n'
        f'[chat]\nallowed_conversations = ["{OWNER}"]\n')
    return home


@pytest.fixture
def served(daemons: DaemonFactory) -> Iterator[list[Path]]:
    """Homes whose serving daemon (the updater's, not the factory's) is stopped at the end."""
    homes: list[Path] = []
    yield homes
    for home in homes:
        run_cli(home, "daemon", "stop", timeout=90)


def status(home: Path, *more: str) -> Any:
    done = run_cli(home, "status", "--json", *more)
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def update(home: Path) -> tuple[int, Any]:
    done = run_cli(home, "update", "--json", timeout=300)
    assert done.stdout, done.stderr
    return done.returncode, orjson.loads(done.stdout)


def owner_notices(home: Path) -> list[str]:
    done = run_cli(home, "turns", "--conversation", "owner", "--json")
    assert done.returncode == 0, done.stderr
    listed = orjson.loads(done.stdout)
    turns = listed["turns"] if isinstance(listed, dict) else listed
    return [turn["reply"] for turn in turns]


def start_senders(home: Path, count: int, messages: int) -> list[subprocess.Popen[str]]:
    """Each sends its messages in turn, each until one send of it succeeds
    (a send cut short by the takeover is sent again under the same id)."""
    loops = []
    for index in range(count):
        send = f'"{sys.executable}" -m enact send --conversation s{index} --message-id s{index}-$n "hello $n"'
        script = f"for n in $(seq 1 {messages}); do until {send} >/dev/null 2>&1; do sleep 0.1; done; done"
        loops.append(subprocess.Popen(["sh", "-c", script], env=enact_env(home), text=True))
    return loops


def test_check_says_what_runs_and_that_an_update_is_possible(daemons: DaemonFactory, clone: Path) -> None:
    home = update_home(daemons, clone)
    head = git(clone, "rev-parse", "HEAD")
    assert orjson.loads(run_cli(home, "update", "--check", "--json").stdout)["why_not"].startswith("already running")
    new = new_revision(clone, doctor="true")
    found = orjson.loads(run_cli(home, "update", "--check", "--json").stdout)
    assert found["running"] == head and found["authoritative"] == new and found["possible"] is True
    (clone / "README.md").write_text("changed\n")
    found = orjson.loads(run_cli(home, "update", "--check", "--json").stdout)
    assert found["why_not"] == f"the checkout {clone} has uncommitted changes"
    git(clone, "checkout", "--quiet", "--", "README.md")
    git(clone, "reset", "--quiet", "--hard", f"{head}~1")
    commit(clone, {"elsewhere.txt": "x\n"}, "a branch that left the running revision behind")
    found = orjson.loads(run_cli(home, "update", "--check", "--json").stdout)
    assert "does not descend from the running" in found["why_not"]
    code, outcome = update(home)
    assert (code, outcome["outcome"]) == (2, "refused")


def test_update_is_served_by_the_new_version_with_senders_running(
    daemons: DaemonFactory, clone: Path, served: list[Path]
) -> None:
    doctor = f'python -c "import enact, sys; sys.exit(enact.__version__ != \\"{NEW_VERSION}\\")"'
    new = new_revision(clone, doctor=doctor)
    home = update_home(daemons, clone)
    old = daemons.start(home)
    served.append(home)
    senders = start_senders(home, 3, 40)
    try:
        code, outcome = update(home)
        assert (code, outcome["outcome"]) == (0, "updated"), outcome
        for sender in senders:
            assert sender.wait(timeout=120) == 0
    finally:
        for sender in senders:
            if sender.poll() is None:
                sender.kill()
    assert old.wait_exit(10) == 0  # fenced by the new release's daemon
    now = status(home)
    assert now["version"] == NEW_VERSION and now["generation"] >= 2
    release = home / "releases" / new
    assert Path(os.readlink(home / "releases" / "current")) == release / ".venv"
    shown = subprocess.run([str(home / "releases" / "current" / "bin" / "enact"), "--version"],
                           capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == f"enact, version {NEW_VERSION}"
    for index in range(3):  # every message answered once: none lost, none doubled
        done = run_cli(home, "turns", "--conversation", f"s{index}", "--limit", "1000", "--json")
        listed = orjson.loads(done.stdout)
        turns = listed["turns"] if isinstance(listed, dict) else listed
        assert sorted(turn["message_id"] for turn in turns) == sorted(f"s{index}-{n}" for n in range(1, 41))
    [attempt] = orjson.loads(run_cli(home, "update", "history", "--json").stdout)
    assert attempt["outcome"] == "updated" and attempt["to_revision"] == new
    assert attempt["steps"][:5] == ["installing", "doctor", "backup", "starting", "canary"] or \
        attempt["steps"][:6] == ["installing", "doctor", "backup",
                                 "no backup (the running release has no `enact backup`)", "starting", "canary"]


def test_a_release_that_fails_to_start_is_rolled_back_and_the_old_version_serves(
    daemons: DaemonFactory, clone: Path, served: list[Path]
) -> None:
    daemon_module = (clone / "enact" / "daemon.py").read_text()
    new_revision(clone, doctor="python -m enact --version",
                 extra={"enact/daemon.py": daemon_module + '\nraise RuntimeError("broken on purpose")\n'})
    home = update_home(daemons, clone)
    daemons.start(home)
    served.append(home)
    code, outcome = update(home)
    assert (code, outcome["outcome"]) == (1, "rolled_back"), outcome
    assert "exited with status" in outcome["reason"]
    now = status(home)
    assert now["version"] == enact.__version__
    assert not (home / "releases" / "current").exists()
    [notice] = owner_notices(home)
    assert notice.startswith("Update rolled back: ") and outcome["attempt"] in notice


def test_a_release_whose_doctor_fails_never_takes_the_home(
    daemons: DaemonFactory, clone: Path, served: list[Path]
) -> None:
    new_revision(clone, doctor="python -c 'raise SystemExit(3)'")
    home = update_home(daemons, clone)
    old = daemons.start(home)
    served.append(home)
    code, outcome = update(home)
    assert (code, outcome["outcome"]) == (1, "failed"), outcome
    assert outcome["reason"].startswith("the doctor failed: ")
    assert status(home)["pid"] == old.pid and status(home)["generation"] == 1
    [notice] = owner_notices(home)
    assert notice.startswith("Update failed, nothing changed: the doctor failed")


MIGRATING_SCHEMAS = """    def schemas(self) -> Sequence[DatabaseSchema]:
        from enact.storage import DatabaseSchema

        return [DatabaseSchema(name="logs.turns", version=2, migrations={1: _rewrite_every_turn})]

"""
REWRITE_STEP = """

def _rewrite_every_turn(txn: Any, database: Any) -> None:
    \"\"\"Version 2 of logs.turns: each record written again, in the migration's transaction.\"\"\"
    for key, value in list(txn.cursor(db=database)):
        txn.put(bytes(key), bytes(value), db=database)
"""


def migrating_release_whose_canary_fails(repo: Path) -> str:
    """A new version whose chat component moves logs.turns to schema version
    2 at its start (a real step) and whose ``runtime check`` always fails (so
    its canary does)."""
    component = (repo / "enact" / "chat" / "component.py").read_text()
    migrating = (component.replace("from typing import TYPE_CHECKING, ClassVar",
                                   "from typing import TYPE_CHECKING, Any, ClassVar")
                 .replace("if TYPE_CHECKING:\n", "if TYPE_CHECKING:\n    from enact.storage import DatabaseSchema\n")
                 .replace("    def metrics(self, registry", MIGRATING_SCHEMAS + "    def metrics(self, registry"))
    assert migrating.count("def schemas") == 1
    runtime_cli = (repo / "enact" / "cli" / "_runtime.py").read_text()
    broken = (runtime_cli.replace('"problems": list(found.problems),',
                                  '"problems": [*found.problems, "broken on purpose"],')
              .replace('report["ok"] = not found.problems and', 'report["ok"] = not report["problems"] and'))
    assert broken.count("broken on purpose") == 1 and 'not report["problems"]' in broken
    return new_revision(repo, doctor="python -m enact --version",
                        extra={"enact/chat/component.py": migrating + REWRITE_STEP, "enact/cli/_runtime.py": broken})


def schema_versions(home: Path) -> dict[str, int]:
    return {schema["database"]: schema["version"] for schema in status(home, "--verbose")["storage"]["schemas"]}


def test_a_release_that_migrated_and_failed_is_rolled_back_with_the_backup_restored(
    daemons: DaemonFactory, clone: Path, served: list[Path]
) -> None:
    migrating_release_whose_canary_fails(clone)
    home = update_home(daemons, clone)
    daemons.start(home)
    served.append(home)
    for n in range(1, 6):  # accepted before the backup: kept through the restore
        assert run_cli(home, "send", "--conversation", "before", "--message-id", f"b-{n}", f"hello {n}").returncode == 0
    before = schema_versions(home)
    assert before["logs.turns"] == 1
    code, outcome = update(home)
    assert (code, outcome["outcome"]) == (1, "rolled_back"), outcome
    assert outcome["reason"].startswith("the canary failed: runtime check: broken on purpose")
    now = status(home)
    assert now["version"] == enact.__version__
    assert schema_versions(home) == before
    done = run_cli(home, "turns", "--conversation", "before", "--json")
    listed = orjson.loads(done.stdout)
    turns = listed["turns"] if isinstance(listed, dict) else listed
    assert sorted(turn["message_id"] for turn in turns) == [f"b-{n}" for n in range(1, 6)]
    [attempt] = orjson.loads(run_cli(home, "update", "history", "--json").stdout)
    assert "restoring the backup" in attempt["steps"]
    [notice] = owner_notices(home)
    assert notice.startswith("Update rolled back: ") and outcome["attempt"] in notice
    assert "the backup taken before the update at " in notice
    assert "was restored, as the new release had migrated the home's databases: what was accepted after it is " \
        "lost" in notice


def attempts(home: Path) -> list[Any]:
    return list(orjson.loads(run_cli(home, "update", "history", "--json").stdout))


def test_rollback_after_an_update_returns_the_previous_release_which_serves(
    daemons: DaemonFactory, clone: Path, served: list[Path]
) -> None:
    head = git(clone, "rev-parse", "HEAD")
    new = new_revision(clone, doctor="true")
    home = update_home(daemons, clone)
    daemons.start(home)
    served.append(home)
    assert update(home)[1]["outcome"] == "updated"
    assert status(home)["version"] == NEW_VERSION
    done = run_cli(home, "update", "rollback", "--json", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = orjson.loads(done.stdout)
    assert outcome["outcome"] == "rolled_back" and outcome["serving"]["revision"] == head
    assert status(home)["version"] == enact.__version__
    assert Path(os.readlink(home / "releases" / "current")) == Path(outcome["serving"]["environment"])
    listed = attempts(home)
    assert [(a["kind"], a["outcome"]) for a in listed] == [("update", "updated"), ("rollback", "rolled_back")]
    assert [a["to_revision"] for a in listed] == [new, head]
    assert listed[0]["started_at"] <= listed[1]["started_at"]


def test_update_from_the_owners_locked_chat_tells_that_conversation_how_it_ended(
    daemons: DaemonFactory, clone: Path, served: list[Path]
) -> None:
    new_revision(clone, doctor="true")
    home = update_home(daemons, clone)
    daemons.start(home)
    served.append(home)
    done = run_cli(home, "send", "--conversation", "owner", "--json", "/update")
    assert done.returncode == 0, done.stderr
    started = orjson.loads(done.stdout)["reply"]
    assert started.startswith("Update started (pid ")
    wait_for(lambda: [a["outcome"] for a in attempts(home)] == ["updated"], timeout=120, what="the update to end")
    [attempt] = attempts(home)
    assert attempt["origin"] == HUMAN_CLI
    wait_for(lambda: any(reply.startswith("Update done: ") for reply in owner_notices(home)), timeout=30,
             what="the notice in the conversation that asked")
    assert owner_notices(home) == [started, f"Update done: {attempt['reason']} (attempt {attempt['id']})"]
    assert status(home)["version"] == NEW_VERSION


def test_update_in_chat_is_refused_to_a_model_action_and_to_a_strangers_chat(tmp_path: Path) -> None:
    registry = CommandRegistry()
    for command in update_commands():
        registry.register(command)

    class _AlwaysCurrent:
        def is_current(self) -> bool:
            return True

    registry.bind(CommandContext(fence=_AlwaysCurrent(), status=lambda: ""))  # type: ignore[arg-type]

    def asked(origin: str, event_origin: str, *, owners: bool) -> Any:
        return registry.run(CommandCall(name="update", args={}, origin=origin, event_origin=event_origin,
                                        owners=owners, cancel=CancellationToken(), conversation="telegram:5151"))

    by_model = asked(MODEL_ACTION, HUMAN_CLI, owners=True)
    assert not by_model.ok and by_model.text.startswith("refused: update needs a human")
    by_stranger = asked("chat:telegram", "chat:telegram", owners=False)
    assert not by_stranger.ok and by_stranger.text.startswith("refused: update needs the conversation lock")


def test_check_calls_running_the_revision_the_daemon_started_from(daemons: DaemonFactory, clone: Path) -> None:
    started_from = git(clone, "rev-parse", "HEAD")
    home = update_home(daemons, clone)
    daemons.start(home, cwd=clone)  # an editable run of the clone: its checkout is the clone
    assert status(home)["revision"] == started_from
    later = commit(clone, {"later.txt": "committed after the daemon started\n"}, "a later commit")
    found = orjson.loads(run_cli(home, "update", "--check", "--json").stdout)
    assert (found["running"], found["authoritative"], found["possible"]) == (started_from, later, True)
    assert status(home)["revision"] == started_from


def test_under_systemd_the_daemon_that_takes_over_becomes_the_units_main_process(
    daemons: DaemonFactory, tmp_path: Path
) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(tmp_path / "notify"))
        systemd.settimeout(30)
        notify = {"NOTIFY_SOCKET": str(tmp_path / "notify")}
        first = daemons.start(env=notify)
        assert systemd.recv(4096).decode().split("\n") == ["READY=1", f"MAINPID={first.pid}"]
        second = daemons.start(first.home, "--takeover", env=notify)
        said = [systemd.recv(4096).decode(), systemd.recv(4096).decode()]
        assert said == [f"MAINPID={second.pid}", f"READY=1\nMAINPID={second.pid}"]
        assert first.wait_exit(30) == 0
        systemd.setblocking(False)  # the fenced daemon has exited: whatever it said is queued already
        with pytest.raises(BlockingIOError):
            systemd.recv(4096)  # not STOPPING=1: the service goes on in the second daemon


def test_a_successful_update_prunes_all_but_the_serving_and_the_previous_release(
    daemons: DaemonFactory, clone: Path, served: list[Path]
) -> None:
    first = new_revision(clone, doctor="true")
    home = update_home(daemons, clone)
    daemons.start(home)
    served.append(home)
    older = home / "releases" / ("a" * 40)  # a release two updates back
    (older / ".venv").mkdir(parents=True)
    (older / "release.json").write_text(orjson.dumps({"revision": "a" * 40}).decode())
    assert update(home)[1]["outcome"] == "updated"
    assert not older.exists()  # the previous release is enact's first environment, outside releases/
    second = commit(clone, {"later.txt": "a later change\n"}, "a later version")
    code, outcome = update(home)
    assert (code, outcome["outcome"]) == (0, "updated"), outcome
    assert sorted(entry.name for entry in (home / "releases").iterdir()) == sorted([first, second, "current"])
    assert status(home)["version"] == NEW_VERSION
    done = run_cli(home, "update", "rollback", "--json", timeout=120)  # the kept previous release serves again
    assert done.returncode == 0 and orjson.loads(done.stdout)["serving"]["revision"] == first, done.stdout
    assert status(home)["revision"] == first


def test_the_updater_reads_the_status_of_a_newer_release_that_has_more_fields() -> None:
    from enact.messages import encode
    from enact.messages.control import ActorStatus, SchemaVersion, StatusReport, StorageStatus
    from enact.update.daemons import _status_of_any_release

    report = StatusReport(version="9", pid=7, home="/h", generation=3, uptime_s=1.0, metrics_addr="",
                          actors=(ActorStatus(name="inbox", alive=True, mailbox=0, handled=0, restarts=0),),
                          storage=StorageStatus(path="/h/state", map_bytes=1, used_bytes=1, databases=1,
                                                schemas=(SchemaVersion(database="logs.turns", version=2),)))
    document = orjson.loads(encode(report))
    document["body"]["added_later"] = "x"
    document["body"]["actors"][0]["added_later"] = 1
    document["body"]["storage"]["schemas"][0]["added_later"] = True
    assert _status_of_any_release(orjson.dumps(document)) == report


def test_the_updater_reads_the_status_of_a_release_from_before_the_small_status() -> None:
    """What a rollback's daemon of an older release sends to the plain
    ``control.Status`` this updater asks: every actor a record, the storage
    always there, none of the names, stopped, restarts or waiting fields
    ``Status.brief`` came with. The updater reads what it needs (the
    records, the storage's schema versions) from that shape."""
    from enact.messages.control import ActorStatus, SchemaVersion, StorageStatus
    from enact.update.daemons import _status_of_any_release

    older = {"type": "control.StatusReport", "body": {
        "version": "0.0.9", "pid": 7, "home": "/h", "generation": 3, "uptime_s": 1.0, "metrics_addr": "",
        "actors": [{"name": "inbox", "alive": True, "mailbox": 2, "handled": 5, "restarts": 1},
                   {"name": "memory", "alive": False, "mailbox": 0, "handled": 0, "restarts": 0}],
        "storage": {"path": "/h/state", "map_bytes": 1, "used_bytes": 1, "databases": 1,
                    "schemas": [{"database": "logs.turns", "version": 2}]},
    }}
    report = _status_of_any_release(orjson.dumps(older))
    assert report.actors == (  # type: ignore[attr-defined]
        ActorStatus(name="inbox", alive=True, mailbox=2, handled=5, restarts=1),
        ActorStatus(name="memory", alive=False, mailbox=0, handled=0, restarts=0))
    assert report.storage == StorageStatus(  # type: ignore[attr-defined]
        path="/h/state", map_bytes=1, used_bytes=1, databases=1,
        schemas=(SchemaVersion(database="logs.turns", version=2),))
    assert (report.pid, report.metrics_addr) == (7, "")  # type: ignore[attr-defined]


def test_the_updater_asks_the_status_with_the_empty_body_every_release_takes() -> None:
    """Not ``encode(Status())``: it writes ``"brief": false``, which a
    release from before the field refuses (a rollback's daemon)."""
    from enact.messages import decode
    from enact.messages.control import EVERY_RELEASES_STATUS, Status

    assert orjson.loads(EVERY_RELEASES_STATUS) == {"type": "control.Status", "body": {}}
    assert decode(EVERY_RELEASES_STATUS) == Status(brief=False)
