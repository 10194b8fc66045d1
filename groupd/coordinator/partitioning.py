"""Which ``__consumer_offsets`` partition owns a group, and which ``__transaction_state`` partition a
transactional id: Kafka's exact formula, the same for both.

Kafka computes ``Utils.abs(key.hashCode()) % partitions`` where ``hashCode`` is Java's
``String.hashCode`` over UTF-16 code units and ``Utils.abs`` maps Integer.MIN_VALUE to 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import mul

_POWERS_MAX = 256
# 31**k mod 2**32, highest power first: Java's h = 31*h + c over n units is sum(c[i] * 31**(n-1-i)) mod
# 2**32, and the reductions commute, so an ASCII id's hash is one C-level sum of products
_POWERS = [pow(31, k, 1 << 32) for k in range(_POWERS_MAX - 1, -1, -1)]


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, wrapped to signed 32 bits."""
    if s.isascii():
        data = s.encode()  # one byte is one UTF-16 code unit
        if len(data) <= _POWERS_MAX:
            # computed in C (map, mul, sum): a group id is hashed the first time each coordinator sees it
            h = sum(map(mul, data, _POWERS[_POWERS_MAX - len(data) :])) & 0xFFFFFFFF
            return h - 0x1_0000_0000 if h & 0x8000_0000 else h
        units: Iterable[int] = data
    else:
        raw = s.encode("utf-16-be", "surrogatepass")
        units = (int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2))
    h = 0
    for c in units:
        h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: like Math.abs, but Integer.MIN_VALUE becomes 0 instead of staying negative."""
    return 0 if n == -0x8000_0000 else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % partitions
