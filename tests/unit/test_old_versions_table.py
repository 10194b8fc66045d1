"""Every request version Kafka 3.9 accepts, for each API groupd serves, is in the API table (issue 32).

The ranges below are Kafka 3.9's ``validVersions`` (apache/kafka, branch 3.9,
clients/src/main/resources/common/message/*Request.json), written down here as facts; Kafka 4 removed
the low ones (KIP-896) and clients that choose versions from a configured Kafka release (Sarama,
Burrow, kafka-go 0.2, kafka-python with ``api_version``) still send them.
"""

from dataclasses import fields

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from groupd.protocol import codec, old_schemas
from groupd.protocol.api_table import API_TABLE

KAFKA_39_VALID_VERSIONS: dict[str, tuple[int, int]] = {
    "Produce": (0, 11),
    "Fetch": (0, 17),
    "ListOffsets": (0, 9),
    "Metadata": (0, 12),
    "OffsetCommit": (0, 9),
    "OffsetFetch": (0, 9),
    "FindCoordinator": (0, 6),
    "JoinGroup": (0, 9),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
    "SyncGroup": (0, 5),
    "DescribeGroups": (0, 5),
    "ListGroups": (0, 5),
    "SaslHandshake": (0, 1),
    "ApiVersions": (0, 4),
    "CreateTopics": (0, 7),
    "DeleteTopics": (0, 6),
    "DeleteRecords": (0, 2),
    "InitProducerId": (0, 5),
    "OffsetForLeaderEpoch": (0, 4),
    "AddPartitionsToTxn": (0, 5),
    "AddOffsetsToTxn": (0, 4),
    "EndTxn": (0, 4),
    "TxnOffsetCommit": (0, 4),
    "DescribeAcls": (0, 3),
    "CreateAcls": (0, 3),
    "DeleteAcls": (0, 3),
    "DescribeConfigs": (0, 4),
    "AlterConfigs": (0, 2),
    "AlterReplicaLogDirs": (0, 2),
    "DescribeLogDirs": (0, 4),
    "SaslAuthenticate": (0, 2),
    "CreatePartitions": (0, 3),
    "DeleteGroups": (0, 2),
    "ElectLeaders": (0, 2),
    "IncrementalAlterConfigs": (0, 1),
    "AlterPartitionReassignments": (0, 0),
    "ListPartitionReassignments": (0, 0),
    "OffsetDelete": (0, 0),
    "DescribeClientQuotas": (0, 1),
    "AlterClientQuotas": (0, 1),
    "DescribeUserScramCredentials": (0, 0),
    "AlterUserScramCredentials": (0, 0),
    "DescribeQuorum": (0, 2),
    "DescribeCluster": (0, 1),
    "DescribeProducers": (0, 0),
    "DescribeTransactions": (0, 0),
    "ListTransactions": (0, 1),
    "ConsumerGroupHeartbeat": (0, 0),  # v1 (SubscribedTopicRegex) came with Kafka 4.0
    "ConsumerGroupDescribe": (0, 0),  # v1 (MemberType) came with Kafka 4.1
    "ListConfigResources": (0, 0),  # ListClientMetricsResources in 3.9
    "DescribeTopicPartitions": (0, 0),
    # KIP-932's share coordinator RPCs: v0 in 3.9, marked latestVersionUnstable (early access, unadvertised)
    "InitializeShareGroupState": (0, 0),
    "ReadShareGroupState": (0, 0),
    "WriteShareGroupState": (0, 0),
    "DeleteShareGroupState": (0, 0),
    "ReadShareGroupStateSummary": (0, 0),
}


# KIP-932's share-group APIs: ShareGroupHeartbeat and ShareGroupDescribe v0 (4.0's early access) were
# removed in 4.1, which serves v1 alone; the share group offsets APIs are new in 4.1
KIP_932 = frozenset((
    "ShareGroupHeartbeat", "ShareGroupDescribe", "DescribeShareGroupOffsets", "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets", "ShareFetch", "ShareAcknowledge",
))


# brokers' own APIs, which only another node of a groupd cluster sends (docs/cluster.md): Kafka 4's range.
# WriteTxnMarkers: 3.9 accepted 0-1; Kafka 4.0 removed v0 ("Version 1 is the new baseline"), v2 carries
# transactions v2's TransactionVersion
INTER_BROKER_KAFKA_4 = {"WriteTxnMarkers": (1, 1)}


def test_every_api_groupd_serves_has_its_39_range():
    names = {spec.name for spec in API_TABLE.values()}
    assert names - KIP_932 - set(INTER_BROKER_KAFKA_4) == set(KAFKA_39_VALID_VERSIONS)


@pytest.mark.parametrize("name", sorted(INTER_BROKER_KAFKA_4))
def test_inter_broker_apis_serve_kafka_4s_baseline(name):
    spec = next(s for s in API_TABLE.values() if s.name == name)
    assert (spec.min_version, spec.max_version) == INTER_BROKER_KAFKA_4[name]


@pytest.mark.parametrize("name", sorted(KAFKA_39_VALID_VERSIONS))
def test_table_covers_kafka_39_range(name):
    spec = next(s for s in API_TABLE.values() if s.name == name)
    lo, hi = KAFKA_39_VALID_VERSIONS[name]
    assert spec.min_version <= lo, f"{name}: Kafka 3.9 accepts v{lo}, groupd starts at v{spec.min_version}"
    assert spec.max_version >= hi


def _all_versions():
    for spec in API_TABLE.values():
        for v in range(spec.min_version, spec.max_version + 1):
            yield spec.key, v


@pytest.mark.parametrize(("api_key", "version"), sorted(old_schemas.MODULES))
def test_generated_classes_load_and_kio_reads_them(api_key, version):
    """The generated classes are what codec resolves, kio has none of its own, and kio's reader takes them."""
    req, resp = codec.request_class(api_key, version), codec.response_class(api_key, version)
    assert req.__module__.startswith("groupd.protocol.old_schemas.") and resp.__module__.startswith(
        "groupd.protocol.old_schemas."
    )
    assert (req.__api_key__, req.__version__, resp.__version__) == (api_key, version, version)
    with pytest.raises(Exception, match="entity path"):
        load_request_schema(api_key, version)
    entity_reader(req), entity_reader(resp)
    assert not req.__flexible__


@pytest.mark.parametrize(("api_key", "version"), sorted(old_schemas.MODULES))
def test_generated_fields_match_kio_next_version_where_shared(api_key, version):
    """A field the old version shares with kio's lowest version has kio's name, Kafka type and annotation,
    so handlers written against kio's classes fill the old ones through ``codec.make`` unchanged."""
    lowest = min(v for v in range(0, 20) if (api_key, v) not in old_schemas.MODULES and _has_kio(api_key, v))
    for ours, theirs in (
        (codec.request_class(api_key, version), load_request_schema(api_key, lowest)),
        (codec.response_class(api_key, version), load_response_schema(api_key, lowest)),
    ):
        kio_fields = {f.name: f for f in fields(theirs)}
        for f in fields(ours):
            if f.name in kio_fields and f.metadata:
                assert f.metadata["kafka_type"] == kio_fields[f.name].metadata["kafka_type"], (ours, f.name)


def _has_kio(api_key, version):
    try:
        load_request_schema(api_key, version)
    except Exception:
        return False
    return True
