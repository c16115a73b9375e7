"""Schema versions through real daemons, on a home written by the previous
release (tests/data/previous_home.jsonl, made by make_previous_home.py with
the ledger test extension, tests/schema_fixture, at its version 1)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
import orjson
import pytest
from home_state import snapshot

from enact.home import STATE_DIR

from conftest import DaemonFactory, run_cli

DATA = Path(__file__).parent / "data" / "previous_home.jsonl"
LEDGER = Path(__file__).parent / "schema_fixture"
ENTRIES = "ledger.entries"
LEDGER_TEXTS = ["first entry", "the second entry", "a third and last entry"]


@pytest.fixture(scope="module")
def ledger_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PYTHONPATH that makes the installed enact-ledger package visible."""
    root = tmp_path_factory.mktemp("ledger")
    source = root / "source"
    shutil.copytree(LEDGER, source)  # pip builds in the source tree; keep tests/ clean
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(root / "site"), str(source)],
        check=True, capture_output=True, timeout=120,
    )
    return os.pathsep.join(filter(None, [str(root / "site"), os.environ.get("PYTHONPATH", "")]))


def previous_home(home: Path, *, leave_out: str = "") -> None:
    """The previous release's home: its records, loaded into a fresh environment."""
    env = lmdb.open(str(home / STATE_DIR), max_dbs=64, subdir=True, mode=0o600)
    try:
        with env.begin(write=True) as txn:
            for line in DATA.read_bytes().splitlines():
                record = orjson.loads(line)
                if record["database"] == leave_out:
                    continue
                handle = env.open_db(record["database"].encode(), txn=txn)
                if "key" in record:
                    txn.put(base64.b64decode(record["key"]), base64.b64decode(record["value"]), db=handle)
    finally:
        env.close()


def _records(home: Path, *, leaving_out_the_claim: bool = False) -> dict[bytes, dict[bytes, bytes]]:
    """Every record of the home; without the claim's (the generation a start takes) when asked."""
    databases = snapshot(home).databases
    if leaving_out_the_claim:
        databases.pop(b"epoch", None)
        databases[b"storage.meta"].pop(b"schema:epoch", None)
    return databases


def _refusals(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("enact: ")]


def _schemas(status: dict[str, object]) -> dict[str, int]:
    storage = status["storage"]
    assert isinstance(storage, dict)
    return {row["database"]: row["version"] for row in storage["schemas"]}


def _stored_entries(home: Path) -> list[dict[str, object]]:
    return [orjson.loads(raw) for raw in snapshot(home).databases[ENTRIES.encode()].values()]


def test_a_home_written_by_the_previous_release_is_migrated_after_a_backup(
    daemons: DaemonFactory, ledger_path: str
) -> None:
    home = daemons.new_home()
    previous_home(home)
    before = _records(home)
    assert b"schema:" + ENTRIES.encode() not in before[b"storage.meta"]  # the previous release kept none

    daemon = daemons.start(home, env={"PYTHONPATH": ledger_path, "LEDGER_SCHEMA_VERSION": "2"})

    assert _stored_entries(home) == [{"text": text, "words": len(text.split()), "v": 2} for text in LEDGER_TEXTS]
    migrated = [line for line in daemon.log_text().splitlines() if "migrated database" in line]
    [backup] = (home / "backups").iterdir()
    assert len(migrated) == 1
    assert f"migrated database {ENTRIES} from schema version 1 to 2 (backup before it: {backup})" in migrated[0]
    # The backup holds the home as the previous release left it, and says so.
    manifest = orjson.loads((backup / "manifest.json").read_bytes())
    assert manifest["reason"] == f"pre-migration: {ENTRIES} 1 to 2"
    assert manifest["schema_versions"][ENTRIES] == 1
    assert run_cli(home, "backup", "verify", str(backup), env={"PYTHONPATH": ledger_path}).returncode == 0
    copy = lmdb.open(str(backup / "state"), readonly=True, max_dbs=64, lock=False)
    try:
        with copy.begin(db=copy.open_db(ENTRIES.encode(), create=False)) as txn:
            assert [orjson.loads(raw) for _, raw in txn.cursor()] == [{"text": t, "v": 1} for t in LEDGER_TEXTS]
    finally:
        copy.close()
    # Every other database is as it was, each now at version 1; the chat turn is still there.
    after = _records(home)
    for name in (b"logs.turns", b"inbox.receipts", b"runtime.sessions"):
        assert after[name] == before[name]
    status = daemon.cli_json("status", "--json", "--verbose", env={"PYTHONPATH": ledger_path})
    schemas = _schemas(status)
    assert schemas[ENTRIES] == 2
    assert {name: version for name, version in schemas.items() if name != ENTRIES} == dict.fromkeys(
        (name for name in schemas if name != ENTRIES), 1)
    assert {"logs.turns", "memory.facts", "tasks.queue", "epoch"} <= set(schemas)
    shown = run_cli(home, "status", "--verbose", env={"PYTHONPATH": ledger_path}).stdout
    assert f"schemas  {len(schemas) - 1} databases at version 1; {ENTRIES} at version 2" in shown.splitlines()
    assert daemon.terminate() == 0

    # Migrated once: the next start neither backs up nor migrates again.
    again = daemons.start(home, env={"PYTHONPATH": ledger_path, "LEDGER_SCHEMA_VERSION": "2"})
    assert again.terminate() == 0
    assert len(list((home / "backups").iterdir())) == 1
    assert "migrated database" not in again.log_text()


