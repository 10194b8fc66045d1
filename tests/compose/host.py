"""The compose stack from the host: a client on this machine bootstraps at localhost:9092, is told the
broker is at localhost:9092 (the PLAINTEXT_HOST listener, not the containers' groupd:19092), produces,
reads in a consumer group and commits; then ``groupd-groups --describe`` shows the group with no lag.

Run by scripts/compose-test.sh after the stack is up: ``python -m tests.compose.host localhost:9092``."""

from __future__ import annotations

import contextlib
import io
import sys

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from groupd.cli.groups_cli import main as groups_main
from tests.compose.drive import connect_admin, log


def main(bootstrap: str) -> int:
    admin = connect_admin(bootstrap)
    brokers = [(b["host"], b["port"]) for b in admin.describe_cluster()["brokers"]]
    log(f"host client: the broker advertises {brokers}")
    if brokers != [("localhost", 9092)]:
        log("FAILED: a client on the host must be told localhost:9092")
        return 1
    admin.create_topics([NewTopic("from-host", 2, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(20):
        producer.send("from-host", value=f"h{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("from-host", bootstrap_servers=bootstrap, group_id="host-g", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20000)
    seen = 0
    for _ in consumer:
        seen += 1
        if seen == 20:
            break
    consumer.commit()
    consumer.close()
    log(f"host client: read {seen} of 20 records in group host-g")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = groups_main(["--bootstrap-server", bootstrap, "--describe", "--group", "host-g"])
    print(out.getvalue(), flush=True)
    table = [line.split() for line in out.getvalue().splitlines() if line.strip()]
    lags = [row[5] for row in table[1:]]  # Kafka's table: a header, then one row a partition
    admin.close()
    if seen != 20 or code != 0 or lags != ["0", "0"]:
        log("FAILED: the host client did not read and commit everything")
        return 1
    log("host client: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "localhost:9092"))
