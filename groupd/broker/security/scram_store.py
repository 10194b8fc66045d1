"""SCRAM credentials kept in ``log.dirs`` (``__scram_credentials.json``): reloaded at start-up,
replaced atomically and fsynced before an AlterUserScramCredentials is answered, so an answered
change survives a crash. Holds salts and derived keys, never a password."""

from __future__ import annotations

import json
import logging

from groupd.broker.security.scram import ScramCredential, ScramCredentials
from groupd.storage.engine import MetadataStore

log = logging.getLogger("groupd.security")
FILE = "__scram_credentials.json"


class ScramStore:
    def __init__(self, metadata: MetadataStore) -> None:
        self.metadata = metadata
        self.credentials = ScramCredentials()

    def credentials_of(self, user: str, mechanism: str) -> ScramCredential | None:
        """The lookup SCRAM authentication uses: always the current credentials, altered or not."""
        return self.credentials.get(user, mechanism)

    def load(self) -> None:
        raw = self.metadata.get(FILE)
        if raw is None:
            return
        try:
            self.credentials = ScramCredentials.from_json(json.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"cannot read SCRAM credentials from {FILE}: {exc}") from None
        log.info("loaded SCRAM credentials of %d users", len({user for user, _ in self.credentials.items}))

    def save(self) -> None:
        self.metadata.put(FILE, json.dumps(self.credentials.to_json(), indent=1).encode())
