"""A document several cluster nodes share (docs/cluster.md): bytes under one metadata key, rewritten whole.

Alone, a change is a plain ``put``. In a cluster every write is a compare-and-set over the bytes this node
last read or wrote, so two nodes changing the document at the same moment cannot lose each other's
change: the loser stores nothing, follows the winner's version and makes its change again over it.
``refresh`` (every cluster heartbeat) reads the key and hands a version another node wrote to the owner's
``apply``, so each node's copy is at most one heartbeat old. The topics, ACLs, SCRAM credentials, group
configs and client quotas are such documents; each keeps its parsed state and says how to rebuild it
from bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from groupd.storage.engine import MetadataStore
from groupd.storage.errors import StorageError

log = logging.getLogger("groupd.storage")
T = TypeVar("T")
# compare_and_put(key, expected, value): store value only if the key still holds expected (None: absent)
CompareAndPut = Callable[[str, bytes | None, bytes], bool]
WRITE_ATTEMPTS = 10  # a change whose document another node rewrote meanwhile is tried again this many times


class SharedMetadata(Protocol):
    """What an engine whose metadata several nodes share offers besides MetadataStore (the PostgreSQL
    engine's, groupd/storage/postgresql/metadata.py)."""

    def compare_and_put(self, key: str, expected: bytes | None, value: bytes) -> bool: ...

    def get_many(self, keys: list[str]) -> dict[str, bytes]: ...


class WriteConflict(StorageError):
    """Another node rewrote the document since this node read it: this change was not stored."""


class SharedDocument:
    """One metadata key's bytes, with ``apply(raw)`` rebuilding its owner's state from a version written
    elsewhere (raw None: the key is absent)."""

    def __init__(self, metadata: MetadataStore, key: str, apply: Callable[[bytes | None], None]) -> None:
        self.metadata = metadata
        self.key = key
        self.apply = apply
        # set by the cluster (groupd/broker/shared_documents.py): None alone, where nobody else writes
        self.compare_and_put: CompareAndPut | None = None
        self.seen: bytes | None = None  # the version this node last read or wrote

    @property
    def shared(self) -> bool:
        return self.compare_and_put is not None

    def load(self) -> bytes | None:
        """The stored bytes, read at start-up (the owner parses them: a bad document stops the start)."""
        self.seen = self.metadata.get(self.key)
        return self.seen

    def refresh(self) -> bool:
        """Read the key again; another node's version goes to ``apply``. Whether it changed."""
        return self.saw(self.metadata.get(self.key))

    def saw(self, raw: bytes | None) -> bool:
        """The key holds ``raw`` now (read here or with other keys at once): ``apply`` it when it is new."""
        if raw == self.seen:
            return False
        self.seen = raw
        self.apply(raw)
        return True

    def follow(self) -> None:
        """In a cluster, catch up now rather than at the next heartbeat; alone, nothing."""
        if self.shared:
            self.refresh()

    def catch_up(self) -> None:
        """``follow`` for an answer that may be a heartbeat old (the Describe APIs): when the database cannot
        be read, one log line and the copy this node has, rather than a failed request."""
        try:
            self.follow()
        except StorageError as exc:
            log.warning("answering from this node's copy of %s, which could not be read again: %s", self.key, exc)

    def write(self, data: bytes, put: CompareAndPut | None = None) -> None:
        """Store ``data``; in a cluster only over the version last seen (else WriteConflict, nothing stored),
        by ``put`` when given (a compare-and-set that does more in the same statement)."""
        if self.compare_and_put is None:
            self.metadata.put(self.key, data)
        elif not (put or self.compare_and_put)(self.key, self.seen, data):
            raise WriteConflict(f"{self.key} was changed by another node")
        self.seen = data

    def changing(self, change: Callable[[], T]) -> T:
        """Run ``change`` (which writes, and undoes itself when the write raises). In a cluster: follow
        first, and try again over the newer version while another node keeps winning."""
        if self.compare_and_put is None:
            return change()
        for _ in range(WRITE_ATTEMPTS):
            self.refresh()
            try:
                return change()
            except WriteConflict:
                continue
        raise WriteConflict(f"{self.key} kept changing on other nodes: the change was not stored")

    def change(self, mutate: Callable[[], tuple[T, bytes | None]]) -> T:
        """``changing`` for an owner whose state is wholly the document's: ``mutate`` changes the state and
        returns its answer and the new bytes (None: nothing changed, nothing written). When the write fails
        the state is rebuilt from the version last seen, so nothing unstored stays visible."""

        def attempt() -> T:
            answer, data = mutate()
            if data is not None and data != self.seen:
                try:
                    self.write(data)
                except BaseException:
                    self.apply(self.seen)
                    raise
            return answer

        return self.changing(attempt)
