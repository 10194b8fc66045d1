"""A kafka-python group member in its own process, so a test can SIGKILL it (no LeaveGroup)."""

import sys
import time

from kafka import KafkaConsumer


def main() -> None:
    bootstrap, topic, group, session_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=session_ms, heartbeat_interval_ms=200,
        enable_auto_commit=False,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=100)
        print("ASSIGNED", sorted(tp.partition for tp in consumer.assignment()), flush=True)


if __name__ == "__main__":
    main()
