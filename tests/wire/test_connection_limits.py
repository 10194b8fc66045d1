"""Connection limits with Kafka's names (issue 26 item 8): ``max.connections``,
``max.connections.per.ip`` and its overrides, ``connections.max.idle.ms``, and what happens when the
process runs out of file descriptors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import pytest

from groupd.broker.app import Broker
from tests.conftest import broker_config
from tests.harness import BrokerProcess, WireClient
from tests.wire.test_data_plane import fetch_body

API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}


async def probe(port: int, wait: float = 0.5) -> tuple[str, WireClient]:
    """Connect and ask ApiVersions: ``answered``, ``closed`` (EOF or reset) or ``silent`` (then
    ``client.answer`` is the answer still awaited)."""
    client = await WireClient.connect(port)
    client.send(18, 3, API_VERSIONS)
    client.answer = asyncio.ensure_future(client.recv())
    done, _ = await asyncio.wait([client.answer], timeout=wait)
    if not done:
        return "silent", client
    try:
        client.answer.result()
        return "answered", client
    except (asyncio.IncompleteReadError, ConnectionError):
        return "closed", client


@contextlib.asynccontextmanager
async def running(tmp_path, **config):
    broker = Broker(broker_config(tmp_path, **config))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


async def close_all(clients):
    for c in clients:
        await c.close()


async def test_a_connection_over_max_connections_per_ip_is_closed_at_once(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="groupd.connection")
    async with running(tmp_path, **{"max.connections.per.ip": 2}) as broker:
        first = [await probe(broker.port) for _ in range(2)]
        assert [state for state, _ in first] == ["answered", "answered"]
        started = time.monotonic()
        state, extra = await probe(broker.port, wait=3)
        assert state == "closed" and time.monotonic() - started < 1.0, state
        assert "max.connections.per.ip 2" in caplog.text and "127.0.0.1" in caplog.text
        assert broker.metrics.connections_refused == {"per_ip": 1}
        await extra.close()
        # the two served go on being served, and a freed slot takes the next one
        assert (await first[0][1].call(18, 3, API_VERSIONS)).error_code == 0
        await first[1][1].close()
        await asyncio.sleep(0.1)
        state, again = await probe(broker.port)
        assert state == "answered"
        await close_all([first[0][1], again])


async def test_per_ip_overrides_raise_or_lower_one_address(tmp_path):
    """Kafka's ``host:count,host:count``: an address given there gets its own limit."""
    async with running(
        tmp_path, **{"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "10.9.9.9:0, 127.0.0.1:3"}
    ) as broker:
        probes = [await probe(broker.port) for _ in range(4)]
        assert [state for state, _ in probes] == ["answered", "answered", "answered", "closed"]
        await close_all([c for _, c in probes])


async def test_at_max_connections_the_broker_stops_accepting_until_one_closes(tmp_path, caplog):
    """Kafka blocks its acceptor while the broker-wide limit is reached: the connection waits in the
    listen backlog, unanswered, and is taken once another closes; the open ones are served meanwhile."""
    async with running(tmp_path, **{"max.connections": 2}) as broker:
        first = [await probe(broker.port) for _ in range(2)]
        assert [state for state, _ in first] == ["answered", "answered"]
        state, waiting = await probe(broker.port, wait=0.5)
        assert state == "silent"
        assert "max.connections 2 reached" in caplog.text
        assert (await first[0][1].call(18, 3, API_VERSIONS)).error_code == 0, "the open connections are served"
        await first[1][1].close()
        answer = await asyncio.wait_for(waiting.answer, 5)  # the ApiVersions sent while it waited
        assert answer.error_code == 0
        await close_all([first[0][1], waiting])


async def test_an_idle_connection_is_closed_after_connections_max_idle_ms(tmp_path):
    async with running(tmp_path, **{"connections.max.idle.ms": 400}) as broker:
        broker.create_topic("idle", 1, {})
        _, idle = await probe(broker.port)
        _, busy = await probe(broker.port)
        _, polling = await probe(broker.port)
        polling.send(1, 11, fetch_body("idle", 0, 0, max_wait=1500))  # a parked request is not idleness
        deadline = time.monotonic() + 1.6
        while time.monotonic() < deadline:
            assert (await busy.call(18, 3, API_VERSIONS)).error_code == 0
            await asyncio.sleep(0.1)
        assert await asyncio.wait_for(idle.reader.read(), 1) == b"", "the idle one was closed"
        assert (await asyncio.wait_for(polling.recv(), 2)).responses[0].partitions[0].error_code == 0
        assert broker.metrics.connections_closed_idle == 1
        await close_all([idle, busy, polling])


async def test_connections_max_idle_ms_negative_keeps_idle_connections(tmp_path):
    async with running(tmp_path, **{"connections.max.idle.ms": -1}) as broker:
        _, idle = await probe(broker.port)
        await asyncio.sleep(0.6)
        assert (await idle.call(18, 3, API_VERSIONS)).error_code == 0
        await idle.close()


def test_out_of_file_descriptors_is_logged_once_and_new_connections_closed_not_left_hanging(tmp_path):
    """With the process out of descriptors, a connection cannot be served; it is closed at once (the
    client retries) and the broker says why, once per interval rather than once per connection. When
    descriptors free up, connections are served again."""
    import socket
    import struct

    from tests.harness import request_bytes

    proc = BrokerProcess(
        tmp_path / "data",
        {
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            "log.level": "INFO",
        },
        nofile=64,
    )
    proc.start()
    held: list[socket.socket] = []
    try:
        outcomes: dict[str, int] = {}
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", proc.port), timeout=2)
            held.append(s)
            try:
                s.sendall(request_bytes(18, 0, {}, correlation_id=1))
                head = s.recv(4)
                outcome = "closed" if not head else "answered"
                if head:
                    (size,) = struct.unpack(">i", head)
                    while size > 0:
                        size -= len(s.recv(size))
            except TimeoutError:
                outcome = "silent"
            except OSError:
                outcome = "closed"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert outcomes.get("answered", 0) > 10 and outcomes.get("closed", 0) > 10, outcomes
        assert "silent" not in outcomes, outcomes
        log = proc.log_text()
        assert log.count("out of file descriptors") == 1, log[-3000:]
        assert "Traceback" not in log
        for s in held:
            s.close()
        held.clear()
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", proc.port), timeout=2) as s:
            s.sendall(request_bytes(18, 0, {}, correlation_id=1))
            assert len(s.recv(4)) == 4, "served again once descriptors are free"
    finally:
        for s in held:
            s.close()
        proc.kill()


@pytest.mark.parametrize(
    "overrides, why",
    [
        ({"max.connections.per.ip": 0}, "can be set to zero only if max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "host:many"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "bad host!:3"}, "invalid addresses"),
        ({"max.connections.per.ip.overrides": "nocount"}, "max.connections.per.ip.overrides"),
        ({"max.connections": -1}, "must be >= 0"),
        (
            {"connections.max.idle.ms": 50, "connection.failed.authentication.delay.ms": 100},
            "should always be less than connections.max.idle.ms",
        ),
    ],
)
def test_limits_are_validated_as_kafka_validates_them(tmp_path, overrides, why):
    from groupd.broker.config import ConfigError

    with pytest.raises(ConfigError, match=why.replace(".", r"\.")):
        broker_config(tmp_path, **overrides)


def test_overrides_parse_as_kafkas_csv_map(tmp_path):
    config = broker_config(tmp_path, **{"max.connections.per.ip.overrides": " hostName:100 , 127.0.0.1:200,::1:7"})
    assert config["max.connections.per.ip.overrides"] == {"hostName": 100, "127.0.0.1": 200, "::1": 7}
    defaults = broker_config(tmp_path)
    assert (defaults["max.connections"], defaults["max.connections.per.ip"], defaults["connections.max.idle.ms"]) == (
        2**31 - 1,
        2**31 - 1,
        600_000,
    )
    assert defaults["max.connections.per.ip.overrides"] == {}
