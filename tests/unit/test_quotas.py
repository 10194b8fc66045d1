"""Client quotas, pure: entities, precedence, the sampled rate and throttle times (Kafka's figures)."""

from __future__ import annotations

import pytest

from groupd.broker.ops.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    USER,
    ClientQuota,
    Component,
    QuotaError,
    Quotas,
    Rate,
    describe,
    entity_of,
)

DEFAULT = None


def _values(limits: dict[tuple[str | None | bool, str | None | bool], float]) -> dict:
    """limits keyed (user, client): a name, None for the default, False for "not part of the entity"."""
    values = {}
    for (user, client), bound in limits.items():
        pairs = ([(USER, user)] if user is not False else []) + ([(CLIENT_ID, client)] if client is not False else [])
        values[entity_of(pairs)] = {PRODUCER_BYTE_RATE: bound}
    return values


def _quota(limits: dict) -> ClientQuota:
    q = ClientQuota(PRODUCER_BYTE_RATE)
    q.set_limits(_values(limits))
    return q


def _check(q: ClientQuota, user: str, client: str, bound: float, value: float, throttled: bool) -> None:
    """Kafka's ClientQuotaManagerTest.checkQuota: the bound, the window maximum, then value x 11 at once."""
    assert q.limit(user, client) == bound
    assert q.max_in_window(user, client) == pytest.approx(bound * 10)
    ms = q.record(user, client, value * 11, 0)
    assert (ms > 0) is throttled, (user, client, ms)


def test_precedence_and_sharing_as_kafka_test_quota_config_precedence() -> None:
    limits = {
        (DEFAULT, False): 1000, (False, DEFAULT): 2000, (DEFAULT, DEFAULT): 3000, ("userA", False): 4000,
        ("userA", "client1"): 5000, ("userB", False): 6000, ("userB", "client1"): 7000, ("userB", DEFAULT): 8000,
        ("userC", False): 10000, (False, "client1"): 9000,
    }
    q = _quota(limits)
    _check(q, "userA", "client1", 5000, 4500, False)  # <user, client> before <user>
    _check(q, "userA", "client2", 4000, 4500, True)  # <user> before <client> and the defaults
    _check(q, "userA", "client3", 4000, 0, True)  # <user> is shared by the user's clients
    _check(q, "userA", "client1", 5000, 0, False)  # <user, client> is its own
    _check(q, "userB", "client1", 7000, 8000, True)
    _check(q, "userB", "client2", 8000, 7000, False)  # <user, default client>: a rate per client
    _check(q, "userB", "client3", 8000, 7000, False)
    _check(q, "userD", "client1", 3000, 3500, True)  # <default user, default client>
    _check(q, "userD", "client2", 3000, 2500, False)
    _check(q, "userE", "client1", 3000, 2500, False)
    del limits[(DEFAULT, DEFAULT)]  # back to the <default user> quota: other tags, a fresh rate
    q.set_limits(_values(limits))
    _check(q, "userD", "client1", 1000, 0, False)
    _check(q, "userE", "client4", 1000, 1500, True)
    _check(q, "userF", "client4", 1000, 800, False)  # <default user> shared by the user's clients
    _check(q, "userF", "client5", 1000, 800, True)
    del limits[(DEFAULT, False)]  # back to <default client-id>
    q.set_limits(_values(limits))
    _check(q, "userF", "client4", 2000, 0, False)  # shared by a client id across users
    _check(q, "userF", "client5", 2000, 0, False)
    _check(q, "userF", "client5", 2000, 2500, True)
    _check(q, "userG", "client5", 2000, 0, True)
    limits[("userA", False)] = 8000
    limits[("userA", "client1")] = 10000
    q.set_limits(_values(limits))
    _check(q, "userA", "client2", 8000, 0, False)
    _check(q, "userA", "client2", 8000, 4500, True)  # a changed bound keeps the rate's history
    _check(q, "userA", "client1", 10000, 0, False)
    _check(q, "userA", "client1", 10000, 6000, True)


