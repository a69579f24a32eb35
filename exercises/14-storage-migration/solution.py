"""Reference solution: the lesson's own migration (operatorlab.storage_migration): rewrite, then record."""

from operatorlab.storage_migration import migrate_storage  # noqa: F401 - what the check calls
