"""The share coordinator's RPCs (InitializeShareGroupState 83, ReadShareGroupState 84,
WriteShareGroupState 85, DeleteShareGroupState 86, ReadShareGroupStateSummary 87) and FindCoordinator
key type 2 through a real socket, answered as Kafka 4.3's ShareCoordinatorService and KafkaApis do."""

from __future__ import annotations

import uuid

import pytest

from groupd.coordinator.partitioning import java_string_hash, kafka_abs
from groupd.coordinator.share_state.keys import topic_id_string
from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE, ApiKey
from groupd.protocol.errors import ErrorCode

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

INIT, READ, WRITE, DELETE, SUMMARY = (int(k) for k in (
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
))
_ENTITIES = {
    INIT: "InitializeStateData",
    READ: "ReadStateData",
    WRITE: "WriteStateData",
    DELETE: "DeleteStateData",
    SUMMARY: "ReadStateSummaryData",
}


def body(api: int, version: int, group: str, topics: list[tuple[uuid.UUID, list[dict]]]):
    """A request of ``api``: each topic with its partitions' fields (state batches as 4-tuples)."""
    cls = codec.request_class(api, version)
    part_cls = codec.nested(cls, "PartitionData")
    topic_cls = codec.nested(cls, _ENTITIES[api])

    def part(fields: dict):
        fields = dict(fields)
        if "state_batches" in fields:
            batch_cls = codec.nested(cls, "StateBatch")
            fields["state_batches"] = tuple(
                codec.make(batch_cls, first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                for f, last, s, c in fields["state_batches"]
            )
        return codec.make(part_cls, **fields)

    return codec.make(
        cls,
        group_id=group,
        topics=tuple(
            codec.make(topic_cls, topic_id=tid, partitions=tuple(part(p) for p in parts)) for tid, parts in topics
        ),
    )


def only(resp):
    [result] = resp.results
    [partition] = result.partitions
    return partition


@pytest.fixture
async def topic(broker):
    return broker.create_topic("t", 2, {}).topic_id


def test_the_apis_are_listed_with_kios_versions():
    assert (API_TABLE[INIT].max_version, API_TABLE[READ].max_version, API_TABLE[WRITE].max_version) == (0, 0, 1)
    assert (API_TABLE[DELETE].max_version, API_TABLE[SUMMARY].max_version) == (0, 1)


async def test_initialize_write_read_summary_delete(wire, topic):
    p = only(
        await wire.call(
            INIT, 0, body(INIT, 0, "g", [(topic, [{"partition": 1, "state_epoch": 0, "start_offset": 10}])])
        )
    )
    assert (p.partition, p.error_code, p.error_message) == (1, ErrorCode.none, None)
    write = {
        "partition": 1,
        "state_epoch": 0,
        "leader_epoch": 0,
        "start_offset": 12,
        "delivery_complete_count": 3,
        "state_batches": [(12, 14, 2, 1), (15, 20, 0, 1)],
    }
    p = only(await wire.call(WRITE, 1, body(WRITE, 1, "g", [(topic, [write])])))
    assert p.error_code == ErrorCode.none
    r = only(await wire.call(READ, 0, body(READ, 0, "g", [(topic, [{"partition": 1, "leader_epoch": 0}])])))
    assert (r.error_code, r.state_epoch, r.start_offset) == (0, 0, 12)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in r.state_batches] == [
        (12, 14, 2, 1),
        (15, 20, 0, 1),
    ]
    s = only(await wire.call(SUMMARY, 1, body(SUMMARY, 1, "g", [(topic, [{"partition": 1, "leader_epoch": 0}])])))
    assert (s.error_code, s.start_offset, s.delivery_complete_count, s.leader_epoch, s.state_epoch) == (0, 12, 3, 0, 0)
    s0 = only(await wire.call(SUMMARY, 0, body(SUMMARY, 0, "g", [(topic, [{"partition": 1, "leader_epoch": 0}])])))
    assert (s0.error_code, s0.start_offset) == (0, 12)
    d = only(await wire.call(DELETE, 0, body(DELETE, 0, "g", [(topic, [{"partition": 1}])])))
    assert d.error_code == ErrorCode.none
    r = only(await wire.call(READ, 0, body(READ, 0, "g", [(topic, [{"partition": 1, "leader_epoch": 0}])])))
    assert (r.error_code, r.error_message) == (
        ErrorCode.invalid_request,
        "Read operation on uninitialized share partition not allowed.",
    )


async def test_write_v0_has_no_delivery_complete_count(wire, topic):
    await wire.call(INIT, 0, body(INIT, 0, "g", [(topic, [{"partition": 0, "state_epoch": 0, "start_offset": 0}])]))
    write = {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 1, "state_batches": [(1, 1, 2, 1)]}
    assert only(await wire.call(WRITE, 0, body(WRITE, 0, "g", [(topic, [write])]))).error_code == 0
    s = only(await wire.call(SUMMARY, 1, body(SUMMARY, 1, "g", [(topic, [{"partition": 0, "leader_epoch": 0}])])))
    assert (s.start_offset, s.delivery_complete_count) == (1, -1)  # unknown: Kafka's default


