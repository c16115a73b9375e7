"""LMDB storage: one environment per home, one store per actor."""

from enact.storage._environment import SCHEMA_VERSION, Migration, Storage, StorageStats, Store, WriteGuard
from enact.storage._errors import DiskFull, MigrationFailed, OwnershipError, SchemaError, StorageError
from enact.storage._records import (
    AppendLog,
    CorruptRecord,
    Document,
    RecordTable,
    Table,
    decode_document,
    decode_record,
    encode_document,
    encode_record,
)
from enact.storage._schemas import (
    UNVERSIONED,
    BeforeMigrating,
    DatabaseSchema,
    MigrationReport,
    MigrationStep,
    recorded_versions,
)
from enact.storage._tiers import TieredLog, TieredTable, older_tier

__all__ = [
    "SCHEMA_VERSION",
    "UNVERSIONED",
    "AppendLog",
    "BeforeMigrating",
    "CorruptRecord",
    "DatabaseSchema",
    "DiskFull",
    "Document",
    "Migration",
    "MigrationFailed",
    "MigrationReport",
    "MigrationStep",
    "OwnershipError",
    "RecordTable",
    "SchemaError",
    "Storage",
    "StorageError",
    "StorageStats",
    "Store",
    "Table",
    "TieredLog",
    "TieredTable",
    "WriteGuard",
    "decode_document",
    "decode_record",
    "encode_document",
    "encode_record",
    "older_tier",
    "recorded_versions",
]
