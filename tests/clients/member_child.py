"""One group member of any Python client in its own process, for close / kill / static-restart scenarios.

argv[1] is JSON: client (kafka-python | confluent-kafka | aiokafka), bootstrap, topic, group,
session_ms, instance (group.instance.id or null). Prints {"assigned": [...]} whenever the assignment
changes; SIGTERM closes the consumer (a dynamic member sends LeaveGroup), SIGKILL leaves nothing behind.
"""

import asyncio
import json
import signal
import sys
import time

spec = json.loads(sys.argv[1])
stop = {"now": False}
signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
deadline = time.monotonic() + spec.get("max_seconds", 120)
last = None


def report(partitions) -> None:
    global last
    assigned = sorted(partitions)
    if assigned != last:
        last = assigned
        print(json.dumps({"assigned": assigned}), flush=True)


def kafka_python() -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    extra = {}
    if spec.get("assignor") == "cooperative-sticky":
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

        extra["partition_assignment_strategy"] = [CooperativeStickyAssignor]

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            print(json.dumps({"revoked": sorted(tp.partition for tp in revoked)}), flush=True)

        def on_partitions_assigned(self, assigned):
            pass

    c = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"], group_id=spec["group"], group_instance_id=spec.get("instance"),
        session_timeout_ms=spec["session_ms"], heartbeat_interval_ms=200, enable_auto_commit=False, **extra,
    )
    c.subscribe([spec["topic"]], listener=Listener())
    while not stop["now"] and time.monotonic() < deadline:
        c.poll(timeout_ms=100)
        report(tp.partition for tp in c.assignment())
    c.close()


def confluent() -> None:
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"], "session.timeout.ms": spec["session_ms"],
            "heartbeat.interval.ms": 200, "enable.auto.commit": False}
    if spec.get("instance"):
        conf["group.instance.id"] = spec["instance"]
    c = Consumer(conf)
    c.subscribe([spec["topic"]])
    while not stop["now"] and time.monotonic() < deadline:
        c.poll(0.1)
        report(tp.partition for tp in c.assignment())
    c.close()


def aiokafka() -> None:
    from aiokafka import AIOKafkaConsumer

    async def main() -> None:
        c = AIOKafkaConsumer(
            spec["topic"],
            bootstrap_servers=spec["bootstrap"],
            group_id=spec["group"],
            group_instance_id=spec.get("instance"),
            session_timeout_ms=spec["session_ms"],
            heartbeat_interval_ms=200,
            enable_auto_commit=False,
        )
        await c.start()
        while not stop["now"] and time.monotonic() < deadline:
            await c.getmany(timeout_ms=100)
            report(tp.partition for tp in c.assignment())
        await c.stop()

    asyncio.run(main())


{"kafka-python": kafka_python, "confluent-kafka": confluent, "aiokafka": aiokafka}[spec["client"]]()
print(json.dumps({"closed": True}), flush=True)
