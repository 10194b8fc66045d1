"""SCRAM credentials kept through the storage seam's MetadataStore (``__scram_credentials.json``):
reloaded at start-up, rewritten whole and made durable before an AlterUserScramCredentials is answered,
so an answered change survives a crash. Holds salts and derived keys, never a password. In a cluster
every node shares the document (storage/shared_document.py), so a user altered at one node logs in at
any node after that node's next heartbeat."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from groupd.broker.security.scram import Result, ScramCredential, ScramCredentials
from groupd.protocol.errors import ErrorCode
from groupd.storage.engine import MetadataStore
from groupd.storage.errors import StorageError
from groupd.storage.shared_document import SharedDocument

log = logging.getLogger("groupd.security")
FILE = "__scram_credentials.json"


class ScramStore:
    def __init__(self, metadata: MetadataStore) -> None:
        self.credentials = ScramCredentials()
        self.document = SharedDocument(metadata, FILE, self._followed)

    def credentials_of(self, user: str, mechanism: str) -> ScramCredential | None:
        """The lookup SCRAM authentication uses: always the current credentials, altered or not."""
        return self.credentials.get(user, mechanism)

    def load(self) -> None:
        self.credentials = _parse(self.document.load())
        if self.credentials.items:
            log.info("loaded SCRAM credentials of %d users", len({user for user, _ in self.credentials.items}))

    def _followed(self, raw: bytes | None) -> None:
        """Another node's version (or the last stored one again, after a failed write)."""
        try:
            self.credentials = _parse(raw)
        except RuntimeError as exc:
            log.error("%s; the credentials stay as they were", exc)

    def alter(
        self, deletions: Sequence[tuple[str, int]], upsertions: Sequence[tuple[str, int, int, bytes, bytes]]
    ) -> list[Result]:
        """ScramCredentials.alter made durable: when the document cannot be written nothing changes, and
        every entry that would have succeeded is answered KAFKA_STORAGE_ERROR instead."""
        tried: list[Result] = []

        def mutate() -> tuple[list[Result], bytes | None]:
            results, changed = self.credentials.alter(deletions, upsertions)
            tried[:] = results
            return results, json.dumps(self.credentials.to_json(), indent=1).encode() if changed else None

        try:
            results = self.document.change(mutate)
        except (OSError, StorageError) as exc:
            log.error("SCRAM credentials not saved: %s", exc)
            return [
                Result(r.user, ErrorCode.kafka_storage_error, f"credentials not saved: {exc}")
                if r.error == ErrorCode.none
                else r
                for r in tried
            ]
        altered = [r.user for r in results if r.error == ErrorCode.none]
        if altered:
            log.info("SCRAM credentials altered: %s", ", ".join(altered))
        return results


def _parse(raw: bytes | None) -> ScramCredentials:
    if raw is None:
        return ScramCredentials()
    try:
        return ScramCredentials.from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"cannot read SCRAM credentials from {FILE}: {exc}") from None
