"""Replay, without timing luck, the librdkafka race behind 0045_subscribe_many_updates' rare failures.

    make run &   # or any broker (groupd or Kafka) with the consumer group protocol
    .venv/bin/python scripts/librdkafka_resubscribe_race.py 127.0.0.1:9092 [--subscribe-after-leave]

Under ``group.protocol=consumer`` a consumer with a rebalance callback changes its subscription (the broker
answers with a revocation that waits for the application's next poll), then calls ``unsubscribe()``, and
``subscribe()`` comes either before its next poll or, with ``--subscribe-after-leave``, after a poll that
lets it send its leave. librdkafka 2.15.1 and 2.16.0 then send the leave and, in the first case, nothing
more: the new subscription is never sent. In the second they rejoin with a heartbeat at epoch 0 that is
not a full request (no rebalance timeout, no owned partitions), which the broker must refuse with
INVALID_REQUEST (Kafka's first-request checks): a fatal error for the consumer. Either way it gets no
assignment. The script says which happened (exit 0: assigned, 1: not), so a new librdkafka can be
checked, and so can Kafka's answers to the same steps.
"""

from __future__ import annotations

import sys
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4
WAIT_S = 20.0


def _wait_for(consumer: Consumer, count: int, seconds: float) -> bool:
    """Poll (running the rebalance callbacks) until the assignment has ``count`` partitions."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        consumer.poll(0.1)
        if len(consumer.assignment()) == count:
            return True
    return False


def main(bootstrap: str, subscribe_after_leave: bool) -> int:
    run = uuid.uuid4().hex[:8]
    topics = [f"resubscribe-race-{run}-{i}" for i in range(7)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        future.result()
    events: list[str] = []

    def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
        events.append(f"assign {len(parts)}")
        c.incremental_assign(parts)

    def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
        events.append(f"revoke {len(parts)}")
        c.incremental_unassign(parts)

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"resubscribe-race-{run}", "group.protocol": "consumer"}
    )
    try:
        consumer.subscribe(topics[0:5], on_assign=on_assign, on_revoke=on_revoke)
        if not _wait_for(consumer, 5 * PARTITIONS, WAIT_S):
            print(f"no first assignment within {WAIT_S:.0f} s: {events}")
            return 2
        consumer.subscribe(topics[1:6], on_assign=on_assign, on_revoke=on_revoke)  # answered with a revocation
        time.sleep(1.0)  # the answer arrives; its revocation waits for the next poll
        consumer.unsubscribe()
        if subscribe_after_leave:
            for _ in range(5):  # the callbacks run, the leave goes out and is answered
                consumer.poll(0.2)
        consumer.subscribe(topics[2:7], on_assign=on_assign, on_revoke=on_revoke)
        assigned = _wait_for(consumer, 5 * PARTITIONS, WAIT_S)
        print(
            f"{'assigned' if assigned else 'no assignment'}: {len(consumer.assignment())} partitions after "
            f"unsubscribe and subscribe; rebalance callbacks {events}"
        )
        return 0 if assigned else 1
    finally:
        consumer.close()
        admin.delete_topics(topics)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sys.exit(main(args[0] if args else "127.0.0.1:9092", "--subscribe-after-leave" in sys.argv[1:]))
