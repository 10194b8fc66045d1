"""The topic registry: names, ids, partition counts and per-topic configs, durable in the storage engine.

It is a small JSON document under one metadata key, rewritten whole and atomically (storage/engine.py
MetadataStore) on every change: topics change rarely and a restart must find exactly what was
acknowledged.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from groupd.protocol.errors import ErrorCode
from groupd.storage.engine import MetadataStore

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


class TopicRegistry:
    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self.on_create: list[Listener] = []
        self.on_delete: list[Listener] = []
        self.on_grow: list[Callable[[Topic, int], None]] = []
        # names no data topic may take (the internal topics', whose directories they would share)
        self.reserved: tuple[str, ...] = ()

    def load(self) -> None:
        raw = self._metadata.get(REGISTRY_FILE)
        if raw is None:
            return
        doc = json.loads(raw)
        for entry in doc["topics"]:
            topic = Topic(entry["name"], uuid.UUID(entry["id"]), entry["partitions"], dict(entry.get("configs", {})))
            self._by_name[topic.name] = topic
            self._by_id[topic.topic_id] = topic

    def refresh(self) -> None:
        """In a cluster (docs/cluster.md) another node may have created or grown topics: read the document
        again and tell the listeners what is new. Deletions and config changes made elsewhere are not
        followed yet."""
        raw = self._metadata.get(REGISTRY_FILE)
        if raw is None:
            return
        for entry in json.loads(raw)["topics"]:
            known = self._by_name.get(entry["name"])
            if known is None:
                topic = Topic(
                    entry["name"], uuid.UUID(entry["id"]), entry["partitions"], dict(entry.get("configs", {}))
                )
                self._by_name[topic.name] = topic
                self._by_id[topic.topic_id] = topic
                for listener in self.on_create:
                    listener(topic)
            elif entry["partitions"] > known.partitions:
                old, known.partitions = known.partitions, entry["partitions"]
                for grown in self.on_grow:
                    grown(known, old)

    def _persist(self) -> None:
        doc = {
            "version": 1,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                for t in self._by_name.values()
            ],
        }
        self._metadata.put(REGISTRY_FILE, json.dumps(doc, indent=1, sort_keys=True).encode())

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
        self.check_new(name, partitions)
        topic = Topic(name, uuid.uuid4(), partitions, dict(configs or {}))
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        try:
            self._persist()
        except BaseException:  # not durable: not created (the caller answers the error)
            del self._by_name[name], self._by_id[topic.topic_id]
            raise
        for listener in self.on_create:
            listener(topic)
        return topic

    def delete(self, name: str) -> Topic:
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
        self._by_name[name].configs = dict(configs)
        self._persist()
