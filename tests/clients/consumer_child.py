"""A kafka-python group member in its own process.

kafka-python 3 runs every client of a process on one shared I/O thread, so several consumers (or a
consumer and an admin client) in one test process can stall each other. Each member therefore lives in
its own process, reports its assignment and records as JSON lines, leaves the group on SIGTERM
(close() sends LeaveGroup) and can be SIGKILLed to test session expiry.
"""

import json
import signal
import sys
import time

from kafka import KafkaConsumer


def main() -> None:
    spec = json.loads(sys.argv[1])
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    consumer = KafkaConsumer(spec.pop("topic"), **spec.pop("config"))
    commit = spec.get("commit", False)
    last = None
    deadline = time.monotonic() + spec.get("max_seconds", 120)
    while not stop["now"] and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=100)
        for tp, records in batch.items():
            for r in records:
                print(json.dumps({"record": [tp.partition, r.offset, r.value.decode(errors="replace")]}), flush=True)
        if batch and commit:
            consumer.commit()
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != last:
            last = assigned
            print(json.dumps({"assigned": assigned}), flush=True)
    consumer.close()
    print(json.dumps({"closed": True}), flush=True)


if __name__ == "__main__":
    main()
