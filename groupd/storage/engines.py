"""The storage engines a broker can run on, by the name ``storage.engine`` gives them.

The one place an engine is registered: the broker (broker/app.py) builds its engine from here, the
configuration accepts exactly these names, and the seam's contract tests (tests/storage/contract/) run
against every one. An engine is a factory from the broker's configuration, so each reads its own keys
(``log.dirs`` for the local engine) and nothing else in the broker knows which engine it has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from groupd.storage.engine import StorageEngine
from groupd.storage.local import LocalEngine
from groupd.storage.memory import MemoryEngine

EngineFactory = Callable[[Mapping[str, Any]], StorageEngine]
"""Builds an engine from the broker's configuration (a ``Config``, or any mapping of its keys)."""


def _local(config: Mapping[str, Any]) -> StorageEngine:
    return LocalEngine(
        Path(config["log.dirs"]),
        max_open_files=config.get("log.max.open.files", 0),
        index_cache_blocks=config.get("log.index.cache.blocks"),
    )


def _memory(config: Mapping[str, Any]) -> StorageEngine:
    return MemoryEngine(str(config["log.dirs"]))


def _postgresql(config: Mapping[str, Any]) -> StorageEngine:
    from groupd.storage.postgresql import PostgresEngine  # psycopg is imported only by who runs it
    from groupd.storage.postgresql.connection import resolve_url

    url = resolve_url(config.get("storage.postgresql.url") or "", config.get("storage.postgresql.password.file"))
    return PostgresEngine(url)


ENGINES: dict[str, EngineFactory] = {
    "local": _local,  # Kafka's segment files under log.dirs: the default, needs nothing else
    # tests only: everything in process memory, log.dirs only names the store (storage/memory.py)
    "memory": _memory,
    "postgresql": _postgresql,  # one PostgreSQL database (storage.postgresql.url): docs/storage.md
}


def build(config: Mapping[str, Any]) -> StorageEngine:
    """The engine ``storage.engine`` names (the configuration has already refused unknown names)."""
    return ENGINES[config["storage.engine"]](config)
