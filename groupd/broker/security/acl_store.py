"""The ACLs kept durable through the storage seam's MetadataStore (``__acls.json``): rewritten whole and
made durable before CreateAcls or DeleteAcls is answered, read back at start-up, so an answered change
survives a crash. In a cluster every node shares the document (storage/shared_document.py): changed by
compare-and-set, followed at every heartbeat."""

from __future__ import annotations

import json
import logging

from groupd.broker.security.acl import AclBinding
from groupd.storage.engine import MetadataStore

log = logging.getLogger("groupd.security")
KEY = "__acls.json"


def parse(raw: bytes | None) -> list[AclBinding]:
    """The bindings of a stored document (None: none); RuntimeError when it cannot be read."""
    if raw is None:
        return []
    try:
        return [AclBinding.from_json(row) for row in json.loads(raw)["acls"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"cannot read the ACLs from {KEY}: {exc}") from None


def encode(bindings: list[AclBinding]) -> bytes:
    return json.dumps({"acls": [b.to_json() for b in bindings]}, indent=0).encode()


def load(metadata: MetadataStore) -> list[AclBinding]:
    """The bindings stored now (what a restart would find)."""
    return parse(metadata.get(KEY))
