"""Broker configuration with Kafka's key names, types and defaults.

Read from a Kafka-style ``server.properties`` plus ``--override key=value``; an unknown key is warned
about once, a value that does not parse or is out of range stops start-up with a clear message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groupd.broker.kafka_keys import IGNORED, resolve_units
from groupd.broker.security import inter_broker
from groupd.broker.security import listeners as _listeners
from groupd.broker.security.acl import parse_authorizer_class, parse_super_users
from groupd.broker.security.tls import tls_settings
from groupd.storage.engines import ENGINES

log = logging.getLogger("groupd.config")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that the broker refuses to start with."""


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise ValueError("expected true or false")


def _host_port(raw: str) -> tuple[str, int]:
    host, sep, port = raw.strip().rpartition(":")
    if not sep:
        raise ValueError("expected host:port")
    return host or "127.0.0.1", int(port)


def _log_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL"):
        raise ValueError("expected DEBUG, INFO, WARN or ERROR")
    return "WARNING" if level == "WARN" else level


def _names(*allowed: str) -> Callable[[str], tuple[str, ...]]:
    """A comma-separated list, each entry one of ``allowed`` (case-insensitive); at least one."""

    def parse(raw: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in raw.split(",") if x.strip())
        if not items:
            raise ValueError("expected at least one entry")
        for x in items:
            if x.lower() not in allowed and x not in allowed:
                raise ValueError(f"{x!r} is not one of {', '.join(allowed)}")
        return tuple(x if x in allowed else x.lower() for x in items)

    return parse


_ASSIGNORS = (
    "uniform",
    "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
)
_SHARE_ASSIGNOR_CLASS = "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"


_HOST_PATTERN = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Kafka's Utils.validHostPattern


def _per_ip_overrides(raw: str) -> dict[str, int]:
    """Kafka's ``host:count,host:count`` (its Csv.parseCsvMap: split at commas, each at its last colon,
    so an IPv6 address needs no brackets)."""
    out: dict[str, int] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep:
            raise ValueError(f"expected host:count, got {item!r}")
        try:
            out[host.strip()] = int(count)
        except ValueError:
            raise ValueError(f"expected host:count, got {item!r}") from None
    invalid = [host for host in out if not _HOST_PATTERN.fullmatch(host)]
    if invalid:
        raise ValueError(f"contains invalid addresses : {','.join(invalid)}")
    return out


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value

    return parse


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    parse: Callable[[str], Any]
    default: str | None
    low: int | None = None
    high: int | None = None
    doc: str = ""


JAAS_KEY = "listener.name.<listener>.<mechanism>.sasl.jaas.config"  # a template: read per listener
INTER_BROKER = "inter.broker"  # not a key: the resolved inter-broker settings (Config.inter_broker)


