"""LMDB storage: one environment per home, one store per actor."""

from enact.storage._environment import (
    SCHEMA_VERSION,
    Migration,
    OwnershipError,
    SchemaError,
    Storage,
    StorageError,
    StorageStats,
    Store,
    WriteGuard,
)
from enact.storage._records import AppendLog, CorruptRecord, Document, Table, decode_document, encode_document

__all__ = [
    "SCHEMA_VERSION",
    "AppendLog",
    "CorruptRecord",
    "Document",
    "Migration",
    "OwnershipError",
    "SchemaError",
    "Storage",
    "StorageError",
    "StorageStats",
    "Store",
    "Table",
    "WriteGuard",
    "decode_document",
    "encode_document",
]