def test_an_enact_older_than_the_home_refuses_it_in_one_line_and_changes_nothing(
    daemons: DaemonFactory, ledger_path: str
) -> None:
    home = daemons.new_home()
    previous_home(home)
    env = lmdb.open(str(home / STATE_DIR), max_dbs=64)
    with env.begin(write=True) as txn:  # as the newer enact recorded it once it had migrated
        txn.put(b"schema:" + ENTRIES.encode(), b'{"version":2,"v":1}', db=env.open_db(b"storage.meta", txn=txn))
    env.close()
    data = (home / STATE_DIR / "data.mdb").read_bytes()

    daemon = daemons.start(home, env={"PYTHONPATH": ledger_path}, wait=False)  # the ledger at version 1

    assert daemon.wait_exit() == 2
    assert _refusals(daemon.log_text()) == [
        f"enact: database {ENTRIES} in {home / STATE_DIR} was written by a newer enact (schema version 2; "
        "this one reads 1): upgrade enact, or restore a backup taken before the upgrade"
    ]
    assert (home / STATE_DIR / "data.mdb").read_bytes() == data
    assert not (home / "backups").exists()


def test_a_failing_migration_leaves_the_home_unchanged_and_the_daemon_refuses_to_start(
    daemons: DaemonFactory, ledger_path: str
) -> None:
    home = daemons.new_home()
    previous_home(home)
    before = _records(home)
    env = {"PYTHONPATH": ledger_path, "LEDGER_SCHEMA_VERSION": "2"}

    daemon = daemons.start(home, env={**env, "LEDGER_MIGRATION": "fail"}, wait=False)

    assert daemon.wait_exit() == 2
    assert _refusals(daemon.log_text()) == [
        f"enact: database {ENTRIES}: the migration from schema version 1 to 2 failed "
        "(ValueError: entry 00000000 cannot be counted); nothing was changed"
    ]
    # The step had rewritten an entry when it raised: none of it stayed.
    assert _records(home, leaving_out_the_claim=True) == {
        name: records for name, records in before.items() if name != b"epoch"}
    assert len(list((home / "backups").iterdir())) == 1  # taken before the step ran
    # The fixed release migrates the same home.
    fixed = daemons.start(home, env=env)
    assert _schemas(fixed.cli_json("status", "--json", "--verbose", env={"PYTHONPATH": ledger_path}))[ENTRIES] == 2
    assert fixed.terminate() == 0
    assert len(list((home / "backups").iterdir())) == 2  # its own backup beside the first, never over it


def test_a_database_a_later_version_adds_starts_at_its_current_version(
    daemons: DaemonFactory, ledger_path: str
) -> None:
    home = daemons.new_home()
    previous_home(home, leave_out=ENTRIES)  # the previous release had no ledger

    daemon = daemons.start(home, env={"PYTHONPATH": ledger_path, "LEDGER_SCHEMA_VERSION": "2"})

    schemas = _schemas(daemon.cli_json("status", "--json", "--verbose", env={"PYTHONPATH": ledger_path}))
    assert schemas[ENTRIES] == 2
    assert set(schemas.values()) == {1, 2}
    assert not (home / "backups").exists()  # nothing to migrate, so nothing backed up
    assert "migrated database" not in daemon.log_text()
    assert daemon.terminate() == 0
