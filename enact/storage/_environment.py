"""The one LMDB environment of a home, and the per-actor stores cut from it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from enact.frozen_dataclass import dataclass
from enact.storage._committer import GroupCommitter, Offered, WriteOutcome, apply_each
from enact.storage._errors import (
    DiskFull,
    MigrationFailed,
    OwnershipError,
    SchemaError,
    _is_disk_full,
)
from enact.storage._records import AppendLog, CorruptRecord, Table, decode_document, encode_document
from enact.storage._schemas import (
    UNVERSIONED,
    BeforeMigrating,
    DatabaseSchema,
    MigrationReport,
    database_exists,
    encode_version,
    newer_than_known,
    pending,
    recorded_versions,
    schema_key,
)
from enact.storage._tiers import TieredLog, TieredTable, is_older_tier, older_tier

T = TypeVar("T")

SCHEMA_VERSION = 1
"""The layout this code reads and writes. Bump it with a migration step."""

_META_DB = b"storage.meta"
_SCHEMA_KEY = b"schema"

Migration = Callable[[lmdb.Transaction, "Storage"], None]
"""Moves a home from schema N to N+1 inside one write transaction."""

WriteGuard = Callable[[lmdb.Transaction], None]
"""Runs first in every fenced write transaction; raises to refuse the write."""


@dataclass(frozen=True, slots=True)
class StorageStats:
    path: str
    map_bytes: int
    used_bytes: int
    databases: int


class _SharedExclusiveLock:
    """Many readers and writers, or one map resize: LMDB forbids resizing the
    map while this process has any transaction open.

    A waiting resize holds back new transactions (else a busy reader starves
    it and every writer waits on a full map), except in a thread that already
    holds the lock: its nested read must not wait for the resize that waits
    for it.

    ``shared()`` is on every read and write, so the lock itself is its
    context manager, over a plain mutex (the condition's own lock), rather
    than a generator context manager over an RLock: about half the
    instructions (callgrind), the same rules."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._condition = threading.Condition(self._mutex)
        self._shared = 0
        self._exclusive = False
        self._exclusive_waiting = 0
        self._depth = threading.local()

    def shared(self) -> _SharedExclusiveLock:
        """``with lock.shared():`` holds it shared (``__enter__``/``__exit__``)."""
        return self

    def __enter__(self) -> None:
        depth: int = getattr(self._depth, "value", 0)
        with self._mutex:
            while self._exclusive or (self._exclusive_waiting and not depth):
                self._condition.wait()
            self._shared += 1
        self._depth.value = depth + 1

    def __exit__(self, *_: object) -> None:
        self._depth.value -= 1
        with self._mutex:
            self._shared -= 1
            if self._shared == 0:
                self._condition.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._condition:
            self._exclusive_waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._condition.wait()
            finally:
                self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._condition:
                self._exclusive = False
                self._condition.notify_all()


class Storage:
    """Opens ``<home>/state`` once per process and hands each actor a Store."""

    def __init__(
        self,
        path: Path,
        *,
        map_size: int = 64 << 20,
        max_dbs: int = 64,
        schema_version: int = SCHEMA_VERSION,
        migrations: Mapping[int, Migration] | None = None,
        schemas: Sequence[DatabaseSchema] = (),
        group_commit: bool = True,
    ) -> None:
        """``schemas``: the databases whose version is above 1, as the
        components declare them; a newer home is refused here, before any
        write, and ``migrate`` moves an older one forward. ``group_commit``:
        the write batches that actors flush at the same time share one
        durable commit (``enact.storage._committer``); off, each batch
        commits on its own (the benchmark measures both)."""
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = path
        self._env = lmdb.open(str(path), map_size=map_size, max_dbs=max_dbs, subdir=True, mode=0o600)
        # Readers left behind by a process that was killed would pin old pages.
        self._env.reader_check()
        self._lock = _SharedExclusiveLock()
        self._handles: dict[str, lmdb._Database] = {}
        self._owners: dict[str, str] = {}
        self._guard: WriteGuard | None = None
        self._schemas = {schema.name: schema for schema in schemas}
        self._versions: dict[str, int] | None = None
        self.committer = GroupCommitter(self._env, lambda fn: self._write(fn, guarded=True)) if group_commit else None
        try:
            self._check_schema(schema_version, dict(migrations or {}))
            self._refuse_newer_databases()
        except BaseException:
            # LMDB refuses a second open of one path per process: a refused
            # home must not stay open until the garbage collector notices.
            self._env.close()
            raise

    # -- set-up -----------------------------------------------------------

    def _check_schema(self, current: int, migrations: dict[int, Migration]) -> None:
        meta = self._handle(_META_DB.decode())

        def check(txn: lmdb.Transaction) -> None:
            raw = txn.get(_SCHEMA_KEY, db=meta)
            if raw is None:
                txn.put(_SCHEMA_KEY, encode_document({"schema": current}, version=1), db=meta)
                return
            try:
                found = decode_document(bytes(raw), database=_META_DB.decode(), key=_SCHEMA_KEY).get("schema")
            except CorruptRecord as error:
                raise SchemaError(f"the schema record of {self.path} cannot be read: {error}") from None
            if not isinstance(found, int) or isinstance(found, bool):
                raise SchemaError(f"the schema record of {self.path} is not a number: {found!r}")
            if found > current:
                raise SchemaError(
                    f"{self.path} was written by a newer enact (schema {found}; this one reads {current}); "
                    "upgrade enact to open it"
                )
            for step in range(found, current):
                migrate = migrations.get(step)
                if migrate is None:
                    raise SchemaError(f"{self.path} has schema {step} and no migration to {step + 1} exists")
                migrate(txn, self)
            if found != current:
                txn.put(_SCHEMA_KEY, encode_document({"schema": current}, version=1), db=meta)

        self._write(check, guarded=False)

    def _refuse_newer_databases(self) -> None:
        meta = self._handle(_META_DB.decode())
        refusal = newer_than_known(self._read(lambda txn: recorded_versions(txn, meta, self.path)),
                                   self._schemas, self.path)
        if refusal is not None:
            raise SchemaError(refusal)

    def migrate(self, before_migrating: BeforeMigrating) -> MigrationReport:
        """Move every declared database that is behind its current version
        forward, after ``before_migrating`` has taken a backup: all in one
        write transaction, the new versions recorded in it. A step that
        raises aborts it (MigrationFailed naming the database and the step)."""
        meta = self._handle(_META_DB.decode())
        plan = self._read(lambda txn: pending(txn, recorded_versions(txn, meta, self.path), self._schemas.values()))
        if not plan:
            return MigrationReport(databases={}, backup=None)
        backup = before_migrating(dict(plan))
        # Opened outside the migration: a handle opened in a transaction that
        # aborts is closed with it, and would be handed out broken afterwards.
        # A database kept in two trees is migrated in both (enact.storage._tiers).
        handles = {name: [self._handle(name), *self._older_tier_handle(name)] for name in plan}

        def run_steps(txn: lmdb.Transaction) -> None:
            for name, (found, current) in plan.items():
                for step in range(found, current):
                    try:
                        for handle in handles[name]:
                            self._schemas[name].migrations[step](txn, handle)
                    except (lmdb.MapFullError, lmdb.MapResizedError):
                        raise  # the whole migration is retried once the map has grown
                    except Exception as error:
                        raise MigrationFailed(
                            f"database {name}: the migration from schema version {step} to {step + 1} failed "
                            f"({type(error).__name__}: {' '.join(str(error).split())}); nothing was changed"
                        ) from error
                txn.put(schema_key(name), encode_version(current), db=meta)

        self._versions = None
        try:
            self._write(run_steps, guarded=True)
        finally:
            self._versions = None
        return MigrationReport(databases=plan, backup=backup)

    def schema_versions(self) -> dict[str, int]:
        """Every database's recorded schema version. Kept once read (status
        asks on every request): only this process records versions, at open
        and in ``migrate``, which forget it; another daemon migrating this
        home has taken it over, and this one is fenced."""
        versions = self._versions
        if versions is None:
            meta = self._handle(_META_DB.decode())
            versions = self._versions = self._read(lambda txn: recorded_versions(txn, meta, self.path))
        return dict(versions)

    def _prepare(self, databases: Sequence[str]) -> None:
        """Give each database with no version record one (its current version
        when it is new, version 1 when it was written before versions were)
        and open the handles not open yet, in one write transaction: each
        commit costs an fsync, and one by one a daemon's first start on a
        home made some sixty. A handle is kept once the transaction commits
        only: one opened in a transaction that aborts is closed with it."""
        meta = self._handle(_META_DB.decode())
        missing = [name for name in dict.fromkeys(databases) if name not in self._handles]

        def unrecorded(txn: lmdb.Transaction) -> list[str]:
            # An older tier is its database's: it has no version of its own.
            return [name for name in databases
                    if not is_older_tier(name) and txn.get(schema_key(name), db=meta) is None]

        if not missing and not self._read(unrecorded):
            return

        def prepare(txn: lmdb.Transaction) -> dict[str, lmdb._Database]:
            for name in unrecorded(txn):  # before the opening below creates the new ones
                schema = self._schemas.get(name)
                version = UNVERSIONED if database_exists(txn, name) else schema.version if schema else 1
                txn.put(schema_key(name), encode_version(version), db=meta)
            return {name: self._env.open_db(name.encode(), txn=txn) for name in missing}

        self._versions = None
        try:
            self._handles.update(self._write(prepare, guarded=False))
        finally:
            self._versions = None

    def _older_tier_handle(self, name: str) -> list[lmdb._Database]:
        """The handle of ``name``'s older tier, if it has one."""
        tier = older_tier(name)
        exists = self._read(lambda txn: database_exists(txn, tier))
        return [self._handle(tier)] if exists else []

    def _handle(self, name: str) -> lmdb._Database:
        handle = self._handles.get(name)
        if handle is None:
            with self._lock.shared():
                handle = self._env.open_db(name.encode())
            self._handles[name] = handle
        return handle

    def open_database(self, txn: lmdb.Transaction, name: str) -> lmdb._Database:
        """A database handle opened inside ``txn``, for migration steps.

        A migration runs inside the schema transaction, where ``grant`` would
        wait forever for LMDB's write lock (held by that same transaction)."""
        handle = self._handles.get(name)
        if handle is None:
            handle = self._env.open_db(name.encode(), txn=txn)
            self._handles[name] = handle
        return handle

    def grant(self, owner: str, databases: Sequence[str]) -> Store:
        """Give ``owner`` its databases; another owner's database is refused."""
        for name in databases:
            if name == _META_DB.decode():
                raise OwnershipError(f"{owner} asked for database {name!r}, which storage itself owns")
            holder = self._owners.get(name)
            if holder is not None and holder != owner:
                raise OwnershipError(f"{owner} asked for database {name!r}, which {holder} owns")
        for name in databases:
            self._owners[name] = owner
        self._prepare(databases)
        return Store(self, owner, {name: self._handle(name) for name in databases})

    def set_write_guard(self, guard: WriteGuard | None) -> None:
        self._guard = guard

    # -- transactions -----------------------------------------------------

    def _read(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        while True:
            try:
                with self._lock.shared(), self._env.begin() as txn:
                    return fn(txn)
            except lmdb.MapResizedError:
                self._adopt_resize()

    def _write(self, fn: Callable[[lmdb.Transaction], T], *, guarded: bool) -> T:
        while True:
            try:
                with self._lock.shared(), self._env.begin(write=True) as txn:
                    if guarded and self._guard is not None:
                        self._guard(txn)
                    return fn(txn)
            except lmdb.MapFullError:
                self._grow()
            except lmdb.MapResizedError:
                self._adopt_resize()
            except lmdb.Error as error:
                if _is_disk_full(error, self.path):
                    raise DiskFull(self.path) from None
                raise

    def _grow(self) -> None:
        with self._lock.exclusive():
            self._env.set_mapsize(self._env.info()["map_size"] * 2)

    def _adopt_resize(self) -> None:
        with self._lock.exclusive():
            self._env.set_mapsize(0)

    # -- facts ------------------------------------------------------------

    def stats(self) -> StorageStats:
        with self._lock.shared():
            info = self._env.info()
            stat = self._env.stat()
        used = (info["last_pgno"] + 1) * stat["psize"]
        return StorageStats(
            path=str(self.path), map_bytes=info["map_size"], used_bytes=used, databases=len(self._handles)
        )

    def copy_to(self, directory: Path) -> None:
        """A consistent, compacted copy of the whole environment into the
        empty ``directory`` (a backup): LMDB copies from one read
        transaction, so writers go on meanwhile."""
        with self._lock.shared():
            self._env.copy(str(directory), compact=True)

    def close(self) -> None:
        if self.committer is not None:
            self.committer.close()  # what is still offered commits first
        with self._lock.exclusive():
            self._env.close()


class Store:
    """One actor's view of storage: its own databases and nothing else."""

    def __init__(self, storage: Storage, owner: str, handles: dict[str, lmdb._Database]) -> None:
        self._storage = storage
        self.owner = owner
        self._handles = handles

    def handle(self, name: str) -> lmdb._Database:
        try:
            return self._handles[name]
        except KeyError:
            raise OwnershipError(f"{self.owner} does not own database {name!r}") from None

    def table(self, name: str, *, version: int = 1) -> Table:
        return Table(name, self.handle(name), version=version)

    def log(self, name: str, *, version: int = 1) -> AppendLog:
        return AppendLog(name, self.handle(name), version=version)

    def tiered_table(self, name: str, *, version: int = 1) -> TieredTable:
        """``name`` kept in two trees (``enact.storage._tiers``); the owner is granted both."""
        return TieredTable(name, self.handle(name), self.handle(older_tier(name)), version=version)

    def tiered_log(self, name: str, *, version: int = 1) -> TieredLog:
        return TieredLog(name, self.handle(name), self.handle(older_tier(name)), version=version)

    def read(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        return self._storage._read(fn)

    def write(self, fn: Callable[[lmdb.Transaction], T], *, fenced: bool = True) -> T:
        """Run ``fn`` in one durable write transaction; committed on return.

        Fenced writes fail with the guard's error once another daemon owns
        the home, inside the same transaction, so no stale write can land.
        """
        return self._storage._write(fn, guarded=fenced)

    def copy_to(self, directory: Path) -> None:
        """The whole environment copied (``Storage.copy_to``): a backup reads
        every database, not only this owner's."""
        self._storage.copy_to(directory)

    def write_each(self, fns: Sequence[Callable[[lmdb.Transaction], Any]]) -> list[WriteOutcome]:
        """Group commit: run each ``fn`` in its own nested transaction of one
        fenced write transaction, and commit once, together with the batches
        other actors flush meanwhile (``Storage.committer``). A ``fn`` that
        raises is rolled back alone; the others still commit. Returns, in
        order, each result or the exception it raised."""
        storage = self._storage
        if storage.committer is not None:
            return storage.committer.commit(fns)
        return storage._write(lambda txn: apply_each(storage._env, txn, fns), guarded=True)

    def offer(self, fns: Sequence[Callable[[lmdb.Transaction], Any]]) -> Offered | None:
        """``write_each`` without waiting, for writes nobody waits for: they
        go into the next group commit (``GroupCommitter.offer``); None when
        group commit is off (then commit them with ``write_each``)."""
        committer = self._storage.committer
        return committer.offer(fns) if committer is not None else None