def _int_key(name: str, default: int, low: int | None = 0, high: int | None = INT64_MAX, doc: str = "") -> Key:
    return Key(name, int, str(default), low, high, doc)


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key(
            "listeners",
            _listeners.parse_endpoints,
            "PLAINTEXT://127.0.0.1:9092",
            doc="comma-separated `NAME://host:port` sockets the broker binds",
        ),
        Key(
            "advertised.listeners",
            _listeners.parse_endpoints,
            None,
            doc="`NAME://host:port` given to clients of each listener (defaults to listeners)",
        ),
        Key(
            "listener.security.protocol.map",
            _listeners.parse_protocol_map,
            _listeners.DEFAULT_PROTOCOL_MAP,
            doc="`NAME:PROTOCOL` per listener name: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        ),
        Key("log.dirs", str, "./data", doc="where topics, offsets and the topic registry live"),
        Key(
            "storage.engine",
            _choice(*ENGINES),
            "local",
            doc="where everything durable is kept: `local` = Kafka's segment files under log.dirs; `postgresql` = one "
            "PostgreSQL database (storage.postgresql.url, docs/storage.md); `memory` = process memory, for "
            "tests only (nothing written, gone when the process ends; log.dirs only names the store)",
        ),
        Key(
            "storage.postgresql.url",
            str,
            "",
            doc="the PostgreSQL engine's database, a libpq URL `postgresql://user@host:port/db`; a password it "
            "lacks is read from storage.postgresql.password.file or the GROUPD_POSTGRESQL_PASSWORD environment "
            "variable",
        ),
        Key(
            "storage.postgresql.password.file",
            str,
            "",
            doc="a file holding the PostgreSQL password (kept out of `ps` and the configuration)",
        ),
        _int_key("node.id", 1, 0, INT32_MAX, "this broker's id in Metadata and FindCoordinator"),
        Key(
            "cluster.enabled",
            _bool,
            "false",
            doc="run as one node of several over one PostgreSQL database (storage.engine=postgresql, a unique "
            "node.id each): partitions and coordinator shards owned through leases in the database (docs/cluster.md)",
        ),
        _int_key(
            "cluster.lease.ms",
            10_000,
            100,
            INT32_MAX,
            "how long a node's lease on a partition or shard lasts without renewal: a dead node's work is "
            "taken over after it, a node that cannot renew stops serving a fifth of it before",
        ),
        Key("cluster.id", str, "groupd-cluster", doc="cluster id reported in Metadata"),
        _int_key("socket.request.max.bytes", 104_857_600, 1, INT32_MAX, "largest request frame accepted"),
        _int_key("queued.max.requests", 500, 1, INT32_MAX, "requests read ahead per connection"),
        _int_key(
            "queued.max.request.bytes",
            16 * 1024 * 1024,
            None,
            INT64_MAX,
            "bytes of requests read ahead per connection and not yet answered; reading pauses past it (0 or less: no "
            "bound but the count). Kafka's bounds the whole broker and is unbounded by default",
        ),
        _int_key(
            "max.connections",
            INT32_MAX,
            0,
            INT32_MAX,
            "connections open at once, all listeners together; at the limit the broker stops accepting until one "
            "closes (as Kafka's acceptor blocks)",
        ),
        _int_key(
            "max.connections.per.ip",
            INT32_MAX,
            0,
            INT32_MAX,
            "connections open at once from one address; one more is closed at once (0 only with overrides)",
        ),
        Key(
            "max.connections.per.ip.overrides",
            _per_ip_overrides,
            "",
            doc="`host:count,host:count`: per-address limits instead of max.connections.per.ip",
        ),
        _int_key(
            "connections.max.idle.ms",
            600_000,
            None,
            INT64_MAX,
            "close a connection that read and wrote nothing this long, unless a request of it is outstanding "
            "(negative: never)",
        ),
        _int_key(
            "max.request.partition.size.limit",
            2000,
            1,
            INT32_MAX,
            "most partitions one DescribeTopicPartitions answer holds",
        ),
        Key("auto.create.topics.enable", _bool, "true", doc="Metadata for an unknown topic creates it"),
        _int_key("num.partitions", 1, 1, INT32_MAX, "partitions of an auto-created topic"),
        _int_key(
            "max.broker.partitions",
            4000,
            1,
            INT32_MAX,
            "data partitions this broker holds at most (KIP-578's name); more are refused with INVALID_PARTITIONS",
        ),
        _int_key(
            "max.partitions.per.request",
            10_000,
            1,
            INT32_MAX,
            "partitions one CreateTopics or CreatePartitions may add (Kafka's fixed 10,000), else POLICY_VIOLATION",
        ),
        _int_key("default.replication.factor", 1, 1, 1, "only 1: a single node"),
        Key("log.level", _log_level, "INFO", doc="DEBUG, INFO, WARN or ERROR"),
        Key("log.format", _choice("text", "logfmt", "json"), "text", doc="text, logfmt (key=value) or json"),
        # consumer groups
        _int_key("group.initial.rebalance.delay.ms", 3000, 0, INT32_MAX, "wait for more joiners into an empty group"),
        _int_key("group.min.session.timeout.ms", 6000, 0, INT32_MAX, "smallest session timeout a member may ask"),
        _int_key("group.max.session.timeout.ms", 1_800_000, 0, INT32_MAX, "largest session timeout a member may ask"),
        _int_key("group.max.size", INT32_MAX, 1, INT32_MAX, "members per group"),
        Key(
            "group.coordinator.rebalance.protocols",
            _names("classic", "consumer"),
            "classic,consumer",
            doc=(
                "group protocols served: `classic` (JoinGroup/SyncGroup) and `consumer` "
                "(KIP-848 ConsumerGroupHeartbeat)"
            ),
        ),
        _int_key(
            "group.consumer.session.timeout.ms",
            45_000,
            1,
            INT32_MAX,
            "consumer-protocol member removed after this long without a heartbeat",
        ),
        _int_key(
            "group.consumer.min.session.timeout.ms",
            45_000,
            1,
            INT32_MAX,
            "least consumer.session.timeout.ms a group config may set",
        ),
        _int_key(
            "group.consumer.max.session.timeout.ms",
            60_000,
            1,
            INT32_MAX,
            "largest consumer.session.timeout.ms a group config may set",
        ),
        _int_key(
            "group.consumer.heartbeat.interval.ms",
            5_000,
            1,
            INT32_MAX,
            "heartbeat interval given to consumer-protocol members",
        ),
        _int_key(
            "group.consumer.min.heartbeat.interval.ms",
            5_000,
            1,
            INT32_MAX,
            "least consumer.heartbeat.interval.ms a group config may set",
        ),
        _int_key(
            "group.consumer.max.heartbeat.interval.ms",
            15_000,
            1,
            INT32_MAX,
            "largest consumer.heartbeat.interval.ms a group config may set",
        ),
        _int_key("group.consumer.max.size", INT32_MAX, 1, INT32_MAX, "members per consumer-protocol group"),
        Key(
            "group.consumer.assignors",
            _names(*_ASSIGNORS),
            "uniform,range",
            doc="server-side assignors (`uniform`, `range`, or Kafka's class names); the first is the default",
        ),
        _int_key(
            "group.consumer.assignment.interval.ms",
            1_000,
            0,
            INT32_MAX,
            "least time between two target assignments of a group (0: every change)",
        ),
        _int_key(
            "group.consumer.min.assignment.interval.ms",
            0,
            0,
            INT32_MAX,
            "least consumer.assignment.interval.ms a group config may set",
        ),
        _int_key(
            "group.consumer.max.assignment.interval.ms",
            15_000,
            0,
            INT32_MAX,
            "largest consumer.assignment.interval.ms a group config may set",
        ),
        Key(
            "group.consumer.migration.policy",
            _choice("bidirectional", "upgrade", "downgrade", "disabled"),
            "bidirectional",
            doc=(
                "online conversion between classic and consumer-protocol groups: `bidirectional`, `upgrade` (classic "
                "to consumer only), `downgrade` (consumer to classic only) or `disabled`; empty groups convert under "
                "any policy"
            ),
        ),
        # share groups (KIP-932): Kafka 4.3's GroupCoordinatorConfig and ShareGroupConfig, with their bounds
        _int_key(
            "share.version",
            1,
            0,
            1,
            "finalized level of Kafka's `share.version` feature: 1 serves share groups (Kafka 4.2+'s default), 0 "
            "answers their APIs UNSUPPORTED_VERSION",
        ),
        _int_key(
            "group.share.session.timeout.ms",
            45_000,
            1,
            INT32_MAX,
            "share member removed after this long without a heartbeat",
        ),
        _int_key(
            "group.share.min.session.timeout.ms",
            45_000,
            1,
            INT32_MAX,
            "least `share.session.timeout.ms` a group may set",
        ),
        _int_key(
            "group.share.max.session.timeout.ms",
            60_000,
            1,
            INT32_MAX,
            "largest `share.session.timeout.ms` a group may set",
        ),
        _int_key("group.share.heartbeat.interval.ms", 5_000, 1, INT32_MAX, "heartbeat interval given to share members"),
        _int_key(
            "group.share.min.heartbeat.interval.ms",
            5_000,
            1,
            INT32_MAX,
            "least `share.heartbeat.interval.ms` a group may set",
        ),
        _int_key(
            "group.share.max.heartbeat.interval.ms",
            15_000,
            1,
            INT32_MAX,
            "largest `share.heartbeat.interval.ms` a group may set",
        ),
        _int_key("group.share.max.size", 200, 1, 1000, "members per share group"),
        Key(
            "group.share.assignors",
            _names("simple", _SHARE_ASSIGNOR_CLASS),
            "simple",
            doc="the share groups' assignor: exactly one, `simple`",
        ),
        _int_key(
            "group.share.assignment.interval.ms",
            1_000,
            0,
            INT32_MAX,
            "least time between two target assignments of a share group (0: every change)",
        ),
        _int_key(
            "group.share.min.assignment.interval.ms",
            0,
            0,
            INT32_MAX,
            "least `share.assignment.interval.ms` a group may set",
        ),
        _int_key(
            "group.share.max.assignment.interval.ms",
            15_000,
            0,
            INT32_MAX,
            "largest `share.assignment.interval.ms` a group may set",
        ),
        _int_key(
            "group.share.record.lock.duration.ms",
            30_000,
            1000,
            3_600_000,
            "how long a share member holds the records it acquired",
        ),
        _int_key(
            "group.share.min.record.lock.duration.ms",
            15_000,
            1000,
            30_000,
            "least `share.record.lock.duration.ms` a group may set",
        ),
        _int_key(
            "group.share.max.record.lock.duration.ms",
            60_000,
            30_000,
            3_600_000,
            "largest `share.record.lock.duration.ms` a group may set",
        ),
        _int_key("group.share.delivery.count.limit", 5, 2, 10, "deliveries of a record before it is archived"),
        _int_key("group.share.min.delivery.count.limit", 2, 2, 5, "least `share.delivery.count.limit` a group may set"),
        _int_key(
            "group.share.max.delivery.count.limit", 10, 5, 25, "largest `share.delivery.count.limit` a group may set"
        ),
        _int_key("group.share.partition.max.record.locks", 2_000, 100, 10_000, "records in flight per share partition"),
        _int_key(
            "group.share.min.partition.max.record.locks",
            100,
            100,
            2_000,
            "least `share.partition.max.record.locks` a group may set",
        ),
        _int_key(
            "group.share.max.partition.max.record.locks",
            4_000,
            2_000,
            10_000,
            "largest `share.partition.max.record.locks` a group may set",
        ),
        _int_key("group.share.max.share.sessions", 2_000, 1, INT32_MAX, "share sessions per broker"),
        # offsets store
        _int_key(
            "offsets.topic.num.partitions",
            50,
            1,
            INT32_MAX,
            "partitions of __consumer_offsets (must not change after deployment: a start with another count than "
            "the stored one is refused)",
        ),
        _int_key("offsets.retention.minutes", 10080, 1, INT32_MAX, "how long committed offsets of an empty group live"),
        _int_key("offsets.retention.check.interval.ms", 600_000, 1, INT64_MAX, "how often expired offsets are removed"),
        _int_key("offset.metadata.max.bytes", 4096, 0, INT32_MAX, "largest commit metadata string"),
        _int_key("offsets.commit.timeout.ms", 5000, 1, INT32_MAX, "how long a commit may wait for its write"),
        _int_key(
            "offsets.retain.uncompacted.hours",
            0,
            0,
            INT32_MAX,
            "keep offsets segments uncompacted this long, so the pipeline sees full history (0: compact at once)",
        ),
        _int_key(
            "log.end.history.interval.ms",
            10_000,
            0,
            INT32_MAX,
            "record each data partition's log end this often into log.dirs/log-end-history, for the pipeline's lag "
            "over time (0: off)",
        ),
        _int_key(
            "log.end.history.retention.ms", 604_800_000, -1, INT64_MAX, "keep log-end history this long (-1: forever)"
        ),
        _int_key("offsets.topic.segment.bytes", 104_857_600, 1024, INT32_MAX, "segment size of offsets partitions"),
        # transactions
        _int_key(
            "transaction.max.timeout.ms", 900_000, 1, INT32_MAX, "longest transaction.timeout.ms a producer may ask"
        ),
        _int_key(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            10_000,
            1,
            INT32_MAX,
            "how often transactions past their timeout are aborted",
        ),
        Key(
            "transaction.partition.verification.enable",
            _bool,
            "true",
            doc="check with the transaction coordinator that a partition was added to the producer's transaction "
            "before its first transactional batch is written there (KIP-890)",
        ),
        _int_key(
            "producer.id.expiration.ms",
            86_400_000,
            1,
            INT32_MAX,
            "drop a partition's transaction verification state (KIP-890) this long after it was started if no "
            "batch of its producer followed; idle producers' sequence state is not expired yet",
        ),
        _int_key(
            "producer.id.expiration.check.interval.ms",
            600_000,
            1,
            INT32_MAX,
            "how often expired producer state (see producer.id.expiration.ms) is removed",
        ),
        _int_key(
            "transactional.id.expiration.ms",
            604_800_000,
            1,
            INT32_MAX,
            "forget a transactional id idle this long, its transaction complete",
        ),
        _int_key(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            3_600_000,
            1,
            INT32_MAX,
            "how often expired transactional ids are forgotten",
        ),
        _int_key(
            "transaction.state.log.num.partitions",
            50,
            1,
            INT32_MAX,
            "partitions of __transaction_state (should not change after deployment; a single node moves ids found "
            "elsewhere at start-up, a cluster node refuses to start with another count than the stored one)",
        ),
        _int_key(
            "transaction.state.log.segment.bytes",
            104_857_600,
            1024,
            INT32_MAX,
            "segment size of __transaction_state partitions",
        ),
        # the share coordinator (ShareCoordinatorConfig)
        _int_key(
            "share.coordinator.state.topic.num.partitions",
            50,
            1,
            INT32_MAX,
            "partitions of __share_group_state (must not change after deployment: a start with another count than "
            "the stored one is refused)",
        ),
        _int_key(
            "share.coordinator.state.topic.segment.bytes",
            104_857_600,
            1024,
            INT32_MAX,
            "segment size of __share_group_state partitions",
        ),
        _int_key(
            "share.coordinator.snapshot.update.records.per.snapshot",
            500,
            0,
            500,
            "ShareUpdate records of a share-partition before its state is written whole again (a ShareSnapshot)",
        ),
        _int_key(
            "share.coordinator.state.topic.prune.interval.ms",
            300_000,
            0,
            INT32_MAX,
            "how often records overridden by later snapshots are deleted from __share_group_state (0: never)",
        ),
        _int_key(
            "share.coordinator.cold.partition.snapshot.interval.ms",
            300_000,
            1,
            INT32_MAX,
            "a share-partition unsnapshotted this long is snapshotted again, so pruning can pass it",
        ),
        # client quotas (their values: AlterClientQuotas)
        _int_key("quota.window.num", 11, 1, INT32_MAX, "samples a client's byte rate is measured over"),
        _int_key("quota.window.size.seconds", 1, 1, INT32_MAX, "length of one sample"),
        # storage
        _int_key("log.segment.bytes", 1_073_741_824, 1024, INT32_MAX, "segment roll size"),
        _int_key("log.roll.ms", 604_800_000, 1, INT64_MAX, "segment roll age (if unset, from log.roll.hours)"),
        _int_key(
            "log.index.interval.bytes",
            4096,
            0,
            INT32_MAX,
            "bytes of batches between two entries of a segment's sparse offset and time index (0: every batch)",
        ),
        _int_key(
            "log.max.open.files",
            0,
            0,
            INT32_MAX,
            "segment files and their index side files held open at once, the least recently used closed beyond it "
            "(a groupd key: Kafka keeps every segment open); 0: half of the process's descriptor limit (ulimit -n)",
        ),
        _int_key(
            "log.index.cache.blocks",
            256,
            1,
            1 << 20,
            "blocks of segments' sparse index entries (64 entries, about 1.6 KiB each) kept decoded in memory, "
            "shared by every partition of the process, the least recently used dropped beyond it (a groupd key: "
            "Kafka memory-maps its index files); 256: about 0.4 MiB",
        ),
        _int_key(
            "log.flush.interval.messages",
            1,
            1,
            INT64_MAX,
            "fsync after this many appended messages (1: every write is durable before it is acknowledged)",
        ),
        _int_key("log.flush.interval.ms", 0, 0, INT64_MAX, "fsync at least this often (0: with every write)"),
        _int_key(
            "num.recovery.threads.per.data.dir",
            2,
            1,
            64,
            "processes that walk the offsets store at start-up, the broker included (1: the broker alone)",
        ),
        _int_key(
            "log.retention.ms",
            604_800_000,
            -1,
            INT64_MAX,
            "delete data older than this (-1: never); if unset, from log.retention.minutes, else log.retention.hours "
            "(Kafka's precedence)",
        ),
        Key(
            "log.retention.minutes",
            int,
            None,
            -(2**31),
            INT32_MAX,
            doc="retention in minutes, used when log.retention.ms is not set",
        ),
        Key(
            "log.retention.hours",
            int,
            "168",
            -(2**31),
            INT32_MAX,
            doc="retention in hours, used when neither log.retention.ms nor .minutes is set (negative: never)",
        ),
        _int_key("log.roll.hours", 168, 1, INT32_MAX, "segment roll age in hours, used when log.roll.ms is not set"),
        Key(
            "broker.id", int, None, -1, INT32_MAX, doc="the ZooKeeper-era name of node.id, used when node.id is not set"
        ),
        _int_key(
            "log.retention.bytes", -1, -1, INT64_MAX, "delete old segments past this size per partition (-1: never)"
        ),
        _int_key("log.retention.check.interval.ms", 300_000, 1, INT64_MAX, "how often retention runs"),
        _int_key("log.cleaner.delete.retention.ms", 86_400_000, 0, INT64_MAX, "how long tombstones survive compaction"),
        _int_key("message.max.bytes", 1_048_588, 0, INT32_MAX, "largest record batch accepted"),
        Key(
            "log.message.downconversion.enable",
            _bool,
            "true",
            doc=(
                "Fetch v0-3 (magic 0/1 readers) get converted records; false: UNSUPPORTED_VERSION "
                "(topics: message.downconversion.enable)"
            ),
        ),
        # observability
        Key("metrics.listener", _host_port, "127.0.0.1:9404", doc="host:port of /metrics and /healthz (empty: off)"),
        _int_key(
            "metrics.max.group.series",
            1000,
            0,
            INT32_MAX,
            "groups with their own metric series; the rest sum under __overflow__",
        ),
        # security (docs/security.md); each may be given per listener as listener.name.<listener>.<key>
        Key(
            "sasl.enabled.mechanisms",
            str,
            "GSSAPI",
            doc=(
                "mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
                "(GSSAPI, Kafka's default, is refused)"
            ),
        ),
        Key(
            JAAS_KEY,
            str,
            None,
            doc=(
                'PLAIN\'s users: `PlainLoginModule required user_<name>="<password>" ...;`; on the inter-broker '
                'listener of a cluster also the node\'s own `username="<name>" password="<password>"`'
            ),
        ),
        _int_key(
            "sasl.server.max.receive.size",
            524_288,
            1,
            INT32_MAX,
            "largest frame read before a SASL client has authenticated",
        ),
        _int_key("connections.max.reauth.ms", 0, 0, 0, "only 0: sessions do not expire (no re-authentication)"),
        _int_key(
            "connection.failed.authentication.delay.ms",
            100,
            0,
            INT32_MAX,
            "close a connection this long after its failed authentication",
        ),
        Key(
            "ssl.keystore.type",
            str,
            "JKS",
            doc="only PEM is read (KIP-651); JKS, Kafka's default, and PKCS12 are refused",
        ),
        Key("ssl.keystore.location", str, None, doc="PEM file holding the private key and the certificate chain"),
        Key("ssl.keystore.certificate.chain", str, None, doc="the certificate chain inline, PEM"),
        Key("ssl.keystore.key", str, None, doc="the private key inline, PEM (PKCS#8, perhaps encrypted)"),
        Key("ssl.key.password", str, None, doc="password of an encrypted private key"),
        Key("ssl.keystore.password", str, None, doc="not used with PEM (refused, as Kafka refuses it)"),
        Key("ssl.truststore.type", str, "JKS", doc="only PEM is read; JKS and PKCS12 are refused"),
        Key("ssl.truststore.location", str, None, doc="PEM file of the certificates client certificates must chain to"),
        Key("ssl.truststore.certificates", str, None, doc="the same inline, PEM"),
        Key("ssl.truststore.password", str, None, doc="not used with PEM (refused)"),
        Key(
            "ssl.endpoint.identification.algorithm",
            str,
            "https",
            doc="cluster mode: `https` checks a peer's certificate names the host it is reached at; empty: not checked",
        ),
        # how cluster nodes reach each other (docs/cluster.md, "Listeners"): Kafka's keys and rules
        Key(
            "inter.broker.listener.name",
            str,
            None,
            doc=(
                "cluster mode: the listener nodes reach each other on (an advertised one); unset: the listener "
                "named after security.inter.broker.protocol; not both"
            ),
        ),
        Key(
            "security.inter.broker.protocol",
            str,
            "PLAINTEXT",
            doc="cluster mode, without inter.broker.listener.name: the protocol and name of the inter-broker listener",
        ),
        Key(
            "sasl.mechanism.inter.broker.protocol",
            str,
            "GSSAPI",
            doc=(
                "cluster mode: the SASL mechanism a node logs in to its peers with (PLAIN, SCRAM-SHA-256, "
                "SCRAM-SHA-512), one the listener enables; its JAAS config there gives username and password"
            ),
        ),
        # authorization (docs/security.md, ACLs)
        Key(
            "authorizer.class.name",
            parse_authorizer_class,
            "",
            doc=(
                "empty: no authorizer, every principal may do everything; "
                "`org.apache.kafka.metadata.authorizer.StandardAuthorizer`: ACLs decide (docs/security.md)"
            ),
        ),
        Key(
            "super.users",
            parse_super_users,
            "",
            doc="principals allowed everything whatever the ACLs say, separated by `;`: `User:admin;User:ops`",
        ),
        Key(
            "allow.everyone.if.no.acl.found",
            _bool,
            "false",
            doc="a resource without any ACL is open to everyone (true) or to super users only (false)",
        ),
        Key(
            "ssl.client.auth",
            _choice("none", "requested", "required"),
            "none",
            doc=(
                "ask SSL clients for a certificate: none, requested or required (on SASL_SSL only with the listener "
                "prefix)"
            ),
        ),
    )
}


