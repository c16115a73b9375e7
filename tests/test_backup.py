"""Backups through real daemons on real LMDB: taken under chat load, they
verify and restore to the same turns, facts, tasks and reviews; a corrupted
one is named by ``verify``; secrets stay out unless asked for; retention
keeps ``backup.keep``; the schedule takes one backup per due time across a
kill -9; bad input gets one line and changes nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import orjson
from git_repos import make_repo
from home_state import snapshot

from enact.backup.manifest import MANIFEST_NAME
from enact.cli._client import request
from enact.messages.common import HUMAN_CLI
from enact.messages.local import Send
from enact.messages.memory import Remember
from enact.messages.tasks import Submit, Submitted

from conftest import DaemonFactory, run_cli, wait_for

NO_WORKERS = {"ENACT_DAEMON_WORKERS": "0"}
"""Tasks stay queued: what is compared is what was stored."""
COMPARED = (b"logs.turns", b"memory.facts", b"tasks.queue", b"reviews.records")
TOKEN = "123456789:" + "A" * 35


def _backup_dirs(home: Path) -> list[Path]:
    return sorted(path for path in (home / "backups").glob("2*") if (path / MANIFEST_NAME).exists())


def _compared(home: Path) -> dict[bytes, dict[bytes, bytes]]:
    databases = snapshot(home).databases
    return {name: databases.get(name, {}) for name in COMPARED}


def test_a_backup_taken_under_chat_load_verifies_and_restores_to_the_same_records(daemons: DaemonFactory) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    for n in range(20):
        request(daemon.home, Remember(text=f"the owner keeps fact number {n} in mind", origin=HUMAN_CLI))
    repo = make_repo(daemon.home.parent / "repo")
    for n in range(5):
        submitted = request(daemon.home, Submit(request=f"task {n}", repo=str(repo), origin=HUMAN_CLI,
                                                idempotency_key=f"k{n}"))
        assert isinstance(submitted, Submitted), submitted
    stop = threading.Event()
    sent: list[int] = []
    errors: list[BaseException] = []

    def sender(index: int) -> None:
        try:
            while not stop.is_set():
                request(daemon.home, Send(text=f"hello {len(sent)}", conversation=f"c{index}"))
                sent.append(1)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=sender, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(sent) >= 10, what="senders under way")
        created = daemon.cli("backup", "create", "--json")
        at_backup = len(sent)
        wait_for(lambda: len(sent) >= at_backup + 5, what="chat going on after the backup")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not errors
    assert created.returncode == 0, created.stderr
    manifest = orjson.loads(created.stdout)
    backup = Path(manifest["path"])
    assert backup.parent == daemon.home / "backups" and manifest["reason"] == "cli"
    versions = manifest["schema_versions"]
    assert versions["environment"] == 1 and manifest["generation"] == 1
    assert {"logs.turns", "memory.facts", "tasks.queue", "epoch"} <= set(versions) and set(versions.values()) == {1}
    assert (backup.stat().st_mode & 0o777) == 0o700 and (backup / "state" / "data.mdb").stat().st_mode & 0o077 == 0
    verified = run_cli(daemon.home, "backup", "verify", str(backup))
    assert verified.returncode == 0 and ": ok" in verified.stdout, verified.stderr
    in_backup = {name: snapshot(backup).databases.get(name, {}) for name in COMPARED}
    assert len(in_backup[b"memory.facts"]) == 20 and len(in_backup[b"tasks.queue"]) == 5
    assert len(in_backup[b"logs.turns"]) >= 10
    assert daemon.terminate() == 0

    other = daemons.new_home()
    restored = run_cli(other, "backup", "restore", str(backup), "--json")
    assert restored.returncode == 0, restored.stderr
    assert orjson.loads(restored.stdout)["generation"] == 2
    again = daemons.start(other, env=NO_WORKERS)
    assert again.wait_ready().generation == 3
    assert again.terminate() == 0
    after = _compared(other)
    for name in (b"memory.facts", b"tasks.queue", b"reviews.records"):
        assert after[name] == in_backup[name]
    # Events in flight when the backup was taken are finished by the restored
    # daemon: their turns come after the ones the backup holds, which are unchanged.
    assert {key: after[b"logs.turns"][key] for key in in_backup[b"logs.turns"]} == in_backup[b"logs.turns"]


def test_restore_refuses_a_running_daemon_and_takes_over_with_a_new_generation(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    request(daemon.home, Send(text="before the backup"))
    backup = Path(daemon.cli_json("backup", "create", "--json")["path"])
    request(daemon.home, Send(text="after the backup"))
    before = snapshot(daemon.home).databases[b"logs.turns"]

    refused = run_cli(daemon.home, "backup", "restore", str(backup))
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1
    assert "--takeover" in refused.stderr
    assert snapshot(daemon.home).databases[b"logs.turns"] == before

    taken = run_cli(daemon.home, "backup", "restore", str(backup), "--takeover", "--json")
    assert taken.returncode == 0, taken.stderr
    outcome = orjson.loads(taken.stdout)
    assert outcome["took_over"] and outcome["generation"] > 2
    daemon.wait_exit()
    replaced = Path(outcome["replaced"])
    assert snapshot(replaced).databases[b"logs.turns"] == before  # kept aside, not deleted
    assert len(snapshot(daemon.home).databases[b"logs.turns"]) == 1
    again = daemons.start(daemon.home)
    assert again.wait_ready().generation == outcome["generation"] + 1


def test_verify_names_a_flipped_record_and_a_truncated_file(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    daemon = daemons.start(home)
    request(home, Send(text="a-turn-to-corrupt"))
    assert daemon.terminate() == 0
    flipped = Path(run_cli(home, "backup", "create").stdout.strip())
    truncated = Path(run_cli(home, "backup", "create").stdout.strip())

    data = flipped / "state" / "data.mdb"
    raw = data.read_bytes()
    at = raw.index(b'"a-turn-to-corrupt"')
    data.write_bytes(raw[:at] + b"\x00" + raw[at + 1:])
    result = run_cli(home, "backup", "verify", str(flipped))
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1
    # The text's first copy is in the event's receipt, the first record written.
    assert "corrupt record in database 'inbox.receipts' at key b'" in result.stderr
    assert "not valid JSON" in result.stderr

    data = truncated / "state" / "data.mdb"
    data.write_bytes(data.read_bytes()[:4096])
    result = run_cli(home, "backup", "verify", str(truncated))
    assert result.returncode != 0 and "state/data.mdb is 4096 bytes" in result.stderr


def test_secrets_are_left_out_unless_asked_for(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    token_file = home / "telegram-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    (home / "config.toml").write_text(
        '[channels.telegram]\ntoken_file = "' + str(token_file) + '"\n'
        '[runtime]\ntimeout_s = 60\n'
        '[evolve]\ntheme = "the api_key=hunter2secret"\n')
    (home / "config.toml").chmod(0o600)
    (home / "skills").mkdir()
    (home / "skills" / "note.md").write_text("a skill\n")
    assert daemons.start(home).terminate() == 0

    without = orjson.loads(run_cli(home, "backup", "create", "--json").stdout)
    backup = Path(without["path"])
    copied = (backup / "home" / "config.toml").read_text()
    assert "hunter2secret" not in copied and "timeout_s = 60" in copied
    assert not any(TOKEN in path.read_text(errors="replace") for path in backup.rglob("*") if path.is_file())
    assert any("evolve.theme" in line for line in without["left_out"])
    assert any("token_file" in line for line in without["left_out"])
    assert (backup / "home" / "skills" / "note.md").read_text() == "a skill\n"
    assert run_cli(home, "backup", "verify", str(backup)).returncode == 0
    import tomllib
    tomllib.loads(copied)  # still valid TOML

    with_secrets = orjson.loads(run_cli(home, "backup", "create", "--include-secrets", "--json").stdout)
    kept = Path(with_secrets["path"])
    assert "hunter2secret" in (kept / "home" / "config.toml").read_text()
    assert (kept / "home" / "telegram-token").read_text().strip() == TOKEN
    assert with_secrets["include_secrets"] and run_cli(home, "backup", "verify", str(kept)).returncode == 0


def test_retention_keeps_the_newest_backup_keep(daemons: DaemonFactory) -> None:
    daemon = daemons.start(env={"ENACT_BACKUP_KEEP": "2"})
    stranger = daemon.home / "backups" / "00000000T000000.000000Z"
    stranger.mkdir(parents=True)  # not a backup (no manifest): never deleted
    made = [daemon.cli_json("backup", "create", "--json")["path"] for _ in range(4)]
    assert [str(path) for path in _backup_dirs(daemon.home)] == made[-2:]
    assert stranger.is_dir()
    listed = daemon.cli_json("backup", "list", "--json")
    assert [entry["path"] for entry in listed] == made[-2:]


def test_the_schedule_takes_one_backup_per_due_time_across_a_kill_9(daemons: DaemonFactory) -> None:
    schedule = {"ENACT_BACKUP_SCHEDULE": "every 2s", "ENACT_SCHEDULER_TICK_S": "0.2"}
    daemon = daemons.start(env=schedule)
    wait_for(lambda: len(_backup_dirs(daemon.home)) >= 1, what="a scheduled backup")
    daemon.kill9()
    again = daemons.start(daemon.home, env=schedule)
    first = len(_backup_dirs(daemon.home))
    wait_for(lambda: len(_backup_dirs(daemon.home)) >= first + 2, what="two more scheduled backups")
    assert again.terminate() == 0
    dues = [orjson.loads((path / MANIFEST_NAME).read_bytes())["due"] for path in _backup_dirs(daemon.home)]
    assert all(due is not None for due in dues)
    assert len(dues) == len(set(dues))  # never two backups for one due time


def test_bad_input_gets_one_line_and_changes_nothing(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    daemon = daemons.start(home)
    request(home, Send(text="kept"))
    assert daemon.terminate() == 0
    before = snapshot(home).databases
    not_backup = home.parent / "not-a-backup"
    not_backup.mkdir()
    broken = home.parent / "broken"
    broken.mkdir()
    (broken / MANIFEST_NAME).write_text("{not json")
    for path in (not_backup, broken, home.parent / "missing"):
        for command in (("verify", str(path)), ("restore", str(path))):
            result = run_cli(home, "backup", *command)
            assert result.returncode != 0
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "does not parse" in run_cli(home, "backup", "verify", str(broken)).stderr
    assert snapshot(home).databases == before
    assert not list(home.glob("replaced-*"))
