"""A share consumer's time to its first record (issue 42): from its first ShareGroupHeartbeat to the first
record a ShareFetch hands it, for a new group's first member and for a second member joining, against one
in-process broker over loopback sockets with the broker's default share-group settings.

    .venv/bin/python -m bench.share_first_record

Each member behaves as librdkafka's share consumer does (its debug log, `debug=cgrp`): it joins with
epoch 0 and its topics, heartbeats again after the interval the answer gives (5 s: Kafka's
group.share.heartbeat.interval.ms, whose minimum is 5 s), and fetches as soon as an answer gives it
partitions. Three cases: a new group (its partitions are initialized after the first heartbeat, so they
come with the second); a second member joining once the assignment interval (1 s) has passed since the
last target (its partitions come with its first heartbeat); a second member joining within that interval
(the target waits for the next heartbeat). Kafka 4.3's path, read from its source, is printed beside
each: `kafka_path`. Bounded: every wait is capped at 30 s.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import client
from bench.run import groupd_overrides
from bench.share_fetch import share_fetch_body
from groupd.broker.app import Broker
from groupd.broker.config import default_config
from groupd.protocol.api_table import ApiKey
from groupd.storage.batch import build_batch

SHARE_FETCH, SHARE_HEARTBEAT, PRODUCE = int(ApiKey.SHARE_FETCH), int(ApiKey.SHARE_GROUP_HEARTBEAT), int(ApiKey.PRODUCE)
CAP = 30.0  # seconds any one member may wait for its first record

KAFKA_PATH = {
    "new_group": "first heartbeat: group epoch bumped, target computed over the initialized partitions (none "
    "yet): epoch 2, empty assignment, HeartbeatIntervalMs 5000; InitializeShareGroupState sent from a timer "
    "task after the answer; second heartbeat (5 s later): initialized partitions no target holds bump the epoch, "
    "the assignment interval (1 s) has passed, the new target is answered at once; then ShareFetch "
    "(GroupMetadataManager.shareGroupHeartbeat, initializedAssignmentPending, GroupCoordinatorService."
    "persisterInitialize)",
    "second_member_after_interval": "first heartbeat: the new subscription bumps the epoch, the target is "
    "computed at once (the last one is older than group.share.assignment.interval.ms) and the member takes it "
    "in the same answer (ShareGroupAssignmentBuilder: no revocation phase)",
    "second_member_within_interval": "first heartbeat: the epoch is bumped but the target waits for the "
    "assignment interval (canComputeNextTargetAssignment); the member gets the old target (nothing) and its "
    "partitions at its next heartbeat, 5 s later",
}


async def produce(conn: client.Conn, topic: str, partitions: int, n: int) -> None:
    for p in range(partitions):
        batch = bytes(build_batch([(None, b"x" * 100)] * n, timestamp_ms=int(time.time() * 1000)))
        r = await conn.call(
            PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}],
            },
        )
        assert r.responses[0].partition_responses[0].error_code == 0


def _millis(value: timedelta | int) -> int:
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


async def first_record(port: int, group: str, member: str, topic: str) -> dict[str, Any]:
    """Join, heartbeat at the answered interval until partitions come, fetch until a record comes."""
    conn = await client.Conn.open("127.0.0.1", port)
    started = time.monotonic()
    epoch, heartbeats = 0, 0
    assigned: list[tuple[uuid.UUID, list[int]]] = []
    out: dict[str, Any] = {}
    try:
        while not assigned and time.monotonic() - started < CAP:
            r = await conn.call(
                SHARE_HEARTBEAT,
                1,
                {
                    "group_id": group,
                    "member_id": member,
                    "member_epoch": epoch,
                    "rack_id": None,
                    "subscribed_topic_names": [topic],
                },
            )
            assert r.error_code == 0, r
            heartbeats += 1
            epoch = r.member_epoch
            if r.assignment is not None:
                assigned = [(t.topic_id, list(t.partitions)) for t in r.assignment.topic_partitions if t.partitions]
            if not assigned:
                await asyncio.sleep(_millis(r.heartbeat_interval) / 1000)
        out["heartbeats"] = heartbeats
        out["assigned_after_ms"] = round((time.monotonic() - started) * 1000, 1)
        session, records = 0, 0
        while assigned and not records and time.monotonic() - started < CAP:
            ((tid, ps),) = assigned  # one topic
            r = await conn.call(SHARE_FETCH, 1, share_fetch_body(group, member, tid, session, [], partitions=tuple(ps)))
            assert r.error_code == 0, r
            session += 1
            records = sum(
                a.last_offset - a.first_offset + 1
                for t in r.responses
                for p in t.partitions
                for a in p.acquired_records
            )
        out["first_record_after_ms"] = round((time.monotonic() - started) * 1000, 1) if records else None
        return out
    finally:
        await conn.close()


async def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        overrides = groupd_overrides(False, Path(tmp), 0)
        broker = Broker(default_config(**overrides))
        await broker.start()
        while not broker.coordinator.is_loaded():
            await asyncio.sleep(0.01)
        try:
            port = broker.port
            broker.create_topic("first", 2, {})
            conn = await client.Conn.open("127.0.0.1", port)
            out: dict[str, Any] = {
                "heartbeat_interval_ms": broker.config["group.share.heartbeat.interval.ms"],
                "assignment_interval_ms": broker.config["group.share.assignment.interval.ms"],
            }
            try:
                # earliest, so the records already there are the first member's
                await set_earliest(port, "g")
                await produce(conn, "first", 2, 10)
                out["new_group"] = await first_record(port, "g", "m1" + "x" * 20, "first")
                await asyncio.sleep(out["assignment_interval_ms"] / 1000 + 0.2)
                await produce(conn, "first", 2, 10)  # fresh records, not acquired by the first member
                out["second_member_after_interval"] = await first_record(port, "g", "m2" + "x" * 20, "first")
                await produce(conn, "first", 2, 10)
                out["second_member_within_interval"] = await first_record(port, "g", "m3" + "x" * 20, "first")
            finally:
                await conn.close()
            for case, path in KAFKA_PATH.items():
                out[case]["kafka_path"] = path
            return out
        finally:
            await broker.stop()


async def set_earliest(port: int, group: str) -> None:
    """share.auto.offset.reset=earliest on the group (IncrementalAlterConfigs on a GROUP resource)."""
    conn = await client.Conn.open("127.0.0.1", port)
    try:
        r = await conn.call(
            int(ApiKey.INCREMENTAL_ALTER_CONFIGS),
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert r.responses[0].error_code == 0, r
    finally:
        await conn.close()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
