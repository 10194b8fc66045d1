"""The share coordinator across restarts of a real broker process (``python -m groupd``): every state whose
RPC was answered survives a SIGKILL, snapshots and updates alike, and pruning keeps what is needed."""

from __future__ import annotations

from tests.harness import BrokerProcess, WireClient
from tests.wire.test_quotas import create_topics_body
from tests.wire.test_share_state_apis import INIT, READ, SUMMARY, WRITE, body, only


async def _states(port, topic, groups):
    c = await WireClient.connect(port)
    try:
        out = {}
        for g in groups:
            r = only(await c.call(READ, 0, body(READ, 0, g, [(topic, [{"partition": 0, "leader_epoch": -1}])])))
            s = only(await c.call(SUMMARY, 1, body(SUMMARY, 1, g, [(topic, [{"partition": 0, "leader_epoch": -1}])])))
            batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in r.state_batches]
            out[g] = (r.error_code, r.state_epoch, r.start_offset, batches, s.delivery_complete_count)
        return out
    finally:
        await c.close()


async def test_states_survive_sigkill_and_restart(tmp_path):
    # 3 updates a snapshot, so the history holds snapshots and updates after them
    proc = BrokerProcess(tmp_path / "data", {"share.coordinator.snapshot.update.records.per.snapshot": "3"}).start()
    try:
        c = await WireClient.connect(proc.port)
        resp = await c.call(19, 7, create_topics_body(7, [("t", 1)]))
        topic = resp.topics[0].topic_id
        groups = [f"g{i}" for i in range(4)]
        for i, g in enumerate(groups):
            assert (
                only(
                    await c.call(
                        INIT, 0, body(INIT, 0, g, [(topic, [{"partition": 0, "state_epoch": 1, "start_offset": 0}])])
                    )
                ).error_code
                == 0
            )
            for n in range(i * 3):  # g0 none, g1 3 (still updates), g2 6 (a snapshot in between), g3 9
                write = {
                    "partition": 0,
                    "state_epoch": 1,
                    "leader_epoch": 0,
                    "start_offset": n // 2,
                    "delivery_complete_count": n + 1,
                    "state_batches": [(n, n, 2, 1), (n + 1, n + 3, 0, n % 3 + 1)],
                }
                assert only(await c.call(WRITE, 1, body(WRITE, 1, g, [(topic, [write])]))).error_code == 0
        await c.close()
        before = await _states(proc.port, topic, groups)
        proc.kill()  # no clean stop: what was answered was durable
        proc.start()
        assert await _states(proc.port, topic, groups) == before
        proc.restart()  # and a clean stop and start
        assert await _states(proc.port, topic, groups) == before
    finally:
        proc.kill()
    assert before["g0"] == (0, 1, 0, [], 0)
    assert before["g3"][2] == 4 and before["g3"][4] == 9
