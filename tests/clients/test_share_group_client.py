"""confluent-kafka's ShareConsumer (librdkafka 2.16) against groupd's share-group coordinator: it joins
with ShareGroupHeartbeat v1, gets an empty assignment while its partitions are initialized and both
partitions at its next heartbeat (5 s later: the heartbeat interval), and leaves with epoch -1 when
closed (the record delivery itself is ShareFetch's, tested with it)."""

import asyncio
import threading
import time

import pytest
from confluent_kafka import ShareConsumer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from groupd.protocol import codec
from tests.clients.kp import wait_until
from tests.harness import WireClient

pytestmark = pytest.mark.client


def described(port: int, group: str):
    async def ask():
        c = await WireClient.connect(port)
        try:
            body = codec.make(codec.request_class(77, 1), group_ids=(group,), include_authorized_operations=False)
            (g,) = (await c.call(77, 1, body)).groups
            return g
        finally:
            await c.close()

    return asyncio.run(ask())


@pytest.mark.scenario("confluent-kafka ShareConsumer", 31)
def test_share_consumer_joins_gets_its_partitions_and_leaves(broker_process):
    bs = broker_process.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("queue", 2, 1)])
    admin.close()
    stop = threading.Event()

    def consume():
        c = ShareConsumer({"bootstrap.servers": bs, "group.id": "sg"})
        c.subscribe(["queue"])
        while not stop.is_set():
            try:
                c.poll(0.2)
            except Exception:  # ShareFetch is another part's; the membership is what is tested here
                time.sleep(0.2)
        c.close()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    try:
        def assigned():
            g = described(broker_process.port, "sg")
            return (
                g.error_code == 0
                and len(g.members) == 1
                and sum(len(tp.partitions) for tp in g.members[0].assignment.topic_partitions) == 2
            )

        wait_until(assigned, 30, "the share consumer to hold both partitions")
        g = described(broker_process.port, "sg")
        assert (g.group_state, g.assignor_name, g.members[0].member_epoch) == ("Stable", "simple", 3)
        assert g.members[0].subscribed_topic_names == ("queue",)
    finally:
        stop.set()
        t.join(30)
    wait_until(lambda: described(broker_process.port, "sg").group_state == "Empty", 30, "the member to leave")
