"""What the bounds check costs a request decode: ``python -m bench.decode_bench``.

Each request of the hot path is decoded by ``groupd.protocol.request.parse_request`` (header, bounds check,
kio body) with the check and without it, in interleaved rounds; the best round of each is kept and CPU
time is counted (not wall time), so a busy shared machine moves the figures less. See
docs/malformed-requests.md.
"""

from __future__ import annotations

import time
from typing import Any

from groupd.protocol import codec, request
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request, parse_request
from groupd.storage.batch import build_batch

MEMBER = "consumer-1-0b8f3c7e-5c1a-4a5e-9d0b-1f2e3d4c5b6a"


def _nested(cls: type, entity: str, **values: Any) -> Any:
    return codec.make(codec.nested(cls, entity), **values)


def requests() -> dict[str, tuple[int, int, dict[str, Any]]]:
    """name -> (api key, version, body values): the shapes the bench's clients send."""
    join = codec.request_class(ApiKey.JOIN_GROUP, 9)
    commit = codec.request_class(ApiKey.OFFSET_COMMIT, 8)
    fetch = codec.request_class(ApiKey.FETCH, 12)
    produce = codec.request_class(ApiKey.PRODUCE, 9)

    def commit_of(partitions: int) -> dict[str, Any]:
        parts = tuple(
            _nested(
                commit,
                "OffsetCommitRequestPartition",
                partition_index=i,
                committed_offset=12345,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
            for i in range(partitions)
        )
        return {
            "group_id": "commit-a-1",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": (_nested(commit, "OffsetCommitRequestTopic", name="bench-commits", partitions=parts),),
        }

    fetch_parts = tuple(
        _nested(
            fetch,
            "FetchPartition",
            partition=i,
            current_leader_epoch=0,
            fetch_offset=100,
            last_fetched_epoch=0,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for i in range(6)
    )
    records = build_batch([(None, b"x" * 100)] * 50, timestamp_ms=1)
    return {
        "JoinGroup v9 (1 protocol)": (
            ApiKey.JOIN_GROUP,
            9,
            {
                "group_id": "bench-group-1",
                "session_timeout": 45000,
                "rebalance_timeout": 300000,
                "member_id": MEMBER,
                "group_instance_id": None,
                "protocol_type": "consumer",
                "reason": None,
                "protocols": (
                    _nested(join, "JoinGroupRequestProtocol", name="range", metadata=b"\x00\x03" + b"\x00" * 30),
                ),
            },
        ),
        "Heartbeat v4 (no arrays: no check)": (
            ApiKey.HEARTBEAT,
            4,
            {"group_id": "bench-group-1", "generation_id": 3, "member_id": MEMBER, "group_instance_id": None},
        ),
        "OffsetCommit v8 (1 topic x 1 partition)": (ApiKey.OFFSET_COMMIT, 8, commit_of(1)),
        "OffsetCommit v8 (1 x 16)": (ApiKey.OFFSET_COMMIT, 8, commit_of(16)),
        "Fetch v12 (1 x 6)": (
            ApiKey.FETCH,
            12,
            {
                "replica_id": -1,
                "max_wait": 500,
                "min_bytes": 1,
                "max_bytes": 50 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "forgotten_topics_data": (),
                "rack_id": "",
                "topics": (_nested(fetch, "FetchTopic", topic="bench-data", partitions=fetch_parts),),
            },
        ),
        "Produce v9 (1 x 1, 50 records)": (
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 5000,
                "topic_data": (
                    _nested(
                        produce,
                        "TopicProduceData",
                        name="bench-data",
                        partition_data=(_nested(produce, "PartitionProduceData", index=0, records=records),),
                    ),
                ),
            },
        ),
    }


def _per_decode_us(body: bytes, key: int, version: int, reps: int) -> float:
    started = time.process_time()
    for _ in range(reps):
        parse_request(body, key, version)
    return (time.process_time() - started) / reps * 1e6


def main(rounds: int = 15, reps: int = 20_000) -> None:
    print("| request | bytes | without | with | ratio |\n| --- | ---: | ---: | ---: | ---: |")
    for name, (key, version, values) in requests().items():
        body = encode_request(key, version, values, 1, "bench")[4:]
        parse_request(body, key, version)  # resolves the readers once
        checked = request._readers[key, version]
        unchecked = (checked[0], None, checked[2])
        without, with_check = [], []
        try:
            for _ in range(rounds):
                request._readers[key, version] = unchecked
                without.append(_per_decode_us(body, key, version, reps))
                request._readers[key, version] = checked
                with_check.append(_per_decode_us(body, key, version, reps))
        finally:
            request._readers[key, version] = checked
        a, b = min(without), min(with_check)
        print(f"| {name} | {len(body):,} | {a:.2f} µs | {b:.2f} µs | {b / a:.2f} |")


if __name__ == "__main__":
    main()
