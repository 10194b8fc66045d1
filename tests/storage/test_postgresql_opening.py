"""Opening a partition another node makes at the same moment (three cluster nodes starting together open
the same broker log): the opening statement's INSERT ... ON CONFLICT DO NOTHING waits for the other
transaction and then returns nothing, and the statement's snapshot does not see the other's row; the
engine reads again and opens it, never a KeyError at start-up."""

from __future__ import annotations

import threading

import psycopg

from groupd.storage import engines
from groupd.storage.postgresql.engine import PostgresEngine

BROKER_LOG = 1  # groupd_partition.kind of a broker log (schema.py)


def test_a_broker_log_made_by_another_node_meanwhile_is_opened(postgresql_url: str) -> None:
    engine = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url})
    assert isinstance(engine, PostgresEngine)
    engine.open()
    other = psycopg.connect(postgresql_url)
    try:
        # the other node's opening: its row made, its transaction not yet committed
        other.execute(
            "INSERT INTO groupd_partition (kind, topic, partition) VALUES (%s, %s, -1)", (BROKER_LOG, "shared-log")
        )
        opened: list[object] = []
        failed: list[BaseException] = []

        def open_it() -> None:
            try:
                opened.append(engine.open_broker_log("shared-log"))
            except BaseException as exc:  # reported by the assertion below
                failed.append(exc)

        opener = threading.Thread(target=open_it)
        opener.start()
        opener.join(1.0)
        assert opener.is_alive()  # its INSERT waits for the other transaction's row
        other.commit()
        opener.join(10.0)
        assert not failed, failed
        assert len(opened) == 1
        rows = other.execute(
            "SELECT count(*) FROM groupd_partition WHERE kind = %s AND topic = %s", (BROKER_LOG, "shared-log")
        ).fetchone()
        assert rows == (1,)
    finally:
        other.close()
        engine.close()
