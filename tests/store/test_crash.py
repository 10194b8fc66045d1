"""SIGKILL a broker under concurrent OffsetCommit load; every acknowledged commit must survive."""

import asyncio
import random
import time

import pytest

from tests.harness import BrokerProcess, WireClient

ROUNDS = 20
COMMITTERS = 6


def _commit_body(group, topic, partition, offset):
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": (
            _topic_cls()(
                name=topic,
                partitions=(
                    _partition_cls()(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=f"m{offset}",
                    ),
                ),
            ),
        ),
    }


def _topic_cls():
    from groupd.protocol import codec

    return codec.nested(codec.request_class(8, 8), "OffsetCommitRequestTopic")


def _partition_cls():
    from groupd.protocol import codec

    return codec.nested(codec.request_class(8, 8), "OffsetCommitRequestPartition")


async def _committer(port, group, acked, stop):
    try:
        client = await WireClient.connect(port)
    except OSError:
        return
    offset = acked.get(group, -1) + 1
    try:
        while not stop.is_set():
            resp = await client.call(8, 8, _commit_body(group, "crash", 0, offset), timeout=5)
            if resp.topics[0].partitions[0].error_code == 0:
                acked[group] = offset  # acknowledged: must survive
            offset += 1
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        await client.close()


async def _fetch(port, group):
    client = await WireClient.connect(port)
    from groupd.protocol import codec

    topic = codec.nested(codec.request_class(9, 7), "OffsetFetchRequestTopic")
    resp = await client.call(
        9, 7, {"group_id": group, "topics": (topic(name="crash", partition_indexes=(0,)),), "require_stable": False}
    )
    await client.close()
    return resp.topics[0].partitions[0].committed_offset, resp.topics[0].partitions[0].metadata


async def _wait_loaded(port, group, deadline):
    while time.monotonic() < deadline:
        try:
            offset, _ = await _fetch(port, group)
            return offset
        except (OSError, AssertionError, asyncio.IncompleteReadError):
            await asyncio.sleep(0.05)
    raise AssertionError("broker did not come back")


@pytest.mark.timeout(240)
async def test_sigkill_loses_no_acknowledged_commit(tmp_path):
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    # the topic must exist for commits to be accepted
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from groupd.broker.app import Broker  # noqa: F401  (topics are created through the registry below)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("crash", 1, 1)])
    admin.close()
    acked: dict[str, int] = {}
    rng = random.Random(7)
    started = time.monotonic()
    try:
        for _ in range(ROUNDS):
            stop = asyncio.Event()
            groups = [f"g{i}" for i in range(COMMITTERS)]
            tasks = [asyncio.create_task(_committer(broker.port, g, acked, stop)) for g in groups]
            await asyncio.sleep(rng.uniform(0.05, 0.3))
            broker.kill()  # SIGKILL mid-load
            stop.set()
            await asyncio.gather(*tasks)
            broker.start()
            deadline = time.monotonic() + 20
            for g, offset in acked.items():
                got = await _wait_loaded(broker.port, g, deadline)
                assert got >= offset, f"{g}: acknowledged {offset} but found {got} after SIGKILL"
        assert sum(acked.values()) > ROUNDS, "the load committed almost nothing"
        # metadata round-trips byte for byte
        g, offset = next(iter(acked.items()))
        _, meta = await _fetch(broker.port, g)
        assert meta.startswith("m")
    finally:
        broker.kill()
    assert time.monotonic() - started < 200


def _last_segments(log_dir):
    from groupd.protocol.topic_names import OFFSETS_TOPIC

    out = {}
    for d in log_dir.glob(f"{OFFSETS_TOPIC}-*"):
        segments = sorted(d.glob("*.log"))
        if segments:
            out[d] = segments[-1]
    return out


@pytest.mark.timeout(120)
async def test_a_power_loss_after_the_journal_loses_no_acknowledged_commit(tmp_path):
    """Commits acknowledged after one fdatasync of the offsets journal, then a crash that also undoes
    every write to the offsets partitions' own files since they were last synced: restarting
    restores them from the journal."""
    data = tmp_path / "data"
    broker = BrokerProcess(data)
    broker.start()
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("crash", 1, 1)])
    admin.close()
    acked: dict[str, int] = {}
    groups = [f"g{i}" for i in range(COMMITTERS)]
    try:
        stop = asyncio.Event()
        tasks = [asyncio.create_task(_committer(broker.port, g, acked, stop)) for g in groups]
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*tasks)
        assert broker.stop() == 0  # a clean stop: every partition durable on its own
        durable = {d: (seg, seg.stat().st_size) for d, seg in _last_segments(data).items()}
        first = dict(acked)
        broker.start()
        stop = asyncio.Event()
        tasks = [asyncio.create_task(_committer(broker.port, g, acked, stop)) for g in groups]
        await asyncio.sleep(0.5)
        broker.kill()
        stop.set()
        await asyncio.gather(*tasks)
        assert acked != first, "nothing was committed after the restart"
        journal = sorted(data.glob("__consumer_offsets.journal.*"))
        assert len(journal) == 2 and sum(p.stat().st_size for p in journal) > 0
        for d, seg in _last_segments(data).items():  # the power loss
            if d not in durable or durable[d][0] != seg:
                seg.unlink()
                continue
            with open(seg, "r+b") as f:
                f.truncate(durable[d][1])
        broker.start()
        deadline = time.monotonic() + 20
        for g, offset in acked.items():
            got = await _wait_loaded(broker.port, g, deadline)
            assert got >= offset, f"{g}: acknowledged {offset} but found {got} after a power loss"
        assert "restored" in broker.log_text()
    finally:
        broker.kill()


@pytest.mark.timeout(60)
async def test_a_running_brokers_partition_files_catch_up_within_a_second(tmp_path):
    """Journaled batches reach the partitions' own files while the broker runs, for readers such as
    the pipeline, without waiting for a checkpoint or a stop."""
    from groupd.pipeline.store import offsets_partitions, read_offsets_partition

    data = tmp_path / "data"
    broker = BrokerProcess(data)
    broker.start()
    try:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("crash", 1, 1)])
        admin.close()
        client = await WireClient.connect(broker.port)
        resp = await client.call(8, 8, _commit_body("quiet", "crash", 0, 41), timeout=5)
        await client.close()
        assert resp.topics[0].partitions[0].error_code == 0
        deadline = time.monotonic() + 5
        found = []
        while time.monotonic() < deadline and not found:
            await asyncio.sleep(0.2)
            found = [
                row
                for d in offsets_partitions(data)
                for row in read_offsets_partition(d, "commits")
                if row[0] == "quiet"
            ]
        assert [row[3] for row in found] == [41]
    finally:
        broker.kill()
