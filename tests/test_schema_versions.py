"""Each database's schema version, in one process on a real LMDB
environment: recorded, refused when newer, migrated after a backup."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import lmdb
import pytest
from component_cases import Pong
from roster_services import daemon_parts

from enact import components
from enact.actors.supervisor import ActorSpec
from enact.components import Component, ComponentError, Components, DaemonParts
from enact.storage import (
    DatabaseSchema,
    MigrationFailed,
    SchemaError,
    Storage,
    decode_document,
    encode_document,
)


def _add_one(txn: lmdb.Transaction, things: lmdb._Database) -> None:
    for key, raw in list(txn.cursor(db=things)):
        document = decode_document(bytes(raw), database="things", key=bytes(key))
        txn.put(bytes(key), encode_document({"n": document["n"] + 1}, version=2), db=things)


THINGS_V2 = DatabaseSchema("things", version=2, migrations={1: _add_one})


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _write_unversioned_things(state: Path) -> None:
    """``things`` as a release before versions wrote it: records, no version record."""
    env = lmdb.open(str(state), max_dbs=8, subdir=True)
    with env.begin(write=True) as txn:
        txn.put(b"a", encode_document({"n": 1}, version=1), db=env.open_db(b"things", txn=txn))
    env.close()


def _things(storage: Storage) -> dict[str, object]:
    store = storage.grant("tester", ["things"])
    return store.read(lambda txn: store.table("things", version=2).get(txn, b"a")) or {}


def test_a_new_database_records_its_current_version_when_granted(state: Path) -> None:
    storage = Storage(state, map_size=1 << 20, schemas=[THINGS_V2])
    try:
        storage.grant("tester", ["things", "others"])
        assert storage.schema_versions() == {"things": 2, "others": 1}
        assert storage.migrate(lambda plan: pytest.fail("nothing to back up")).databases == {}
    finally:
        storage.close()


def test_a_database_written_before_versions_is_at_version_1_and_migrated_after_the_backup(state: Path) -> None:
    _write_unversioned_things(state)
    storage = Storage(state, map_size=1 << 20, schemas=[THINGS_V2])
    backed_up: list[tuple[Mapping[str, tuple[int, int]], object]] = []

    def backup(plan: Mapping[str, tuple[int, int]]) -> Path:
        backed_up.append((plan, _things(storage)))  # what the backup sees: the home as it was
        return state.parent / "backup"

    try:
        report = storage.migrate(backup)
        assert backed_up == [({"things": (1, 2)}, {"n": 1})]
        assert (report.databases, report.backup) == ({"things": (1, 2)}, state.parent / "backup")
        assert _things(storage) == {"n": 2}
        assert storage.schema_versions() == {"things": 2}
        assert storage.migrate(lambda plan: pytest.fail("already migrated")).databases == {}
    finally:
        storage.close()


def test_a_database_newer_than_this_enact_is_refused_in_one_line_before_anything_is_written(state: Path) -> None:
    storage = Storage(state, map_size=1 << 20, schemas=[THINGS_V2])
    storage.grant("tester", ["things"])
    storage.close()
    data = (state / "data.mdb").read_bytes()
    with pytest.raises(SchemaError) as refused:
        Storage(state, map_size=1 << 20)  # an enact that knows things at version 1
    assert str(refused.value) == (
        f"database things in {state} was written by a newer enact (schema version 2; this one reads 1): "
        "upgrade enact, or restore a backup taken before the upgrade")
    assert (state / "data.mdb").read_bytes() == data


def test_a_failing_step_aborts_the_whole_migration_naming_the_database_and_step(state: Path) -> None:
    _write_unversioned_things(state)

    def broken(txn: lmdb.Transaction, things: lmdb._Database) -> None:
        _add_one(txn, things)
        raise KeyError("n")

    other = DatabaseSchema("others", version=2, migrations={1: lambda txn, db: None})
    env = lmdb.open(str(state), max_dbs=8, subdir=True)
    with env.begin(write=True) as txn:
        env.open_db(b"others", txn=txn)
    env.close()
    storage = Storage(state, map_size=1 << 20, schemas=[other, DatabaseSchema("things", 2, {1: broken})])
    try:
        with pytest.raises(MigrationFailed) as failed:
            storage.migrate(lambda plan: state.parent / "backup")
        assert str(failed.value) == ("database things: the migration from schema version 1 to 2 failed "
                                     "(KeyError: 'n'); nothing was changed")
        assert storage.schema_versions() == {}  # not even the step of ``others``, which passed
        assert _things(storage) == {"n": 1}
    finally:
        storage.close()


def test_a_schema_declares_every_step_to_its_version() -> None:
    with pytest.raises(ValueError, match="things: version 3 has no migration from version 2 to 3"):
        DatabaseSchema("things", version=3, migrations={1: _add_one})
    with pytest.raises(ValueError, match="things: a migration from version 3 does not lead to version 2"):
        DatabaseSchema("things", version=2, migrations={1: _add_one, 3: _add_one})


class _Keeps(Component):
    def __init__(self, name: str, *schemas: DatabaseSchema) -> None:
        self.name = name  # type: ignore[misc]
        self._schemas = schemas

    def actors(self, parts: DaemonParts) -> list[ActorSpec]:
        return [ActorSpec(name=self.name, actor=Pong, databases=("things",))]

    def schemas(self) -> tuple[DatabaseSchema, ...]:
        return self._schemas


def test_a_schema_is_declared_by_the_one_component_whose_actors_keep_the_database(tmp_path: Path) -> None:
    assert Components(items=(_Keeps("keeper", THINGS_V2),)).schemas() == [THINGS_V2]
    twice = Components(items=(_Keeps("keeper", THINGS_V2), _Keeps("other", THINGS_V2)))
    with pytest.raises(ComponentError, match=r"^component other: the schema of database things is already "
                                             r"declared by keeper$"):
        twice.schemas()
    stranger = Components(items=(_Keeps("keeper", DatabaseSchema("elsewhere", version=2,
                                                                 migrations={1: _add_one})),))
    with pytest.raises(ComponentError, match=r"^component keeper: it declares the schema of database elsewhere, "
                                             r"which none of its actors keeps$"):
        components.component_actors(stranger, daemon_parts(tmp_path))
