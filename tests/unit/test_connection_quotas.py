"""groupd/broker/network/acceptor.py's pure parts: Kafka's ConnectionQuotas counting, and a log line at most once per
interval however often its event comes."""

from __future__ import annotations

from groupd.broker.network import acceptor
from groupd.broker.network.acceptor import ConnectionQuotas, Occasional


def test_occasional_logs_the_first_then_counts_until_the_interval_passes(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(acceptor.time, "monotonic", lambda: now[0])
    line = Occasional(10.0)
    assert line.due() == 0
    assert [line.due() for _ in range(5)] == [None] * 5
    now[0] += 9.9
    assert line.due() is None
    now[0] += 0.2
    assert line.due() == 6, "the next line says how many went unlogged"
    now[0] += 10
    assert line.due() == 0


def test_quotas_count_per_address_and_in_all_with_overrides():
    quotas = ConnectionQuotas(max_connections=3, per_ip=1, overrides={"10.0.0.2": 2})
    assert (quotas.limit_of("10.0.0.1"), quotas.limit_of("10.0.0.2")) == (1, 2)
    for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.2"):
        assert not quotas.full()
        quotas.opened(ip)
    assert quotas.full() and quotas.by_ip == {"10.0.0.1": 1, "10.0.0.2": 2}
    quotas.closed("10.0.0.2")
    quotas.closed("10.0.0.1")
    assert not quotas.full() and quotas.total == 1 and quotas.by_ip == {"10.0.0.2": 1}


def test_overrides_naming_a_host_apply_to_its_addresses():
    quotas = ConnectionQuotas(10, 1, {"localhost": 5, "127.0.0.9": 7})
    quotas.resolve_overrides()
    assert quotas.limit_of("127.0.0.1") == 5 and quotas.limit_of("127.0.0.9") == 7 and quotas.limit_of("10.1.1.1") == 1