async def test_kafkas_errors_per_partition(wire, topic):
    """Scenario 47 over the wire, and what each partition of one request hears on its own."""
    w = {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": -1, "state_batches": []}
    p = only(await wire.call(WRITE, 1, body(WRITE, 1, "g", [(topic, [w])])))
    assert (p.error_code, p.error_message) == (
        ErrorCode.invalid_request,
        "Write operation on uninitialized share partition not allowed.",
    )
    await wire.call(INIT, 0, body(INIT, 0, "g", [(topic, [{"partition": 0, "state_epoch": 3, "start_offset": 0}])]))
    p = only(await wire.call(WRITE, 1, body(WRITE, 1, "g", [(topic, [{**w, "state_epoch": 2}])])))
    assert p.error_code == ErrorCode.fenced_state_epoch
    r = only(await wire.call(READ, 0, body(READ, 0, "g", [(topic, [{"partition": 0, "leader_epoch": 5}])])))
    assert r.error_code == 0
    r = only(await wire.call(READ, 0, body(READ, 0, "g", [(topic, [{"partition": 0, "leader_epoch": 4}])])))
    assert r.error_code == ErrorCode.fenced_leader_epoch
    # a partition past the topic's count, an unknown topic, a negative partition: each its own error
    resp = await wire.call(
        INIT,
        0,
        body(
            INIT,
            0,
            "g",
            [
                (
                    topic,
                    [
                        {"partition": 1, "state_epoch": 0, "start_offset": 0},
                        {"partition": 2, "state_epoch": 0, "start_offset": 0},
                        {"partition": -1, "state_epoch": 0, "start_offset": 0},
                    ],
                ),
                (uuid.uuid4(), [{"partition": 0, "state_epoch": 0, "start_offset": 0}]),
            ],
        ),
    )
    got = [[(p.partition, p.error_code) for p in r.partitions] for r in resp.results]
    assert got == [
        [(1, 0), (2, ErrorCode.unknown_topic_or_partition), (-1, ErrorCode.invalid_request)],
        [(0, ErrorCode.unknown_topic_or_partition)],
    ]


@pytest.mark.parametrize("api", [INIT, READ, WRITE, DELETE, SUMMARY])
async def test_empty_topics_partitions_or_group_get_an_empty_response(wire, topic, api):
    part = {
        INIT: {"partition": 0, "state_epoch": 0, "start_offset": 0},
        READ: {"partition": 0, "leader_epoch": 0},
        WRITE: {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "state_batches": []},
        DELETE: {"partition": 0},
        SUMMARY: {"partition": 0, "leader_epoch": 0},
    }[api]
    for group, topics in (("g", []), ("g", [(topic, [])]), ("", [(topic, [part])])):
        resp = await wire.call(api, 0, body(api, 0, group, topics))
        assert resp.results == ()


async def test_find_coordinator_share_key(wire, broker, topic):
    """Key type 2 from v6: this node for a valid ``group:topicId:partition`` (the group may hold
    colons), INVALID_REQUEST for a key Kafka's SharePartitionKey refuses, and before v6."""
    good = f"g:x:{topic_id_string(topic)}:0"
    bad = [
        "",
        "g",
        "g:0",
        f":{topic_id_string(topic)}:0",
        f"g:{topic_id_string(topic)}:x",
        "g:not-a-uuid:0",
        f"g:{topic_id_string(topic)}:99999999999",
    ]
    resp = await wire.call(10, 6, {"key_type": 2, "coordinator_keys": [good, *bad]})
    got = [(c.key, c.error_code, c.node_id) for c in resp.coordinators]
    assert got[0] == (good, ErrorCode.none, broker.node_id) and got[0][2] >= 0
    assert [e for _k, e, _n in got[1:]] == [ErrorCode.invalid_request] * len(bad)
    resp = await wire.call(10, 5, {"key_type": 2, "coordinator_keys": [good]})
    assert resp.coordinators[0].error_code == ErrorCode.invalid_request
    assert broker.listed_topic("__share_group_state") is not None  # created at the first lookup, as Kafka does


async def test_the_state_partition_matches_kafkas_formula(broker, topic):
    """Scenario 50: ("g", id, 0) lives in abs(javaHash("g:<id>:0")) % 50."""
    from groupd.coordinator.share_state.persister import SharePartitionKey

    key = SharePartitionKey("g", topic, 0)
    expected = kafka_abs(java_string_hash(f"g:{topic_id_string(topic)}:0")) % 50
    assert broker.share_coordinator.partition_for(key) == expected
    assert await broker.share_persister.initialize(key, 0, -1) == 0
    assert set(broker.share_coordinator.logs) == {expected}


async def test_the_state_topic_is_read_as_kafkas_internal_topic(wire, broker, topic):
    """Fetch reads ``__share_group_state`` (tools that follow it decode Kafka's records), Produce to it
    is refused, Metadata lists it as internal once it holds a record."""
    from groupd.coordinator.share_state import records as R
    from groupd.coordinator.share_state.persister import SharePartitionKey
    from groupd.storage.batch import build_batch, iter_records, split_batches
    from tests.wire.test_data_plane import fetch_body, produce_body

    key = SharePartitionKey("g", topic, 1)
    p = broker.share_coordinator.partition_for(key)
    await wire.call(INIT, 0, body(INIT, 0, "g", [(topic, [{"partition": 1, "state_epoch": 0, "start_offset": 3}])]))
    resp = await wire.call(1, 11, fetch_body("__share_group_state", p, 0))
    data = resp.responses[0].partitions[0]
    assert data.error_code == 0
    [record] = [r for batch in split_batches(data.records) for r in iter_records(batch)]
    assert R.decode_key(bytes(record.key)) == R.snapshot_key(key)
    assert R.decode_value(R.SHARE_SNAPSHOT, bytes(record.value)).start_offset == 3
    resp = await wire.call(0, 9, produce_body("__share_group_state", p, build_batch([(b"k", b"v")], timestamp_ms=0)))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.invalid_topic_exception
    md = await wire.call(
        3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    )
    [state] = [t for t in md.topics if t.name == "__share_group_state"]
    assert state.is_internal and len(state.partitions) == 50
