"""The one table of supported APIs and version ranges.

ApiVersions answers from it, dispatch refuses anything outside it, and the README's support table is
generated from it (``python -m groupd.protocol.api_table``), so the three can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ApiKey(IntEnum):
    """Kafka's API keys by name: code outside this module names an API, never its number."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


_DECLARED = (
    ApiSpec(ApiKey.PRODUCE, "Produce", 0, 13),
    ApiSpec(ApiKey.FETCH, "Fetch", 0, 18),
    ApiSpec(ApiKey.LIST_OFFSETS, "ListOffsets", 0, 11),
    ApiSpec(ApiKey.METADATA, "Metadata", 0, 13),
    ApiSpec(ApiKey.OFFSET_COMMIT, "OffsetCommit", 0, 10),
    ApiSpec(ApiKey.OFFSET_FETCH, "OffsetFetch", 0, 10),
    ApiSpec(ApiKey.FIND_COORDINATOR, "FindCoordinator", 0, 6),
    ApiSpec(ApiKey.JOIN_GROUP, "JoinGroup", 0, 9),
    ApiSpec(ApiKey.HEARTBEAT, "Heartbeat", 0, 4),
    ApiSpec(ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 5),
    ApiSpec(ApiKey.SYNC_GROUP, "SyncGroup", 0, 5),
    ApiSpec(ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 6),
    ApiSpec(ApiKey.LIST_GROUPS, "ListGroups", 0, 5),
    ApiSpec(
        ApiKey.SASL_HANDSHAKE, "SaslHandshake", 0, 1
    ),  # answered by the SASL gate before authentication (security/sasl.py)
    ApiSpec(ApiKey.API_VERSIONS, "ApiVersions", 0, 4),
    ApiSpec(ApiKey.CREATE_TOPICS, "CreateTopics", 0, 7),
    ApiSpec(ApiKey.DELETE_TOPICS, "DeleteTopics", 0, 6),
    ApiSpec(ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 2),
    ApiSpec(ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 5),
    ApiSpec(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 0, 4
    ),  # 0-1: Kafka 3.9's, which Kafka 4 dropped (KIP-896)
    ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 5),
    ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4),
    ApiSpec(ApiKey.END_TXN, "EndTxn", 0, 4),
    # sent by a cluster's transaction coordinator to a partition's owner (docs/cluster.md); v1 is Kafka 4's
    # baseline (v0 removed), v2 (TransactionVersion) belongs to transactions v2, not served
    ApiSpec(ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 1),
    ApiSpec(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 4),  # not v5: transactions v2 (KIP-890), not advertised
    ApiSpec(ApiKey.DESCRIBE_ACLS, "DescribeAcls", 0, 3),
    ApiSpec(ApiKey.CREATE_ACLS, "CreateAcls", 0, 3),
    ApiSpec(ApiKey.DELETE_ACLS, "DeleteAcls", 0, 3),
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", 0, 4),
    ApiSpec(ApiKey.ALTER_CONFIGS, "AlterConfigs", 0, 2),
    ApiSpec(ApiKey.ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", 0, 2),
    # not v5 (Kafka 4.3's): kafka-python infers the broker's release from it and would take groupd for 4.3
    ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", 0, 4),
    ApiSpec(ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
    ApiSpec(ApiKey.CREATE_PARTITIONS, "CreatePartitions", 0, 3),
    ApiSpec(ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 2),
    ApiSpec(ApiKey.ELECT_LEADERS, "ElectLeaders", 0, 2),
    ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1),
    ApiSpec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1),
    ApiSpec(ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0),
    ApiSpec(ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0),
    ApiSpec(ApiKey.DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0, 1),
    ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 1),
    ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0),
    ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0),
    ApiSpec(ApiKey.DESCRIBE_QUORUM, "DescribeQuorum", 0, 2),
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", 0, 2),
    ApiSpec(ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0),
    ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0),
    ApiSpec(ApiKey.LIST_TRANSACTIONS, "ListTransactions", 0, 2),
    ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1),  # KIP-848 (groupd/coordinator/consumer/)
    ApiSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1),
    ApiSpec(ApiKey.LIST_CONFIG_RESOURCES, "ListConfigResources", 0, 1),  # v0 was ListClientMetricsResources
    ApiSpec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "DescribeTopicPartitions", 0, 0),
    ApiSpec(ApiKey.SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat", 1, 1),  # KIP-932 (groupd/coordinator/share/)
    ApiSpec(ApiKey.SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", 1, 1),
    ApiSpec(
        ApiKey.SHARE_FETCH, "ShareFetch", 1, 2
    ),  # KIP-932 (groupd/broker/share/); v0 was 4.0's early access, removed in 4.1
    ApiSpec(ApiKey.SHARE_ACKNOWLEDGE, "ShareAcknowledge", 1, 2),
    # the share coordinator's inter-broker RPCs (KIP-932; groupd/coordinator/share_state/), listed as Kafka lists them
    ApiSpec(ApiKey.INITIALIZE_SHARE_GROUP_STATE, "InitializeShareGroupState", 0, 0),
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE, "ReadShareGroupState", 0, 0),
    ApiSpec(ApiKey.WRITE_SHARE_GROUP_STATE, "WriteShareGroupState", 0, 1),  # v1: DeliveryCompleteCount (KIP-1226)
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_STATE, "DeleteShareGroupState", 0, 0),
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, "ReadShareGroupStateSummary", 0, 1),
    ApiSpec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsets", 0, 1),
    ApiSpec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsets", 0, 0),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsets", 0, 0),
)

# the keys as plain ints: encoded into ApiVersions and compared on every request
_SPECS = tuple(ApiSpec(int(s.key), s.name, s.min_version, s.max_version) for s in _DECLARED)
API_TABLE: dict[int, ApiSpec] = {spec.key: spec for spec in _SPECS}
API_BY_NAME: dict[str, ApiSpec] = {spec.name: spec for spec in _SPECS}


def support_table_markdown(table: dict[int, ApiSpec] | None = None) -> str:
    """The README's API support table, rendered from API_TABLE."""
    rows = ["| API | key | versions |", "| --- | --- | --- |"]
    for spec in sorted((table or API_TABLE).values(), key=lambda s: s.key):
        rows.append(f"| {spec.name} | {spec.key} | {spec.min_version}–{spec.max_version} |")
    return "\n".join(rows)


BEGIN_MARK = "<!-- api-table:begin (generated by python -m groupd.protocol.api_table --write-readme) -->"
END_MARK = "<!-- api-table:end -->"


def replace_between(path: str, begin: str, end: str, content: str) -> None:
    """Rewrite the part of a generated document between two marker lines (README tables)."""
    with open(path) as f:
        text = f.read()
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    with open(path, "w") as f:
        f.write(f"{head}{begin}\n{content}\n{end}{tail}")


def write_readme(path: str = "README.md") -> None:
    """Replace the README's table between the markers with the current one."""
    replace_between(path, BEGIN_MARK, END_MARK, support_table_markdown())


if __name__ == "__main__":
    import sys

    if "--write-readme" in sys.argv:
        write_readme()
    else:
        print(support_table_markdown())