def test_throttle_time_as_kafka_test_quota_violation() -> None:
    """500 B/s; 400 B in each of ten seconds, then 2,300 B half a second later: 600 B/s over 10.5 s,
    so (600 - 500) / 500 * 10,500 ms = 2,100 ms."""
    q = _quota({(DEFAULT, DEFAULT): 500})
    now = 0
    for _ in range(10):
        assert q.record("ANONYMOUS", "unknown", 400, now) == 0
        now += 1000
    now += 500
    assert q.record("ANONYMOUS", "unknown", 2300, now) == 2100


def test_rate_window_counts_missing_windows_and_expires_old_samples() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1000, 0)
    assert rate.window_size_ms(0) == 10_000  # ten full windows assumed before the first
    assert rate.per_second(0) == 100.0
    rate.record(1000, 20_500)  # the first sample is older than 11 windows: gone
    assert rate.per_second(20_500) == 100.0


def test_unrecord_takes_a_value_back() -> None:
    q = _quota({(False, "c"): 100})
    assert q.record("ANONYMOUS", "c", 5000, 0) > 0
    q.unrecord("ANONYMOUS", "c", 5000, 0)
    assert q.record("ANONYMOUS", "c", 10, 0) == 0


def test_no_quota_no_throttle_and_unbounded_window() -> None:
    q = _quota({("u", False): 10})
    assert q.limit("other", "c") is None
    assert q.record("other", "c", 10**9, 0) == 0
    assert q.max_in_window("other", "c") == float("inf")


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([(USER, "a"), (USER, "b")], "duplicate entity entry user"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([(USER, "")], "Empty user not supported"),
    ],
)
def test_entity_validation(pairs: list, message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        entity_of(pairs)


@pytest.mark.parametrize(
    ("entity", "key", "value", "message"),
    [
        (((USER, "u"),), "bogus", 1.0, "Invalid configuration key bogus"),
        (((USER, "u"),), PRODUCER_BYTE_RATE, 0.0, "must be greater than 0"),
        (((USER, "u"),), PRODUCER_BYTE_RATE, 10.5, "cannot be a fractional value"),
        (((USER, "u"),), PRODUCER_BYTE_RATE, 2.0**64, "too large for a LONG"),
        (((IP, "10.0.0.1"),), PRODUCER_BYTE_RATE, 1.0, "Invalid configuration key producer_byte_rate"),
        (((IP, "not an ip"),), "connection_creation_rate", 1.0, "not a valid IP"),
        (((CLIENT_ID, "c"), (IP, None)), PRODUCER_BYTE_RATE, 1.0, "IP entity should not be combined"),
        (((USER, "u"),), "request_percentage", 50.0, "not supported by groupd"),
    ],
)
def test_value_validation(entity: tuple, key: str, value: float, message: str) -> None:
    quotas = Quotas()
    with pytest.raises(QuotaError, match=message):
        quotas.alter(tuple(sorted(entity)), [(key, value)], validate_only=False)
    assert quotas.values == {}


def test_alter_sets_removes_and_validate_only_changes_nothing() -> None:
    quotas = Quotas()
    e = entity_of([(CLIENT_ID, "c")])
    assert not quotas.alter(e, [(PRODUCER_BYTE_RATE, 100.0)], validate_only=True)
    assert quotas.values == {} and not quotas.produce.enabled
    assert quotas.alter(e, [(PRODUCER_BYTE_RATE, 100.0), (CONSUMER_BYTE_RATE, 200.0)], validate_only=False)
    assert quotas.produce.limit("ANONYMOUS", "c") == 100.0 and quotas.fetch.limit("ANONYMOUS", "c") == 200.0
    assert not quotas.alter(e, [(PRODUCER_BYTE_RATE, 100.0)], validate_only=False)  # the same value: no change
    assert quotas.alter(e, [(PRODUCER_BYTE_RATE, None), (CONSUMER_BYTE_RATE, None)], validate_only=False)
    assert quotas.values == {} and not quotas.fetch.enabled
    assert Quotas.from_doc(quotas.to_doc()) == {}


def test_describe_filters_like_kafka() -> None:
    quotas = Quotas()
    entities = [
        [(USER, "u1")], [(USER, None)], [(USER, "u1"), (CLIENT_ID, "c1")], [(CLIENT_ID, "c1")], [(CLIENT_ID, None)],
    ]
    for pairs in entities:
        quotas.alter(entity_of(pairs), [(PRODUCER_BYTE_RATE, 10.0)], validate_only=False)
    assert Quotas.from_doc(quotas.to_doc()) == quotas.values

    def names(components: list[Component], strict: bool) -> set:
        return {entity for entity, _ in describe(quotas.values, components, strict)}

    assert names([Component(USER, 0, "u1")], False) == {((USER, "u1"),), ((CLIENT_ID, "c1"), (USER, "u1"))}
    assert names([Component(USER, 0, "u1")], True) == {((USER, "u1"),)}
    assert names([Component(USER, 1, None)], True) == {((USER, None),)}
    assert names([Component(CLIENT_ID, 2, None)], False) == {
        ((CLIENT_ID, "c1"),),
        ((CLIENT_ID, None),),
        ((CLIENT_ID, "c1"), (USER, "u1")),
    }
    assert len(names([], False)) == 5 and names([], True) == set()
    for bad, message in [
        ([Component(USER, 0, None)], "MATCH_TYPE_EXACT, but set match string to null"),
        ([Component(USER, 1, "x")], "MATCH_TYPE_DEFAULT, but also specified"),
        ([Component(USER, 2, "x")], "MATCH_TYPE_SPECIFIED, but also specified"),
        ([Component(USER, 3, None)], "Unknown match type 3"),
        ([Component(USER, 2, None), Component(USER, 1, None)], "cannot appear more than once"),
        ([Component("", 2, None)], "Invalid empty entity type"),
        ([Component(IP, 2, None), Component(USER, 2, None)], "IP filter component should not be used"),
    ]:
        with pytest.raises(QuotaError, match=message):
            describe(quotas.values, bad, False)
    with pytest.raises(QuotaError) as info:
        describe(quotas.values, [Component("group", 2, None)], False)
    assert info.value.unsupported


def _mutations(strict: bool):
    from groupd.broker.ops.quotas import MutationQuota

    q = MutationQuota(samples=10, window_ms=1000)
    q.set_limits({entity_of([(CLIENT_ID, "admin")]): {"controller_mutation_rate": 10.0}})
    return q.for_request("ANONYMOUS", "admin", strict)


def test_strict_mutation_quota_as_kafka_test():
    """A bucket of 10 x 1 s x 10/s = 100 permits: 90 accepted, 90 more accepted (-80), the third refused
    with 80 / 10 s = 8,000 ms to wait, 3,000 of them left five seconds later."""
    t0 = 1_700_000_000_000  # Kafka's bucket is full when new: it refills from time 0
    quota = _mutations(strict=True)
    assert quota.record(90, t0) and quota.throttle_ms(t0) == 0
    assert quota.record(90, t0) and quota.throttle_ms(t0) == 0
    assert not quota.record(90, t0)
    assert quota.throttle_ms(t0) == 8000
    assert not quota.record(1, t0)  # and every later topic of the request
    assert quota.throttle_ms(t0 + 5000) == 3000


def test_permissive_mutation_quota_throttles_but_accepts():
    t0 = 1_700_000_000_000
    quota = _mutations(strict=False)
    assert quota.record(90, t0) and quota.throttle_ms(t0) == 0
    assert quota.record(90, t0) and quota.throttle_ms(t0) == 8000
    assert quota.throttle_ms(t0 + 5000) == 3000


def test_no_mutation_quota_is_unbounded():
    from groupd.broker.ops.quotas import MutationQuota

    quota = MutationQuota().for_request("ANONYMOUS", "anyone", strict=True)
    assert all(quota.record(10**6, 0) for _ in range(5)) and quota.throttle_ms(0) == 0
