"""A broker restarted on its store with another ``offsets.topic.num.partitions`` refuses to start, in one line
naming both numbers (Kafka documents the count "should not change after deployment" and does not check it;
tests/unit/test_coordinator_partitions.py has the rule); its groups' offsets are still there with the former
count. Run on both engines."""

import subprocess

import pytest

from groupd.broker.app import Broker
from groupd.broker.config import ConfigError
from tests.conftest import broker_config
from tests.harness import BrokerProcess, WireClient
from tests.wire.test_groups import wait_loaded
from tests.wire.test_offsets_v10 import commit_body
from tests.wire.test_txn_offsets import fetched, stable_fetch_body

pytestmark = pytest.mark.engines


async def _started(tmp_path, count):
    b = Broker(broker_config(tmp_path, **{"offsets.topic.num.partitions": str(count)}))
    await b.start()
    await wait_loaded(b)
    return b


async def _committed(b, group):
    c = await WireClient.connect(b.port)
    try:
        return fetched(await c.call(9, 7, stable_fetch_body(group, "t", [0], require_stable=False)))
    finally:
        await c.close()


async def test_a_changed_offsets_count_is_refused_and_the_former_one_still_serves(tmp_path):
    b = await _started(tmp_path, 3)
    t = b.create_topic("t", 1, {})
    c = await WireClient.connect(b.port)
    resp = await c.call(8, 10, commit_body(10, "g", [(t.topic_id, [(0, 42)])]))
    assert resp.topics[0].partitions[0].error_code == 0
    await c.close()
    await b.stop()

    with pytest.raises(ConfigError, match=r"offsets.topic.num.partitions=4 but __consumer_offsets was created with 3"):
        await Broker(broker_config(tmp_path, **{"offsets.topic.num.partitions": "4"})).start()
    process = BrokerProcess(tmp_path / "data", {"offsets.topic.num.partitions": "4"})
    done = subprocess.run(process.command(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert [line for line in done.stderr.splitlines() if line.strip()] == [
        "groupd: cannot start: offsets.topic.num.partitions=4 but __consumer_offsets was created with 3 "
        "partitions: it must not change once deployed; start with offsets.topic.num.partitions=3"
    ]

    b = await _started(tmp_path, 3)
    try:
        assert await _committed(b, "g") == [(42, 0)]
    finally:
        await b.stop()
