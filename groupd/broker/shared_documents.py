"""The metadata documents a cluster's nodes share besides the topics (docs/cluster.md): ACLs, SCRAM
credentials, group configs and client quotas. Each is a storage/shared_document.py SharedDocument; here
they are switched to compare-and-set and followed together, in one database round trip per heartbeat, and
each at once when the database notifies its change (groupd/cluster/changes.py), so an authorization, a
SASL login or a quota at any node sees a change made at another node within milliseconds, and within one
heartbeat (``cluster.lease.ms / 4``) should the notification be lost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupd.storage.shared_document import SharedDocument, SharedMetadata

if TYPE_CHECKING:
    from groupd.broker.app import Broker


class SharedDocuments:
    def __init__(self, metadata: SharedMetadata, documents: list[SharedDocument]) -> None:
        self.metadata = metadata
        self.documents = documents
        for document in documents:
            document.compare_and_put = metadata.compare_and_put

    @classmethod
    def of(cls, broker: Broker, metadata: SharedMetadata) -> SharedDocuments:
        """The broker's shared documents but the topics (theirs is followed first, with its listeners)."""
        stores = (broker.access, broker.scram, broker.group_configs, broker.quota_store)
        return cls(metadata, [store.document for store in stores])

    def refresh(self, key: str | None = None) -> None:
        """Follow what other nodes changed: every document in one read (each heartbeat, key None), or the
        one under ``key`` (the database notified its change: groupd/cluster/changes.py)."""
        documents = [d for d in self.documents if key is None or d.key == key]
        if documents:
            found = self.metadata.get_many([d.key for d in documents])
            for document in documents:
                document.saw(found.get(document.key))