class Config(Mapping[str, Any]):
    """Typed configuration: ``config["group.max.size"]`` is an int, defaults filled in."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def listeners(self) -> tuple[_listeners.Listener, ...]:
        """Every listener, resolved: protocol, advertised address, SASL and TLS settings."""
        return self._values["listeners"]

    @property
    def inter_broker(self) -> inter_broker.InterBroker | None:
        """How this node reaches its peers (cluster mode, resolved at load); None on a single node."""
        return self._values.get(INTER_BROKER)

    @property
    def listener(self) -> tuple[str, int]:
        """The first listener's host and port."""
        first = self._values["listeners"][0]
        return first.host, first.port

    def with_overrides(self, **overrides: Any) -> Config:
        return Config({**self._values, **overrides})


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value lines, # and ! comments, and a line ending in a
    backslash continued by the next (Kafka's JAAS examples are written that way)."""
    out: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        sep = min((i for i in (stripped.find("="), stripped.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigError(f"line {lineno}: expected key=value, got {stripped!r}")
        out[stripped[:sep].strip()] = stripped[sep + 1 :].strip()
    return out


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if pending is not None:
            lineno, line = pending[0], pending[1] + line.lstrip()
            pending = None
        stripped = line.rstrip()
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1 and not stripped.lstrip().startswith(("#", "!")):
            pending = (lineno, stripped[:-1])
            continue
        out.append((lineno, line))
    if pending is not None:
        out.append(pending)
    return out


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


_warned: set[str] = set()


def _did_you_mean(name: str) -> str:
    """`` (did you mean log.retention.ms?)`` for a close typo of a known key, else nothing."""
    import difflib

    close = difflib.get_close_matches(name, KEYS, n=1, cutoff=0.85)
    return f" (did you mean {close[0]}?)" if close else ""


def build_config(raw: Mapping[str, str]) -> Config:
    values: dict[str, Any] = {}
    for name, key in KEYS.items():
        text = raw.get(name, key.default)
        if text is None or (text == "" and key.parse is not str):
            values[name] = None
            continue
        try:
            value = key.parse(text)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"invalid value {text!r} for {name}: {exc}") from None
        if isinstance(value, int) and not isinstance(value, bool):
            if key.low is not None and value < key.low:
                raise ConfigError(f"invalid value {value} for {name}: must be >= {key.low}")
            if key.high is not None and value > key.high:
                raise ConfigError(f"invalid value {value} for {name}: must be <= {key.high}")
        values[name] = value
    resolve_units(raw, values)
    for name in raw:
        if name in KEYS or name in _warned or name.startswith(_listeners.PREFIX):
            continue
        _warned.add(name)
        if name in IGNORED:
            log.info("Kafka's %s is ignored: %s", name, IGNORED[name])
        else:
            log.warning("unknown configuration key %s is ignored%s", name, _did_you_mean(name))
    if values["max.connections.per.ip.overrides"] is None:
        values["max.connections.per.ip.overrides"] = {}
    if values["max.connections.per.ip"] == 0 and not values["max.connections.per.ip.overrides"]:
        raise ConfigError(
            "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."
        )
    idle, delay = values["connections.max.idle.ms"], values["connection.failed.authentication.delay.ms"]
    if idle >= 0 and delay >= idle:
        raise ConfigError(
            f"connection.failed.authentication.delay.ms={delay} should always be less than "
            f"connections.max.idle.ms={idle} to prevent failed authentication responses from timing out"
        )
    if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
        raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
    _check_consumer_bounds(values)
    _check_share_bounds(values)
    if values["cluster.enabled"] and values["storage.engine"] != "postgresql":
        raise ConfigError("cluster.enabled=true needs storage.engine=postgresql: the nodes share one database")
    try:
        values["listeners"] = _listeners.resolve(
            values["listeners"],
            values["advertised.listeners"],
            values["listener.security.protocol.map"],
            _listeners.split_prefixed(raw),
            lambda key: raw.get(key, KEYS[key].default if key in KEYS else None),
            tls_settings,
        )
        if values["cluster.enabled"]:  # only a cluster has peers to reach
            values[INTER_BROKER] = inter_broker.resolve(
                raw,
                values["listeners"],
                values["listener.security.protocol.map"],
                lambda key: raw.get(key, KEYS[key].default),
            )
    except _listeners.ListenerError as exc:
        raise ConfigError(str(exc)) from None
    return Config(values)


def _check_consumer_bounds(values: Mapping[str, Any]) -> None:
    """GroupCoordinatorConfig's requirements on the group.consumer.* keys, in its order and words: each
    value within its min and max keys, and the heartbeat shorter than the session."""
    for kind in ("heartbeat.interval", "session.timeout", "assignment.interval"):
        key, low, high = (f"group.consumer.{prefix}{kind}.ms" for prefix in ("", "min.", "max."))
        if values[high] < values[low]:
            raise ConfigError(f"{high} must be greater than or equal to {low}")
        if values[key] < values[low]:
            raise ConfigError(f"{key} must be greater than or equal to {low}")
        if values[key] > values[high]:
            raise ConfigError(f"{key} must be less than or equal to {high}")
        if kind == "session.timeout" and values["group.consumer.heartbeat.interval.ms"] >= values[key]:
            raise ConfigError(f"group.consumer.heartbeat.interval.ms must be less than {key}")


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Config:
    raw: dict[str, str] = {}
    if path is not None:
        try:
            raw.update(parse_properties(Path(path).read_text()))
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
    raw.update(parse_overrides(overrides))
    return build_config(raw)


def default_config(**overrides: Any) -> Config:
    """Defaults with typed overrides, keyed by Kafka names (tests use this)."""
    raw = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()}
    return build_config(raw)


CONFIG_BEGIN = "<!-- config-table:begin -->"
CONFIG_END = "<!-- config-table:end -->"


def config_table_markdown() -> str:
    """The configuration table of docs/configuration.md, rendered from KEYS."""
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key in KEYS.values():
        rows.append(f"| `{key.name}` | `{key.default if key.default is not None else ''}` | {key.doc} |")
    return "\n".join(rows)


IGNORED_BEGIN = "<!-- ignored-keys:begin -->"
IGNORED_END = "<!-- ignored-keys:end -->"


def ignored_table_markdown() -> str:
    """The keys of Kafka's stock server.properties that groupd accepts and ignores, with why."""
    rows = ["| Kafka key | why groupd ignores it |", "| --- | --- |"]
    rows += [f"| `{key}` | {why} |" for key, why in IGNORED.items()]
    return "\n".join(rows)


def write_readme(path: str = "docs/configuration.md") -> None:
    """Replace docs/configuration.md's generated tables with the current ones."""
    from groupd.protocol.api_table import replace_between

    replace_between(path, CONFIG_BEGIN, CONFIG_END, config_table_markdown())
    replace_between(path, IGNORED_BEGIN, IGNORED_END, ignored_table_markdown())


if __name__ == "__main__":
    write_readme()


def _check_share_bounds(values: dict[str, Any]) -> None:
    """Kafka's GroupCoordinatorConfig requirements on the group.share.* keys: each min <= max, each
    value within its bounds, the heartbeat interval below the session timeout, exactly one assignor."""
    for name in ("session.timeout.ms", "heartbeat.interval.ms", "assignment.interval.ms"):
        low, high, v = (
            values[f"group.share.min.{name}"],
            values[f"group.share.max.{name}"],
            values[f"group.share.{name}"],
        )
        if high < low:
            raise ConfigError(f"group.share.max.{name} must be greater than or equal to group.share.min.{name}")
        if not low <= v <= high:
            raise ConfigError(f"group.share.{name} must be between group.share.min.{name} and group.share.max.{name}")
    if values["group.share.heartbeat.interval.ms"] >= values["group.share.session.timeout.ms"]:
        raise ConfigError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
    if len(values["group.share.assignors"]) != 1:
        raise ConfigError(
            f"group.share.assignors must contain exactly one assignor, but found {len(values['group.share.assignors'])}"
        )
