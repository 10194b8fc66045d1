"""The ACLs kept durable through the storage seam's MetadataStore (``__acls.json``): rewritten whole and
made durable before CreateAcls or DeleteAcls is answered, read back at start-up, so an answered change
survives a crash (and is shared by every node once nodes share a store)."""

from __future__ import annotations

import json
import logging

from groupd.broker.security.acl import AclBinding
from groupd.storage.engine import MetadataStore

log = logging.getLogger("groupd.security")
KEY = "__acls.json"


def load(metadata: MetadataStore) -> list[AclBinding]:
    raw = metadata.get(KEY)
    if raw is None:
        return []
    try:
        bindings = [AclBinding.from_json(row) for row in json.loads(raw)["acls"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"cannot read the ACLs from {KEY}: {exc}") from None
    log.info("loaded %d ACLs", len(bindings))
    return bindings


def save(metadata: MetadataStore, bindings: list[AclBinding]) -> None:
    """Durable when it returns; StorageError or OSError when not (the change must then not be answered)."""
    metadata.put(KEY, json.dumps({"acls": [b.to_json() for b in bindings]}, indent=0).encode())
