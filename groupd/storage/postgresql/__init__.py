"""The PostgreSQL storage engine (engine.py): partitions, group commit and metadata in one database."""

from groupd.storage.postgresql.engine import PostgresEngine

__all__ = ["PostgresEngine"]
