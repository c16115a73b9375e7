"""Backups of a home: a consistent copy of its LMDB environment and the
files that configure it, with a manifest that checks them
(``enact backup``; docs/operations.md "Backups")."""
