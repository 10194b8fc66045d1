"""Verification guards that no append followed expire as Kafka's lingering VerificationStateEntry does.

Facts from apache/kafka (storage module, ProducerStateManager and VerificationStateEntry):
- an entry is created with ``time.milliseconds()`` (the wall clock) and keeps that timestamp while later
  verifications of the same producer join it (``computeIfAbsent``; only sequence and epoch move);
- ``removeExpiredProducers(currentTimeMs)`` removes the entries with
  ``currentTimeMs - timestamp >= producer.id.expiration.ms``;
- it runs every ``producer.id.expiration.check.interval.ms`` (default 600000, an internal key) and
  ``producer.id.expiration.ms`` defaults to 86400000 (24 hours), both at least 1.
The clock here is a plain integer: no test waits.
"""

from __future__ import annotations

from groupd.broker.config import KEYS, default_config
from groupd.broker.dataplane.verification_guards import VerificationGuards

DAY_MS = 86_400_000
T0 = 1_700_000_000_000  # any wall-clock millisecond


def test_kafkas_defaults_and_bounds() -> None:
    config = default_config()
    assert config["producer.id.expiration.ms"] == DAY_MS
    assert config["producer.id.expiration.check.interval.ms"] == 600_000
    assert KEYS["producer.id.expiration.ms"].low == 1
    assert KEYS["producer.id.expiration.check.interval.ms"].low == 1


def test_a_guard_goes_exactly_when_the_expiration_has_passed_since_it_started() -> None:
    guards = VerificationGuards()
    guards.start(("t", 0), 7, 0, 0, T0)
    assert guards.expire(T0 + DAY_MS - 1, DAY_MS) == 0
    assert len(guards) == 1
    assert guards.overtakes(("t", 0), 7, 5)  # still refusing a batch above the lowest sequence verified
    assert guards.expire(T0 + DAY_MS, DAY_MS) == 1  # Kafka's ">=": gone at the very millisecond
    assert len(guards) == 0
    assert not guards.overtakes(("t", 0), 7, 5)  # the producer's later batches are no longer refused


def test_a_verification_joining_a_guard_does_not_make_it_younger() -> None:
    guards = VerificationGuards()
    first = guards.start(("t", 0), 7, 5, 0, T0)
    joined = guards.start(("t", 0), 7, 0, 0, T0 + 1000)  # a lower sequence of the same producer, later
    assert joined is first and first.lowest_sequence == 0
    assert guards.expire(T0 + 1000, 1000) == 1


def test_only_the_old_guards_go_and_their_partitions_with_them() -> None:
    guards = VerificationGuards()
    old = guards.start(("t", 0), 1, 0, 0, T0)
    guards.start(("t", 0), 2, 0, 0, T0 + 500)
    guards.start(("t", 1), 1, 0, 0, T0 + 100)
    assert guards.expire(T0 + 1000, 600) == 2  # started at T0 and T0 + 100
    assert len(guards) == 1
    assert not guards.holds(("t", 0), 1, old)  # an answer arriving after its guard expired is not admitted
    assert guards.overtakes(("t", 0), 2, 1)
    assert not guards.overtakes(("t", 1), 1, 1)
    assert guards.expire(T0 + 1100, 600) == 1
    assert len(guards) == 0
