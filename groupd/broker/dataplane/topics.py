"""The topic registry: names, ids, partition counts and per-topic configs, durable in the storage engine.

It is a small JSON document under one metadata key, rewritten whole and atomically (storage/engine.py
MetadataStore) on every change: topics change rarely and a restart must find exactly what was
acknowledged. In a cluster the nodes share it (storage/shared_document.py).
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from groupd.protocol.errors import ErrorCode
from groupd.storage.engine import MetadataStore
from groupd.storage.shared_document import CompareAndPut, SharedDocument, WriteConflict

__all__ = ["REGISTRY_FILE", "Topic", "TopicError", "TopicRegistry", "WriteConflict", "validate_name"]

REGISTRY_FILE = "topics.json"
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_name(name: str | None) -> None:
    """Kafka's Topic.validate: 1-249 of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name:
        raise TopicError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL.match(name):
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


Listener = Callable[[Topic], None]
T = TypeVar("T")


class TopicRegistry:
    def __init__(self, metadata: MetadataStore) -> None:
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self.on_create: list[Listener] = []
        self.on_delete: list[Listener] = []
        self.on_grow: list[Callable[[Topic, int], None]] = []
        # names no data topic may take (the internal topics', whose directories they would share)
        self.reserved: tuple[str, ...] = ()
        # in a cluster (docs/cluster.md): told of config changes made on another node; the document is
        # then written by compare-and-set over the version this node last read or wrote
        self.on_configs: list[Listener] = []
        self.document = SharedDocument(metadata, REGISTRY_FILE, self._followed)
        # True while the listeners hear of a change another node made (refresh): the storage is shared, and
        # what the change removes was removed by that node, perhaps under a name that is already new
        self.following = False
        # in a cluster: the compare-and-set that creates a topic and clears what its name left behind at
        # the same instant (PgMetadata.claim_topic); creations then open their partitions after winning
        self.claim: Callable[..., bool] | None = None

    def load(self) -> None:
        raw = self.document.load()
        if raw is None:
            return
        doc = json.loads(raw)
        for entry in doc["topics"]:
            topic = Topic(entry["name"], uuid.UUID(entry["id"]), entry["partitions"], dict(entry.get("configs", {})))
            self._by_name[topic.name] = topic
            self._by_id[topic.topic_id] = topic

    @property
    def compare_and_put(self) -> CompareAndPut | None:
        """Set in a cluster (docs/cluster.md): the document's compare-and-set."""
        return self.document.compare_and_put

    @compare_and_put.setter
    def compare_and_put(self, value: CompareAndPut | None) -> None:
        self.document.compare_and_put = value

    @property
    def shared(self) -> bool:
        """Whether other nodes change this document too (a cluster, docs/cluster.md)."""
        return self.document.shared

    def follow(self) -> None:
        """In a cluster, catch up with the other nodes' changes now rather than at the next heartbeat: what
        decides from "this name is not a topic" asks here first. Alone, nothing."""
        self.document.follow()

    def refresh(self) -> None:
        """In a cluster (docs/cluster.md) another node may have created, grown, deleted or reconfigured
        topics: read the document again and tell the listeners what changed (a name found with another id
        was deleted and created again)."""
        self.document.refresh()

    def _followed(self, raw: bytes | None) -> None:
        if raw is None:  # never removed once written: nothing to follow
            return
        self.following = True
        try:
            self._follow(raw)
        finally:
            self.following = False

    def _follow(self, raw: bytes) -> None:
        entries = {entry["name"]: entry for entry in json.loads(raw)["topics"]}
        for known in list(self._by_name.values()):
            entry = entries.get(known.name)
            if entry is None or uuid.UUID(entry["id"]) != known.topic_id:
                del self._by_name[known.name], self._by_id[known.topic_id]
                for listener in self.on_delete:
                    listener(known)
        for entry in entries.values():
            present = self._by_name.get(entry["name"])
            configs = dict(entry.get("configs", {}))
            if present is None:
                topic = Topic(entry["name"], uuid.UUID(entry["id"]), entry["partitions"], configs)
                self._by_name[topic.name] = topic
                self._by_id[topic.topic_id] = topic
                for listener in self.on_create:
                    listener(topic)
                continue
            if entry["partitions"] > present.partitions:
                old, present.partitions = present.partitions, entry["partitions"]
                for grown in self.on_grow:
                    grown(present, old)
            if configs != present.configs:
                present.configs = configs
                for changed in self.on_configs:
                    changed(present)

    def _changing(self, change: Callable[[], T]) -> T:
        """A change of the document. Alone: ``change``. In a cluster: follow the document first (a name
        another node took is taken here too), then change it by compare-and-set; when another node
        rewrote it meanwhile, ``change`` undid itself (WriteConflict), and it is tried again."""
        return self.document.changing(change)

    def _persist(self, put: CompareAndPut | None = None) -> None:
        """Write the whole document; in a cluster only over the version this node read (WriteConflict),
        by ``put`` when given."""
        doc = {
            "version": 1,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                for t in self._by_name.values()
            ],
        }
        self.document.write(json.dumps(doc, indent=1, sort_keys=True).encode(), put)

    # queries
    @property
    def by_name(self) -> Mapping[str, Topic]:
        """Every topic by name, a live read-only view (the consumer groups' assignors read it)."""
        return MappingProxyType(self._by_name)

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    # changes
    def check_new(self, name: str, partitions: int) -> None:
        """Raise the TopicError Kafka would answer for creating this topic."""
        validate_name(name)
        if name in self._by_name or name in self.reserved:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if partitions < 1:
            raise TopicError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        key = _collision_key(name)
        for other in (*self._by_name, *self.reserved):
            if _collision_key(other) == key:
                raise TopicError(
                    ErrorCode.invalid_topic_exception,
                    f"Topic '{name}' collides with existing topic: {other}",
                )

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        return self._changing(lambda: self._create(name, partitions, configs))

    def _create(self, name: str, partitions: int, configs: dict[str, str] | None) -> Topic:
        self.check_new(name, partitions)
        topic = Topic(name, uuid.uuid4(), partitions, dict(configs or {}))
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        try:
            self._persist(functools.partial(self.claim, topic=name) if self.claim is not None else None)
        except BaseException:  # not durable: not created (the caller answers the error)
            del self._by_name[name], self._by_id[topic.topic_id]
            raise
        for listener in self.on_create:
            listener(topic)
        return topic

    def delete(self, name: str) -> Topic:
        return self._changing(lambda: self._delete(name))

    def _delete(self, name: str) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        try:
            self._persist()
        except BaseException:
            self._by_name[name] = topic
            self._by_id[topic.topic_id] = topic
            raise
        for listener in self.on_delete:
            listener(topic)
        return topic

    def grow(self, name: str, partitions: int) -> Topic:
        return self._changing(lambda: self._grow(name, partitions))

    def _grow(self, name: str, partitions: int) -> Topic:
        topic = self._by_name[name]
        old = topic.partitions
        topic.partitions = partitions
        try:
            self._persist()
        except BaseException:
            topic.partitions = old
            raise
        for listener in self.on_grow:
            listener(topic, old)
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self._changing(lambda: self._set_configs(name, configs))

    def _set_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self._by_name[name]
        old, topic.configs = topic.configs, dict(configs)
        try:
            self._persist()
        except BaseException:
            topic.configs = old
            raise
