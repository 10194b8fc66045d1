"""The compose stack over PostgreSQL (the `postgres` profile, GROUPD_STORAGE_ENGINE=postgresql), from the
host, in two phases around ``docker compose restart groupd``:

- ``before``: produce 30 records to ``pg-restart``, read them in group ``pg-g`` and commit offset 20;
- ``after``: a consumer of ``pg-g`` starts from the committed offset: it reads records 20 to 29 and
  nothing else, so both the records and the commit outlived the broker's restart in the database.

Run by scripts/compose-test.sh: ``python -m tests.compose.restart localhost:9092 before|after``."""

from __future__ import annotations

import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from tests.compose.drive import connect_admin, log

TOPIC, GROUP, RECORDS, COMMITTED = "pg-restart", "pg-g", 30, 20
TP = TopicPartition(TOPIC, 0)


def consumer(bootstrap: str) -> KafkaConsumer:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    c.assign([TP])
    return c


def before(bootstrap: str) -> bool:
    admin = connect_admin(bootstrap)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(RECORDS):
        producer.send(TOPIC, value=b"r%d" % i, partition=0)
    producer.flush()
    producer.close()
    c = consumer(bootstrap)
    values = [m.value for m in c]
    c.commit({TP: OffsetAndMetadata(COMMITTED, "", -1)})
    committed = c.committed(TP)
    c.close()
    log(f"postgres profile, before the restart: read {len(values)} records, committed {committed}")
    return values == [b"r%d" % i for i in range(RECORDS)] and committed == COMMITTED


def after(bootstrap: str) -> bool:
    connect_admin(bootstrap).close()  # waits for the restarted broker
    c = consumer(bootstrap)
    committed = c.committed(TP)
    values = [m.value for m in c]
    c.close()
    log(f"postgres profile, after the restart: committed {committed}, read {[v.decode() for v in values]}")
    return committed == COMMITTED and values == [b"r%d" % i for i in range(COMMITTED, RECORDS)]


def main(bootstrap: str, phase: str) -> int:
    ok = before(bootstrap) if phase == "before" else after(bootstrap)
    if not ok:
        log(f"FAILED: the postgres profile's {phase} phase")
        return 1
    log(f"postgres profile: {phase} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
