"""LMDB storage: one environment per home, one store per actor."""

from enact.storage._environment import (
    SCHEMA_VERSION,
    DiskFull,
    Migration,
    OwnershipError,
    SchemaError,
    Storage,
    StorageError,
    StorageStats,
    Store,
    WriteGuard,
)
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

__all__ = [
    "SCHEMA_VERSION",
    "AppendLog",
    "CorruptRecord",
    "DiskFull",
    "Document",
    "Migration",
    "OwnershipError",
    "RecordTable",
    "SchemaError",
    "Storage",
    "StorageError",
    "StorageStats",
    "Store",
    "Table",
    "WriteGuard",
    "decode_document",
    "decode_record",
    "encode_document",
    "encode_record",
]
