import pytest

from groupd.coordinator.partitioning import java_string_hash, kafka_abs, partition_for

# Values of Java's String.hashCode and Kafka's partitionFor (N=50), from the spec's table.
CASES = [
    ("", 0, 0),
    ("my-group", -1906497762, 12),
    ("test-group", 627841412, 12),
    ("group-1", 293427299, 49),
    ("polygenelubricants", -2147483648, 0),
    ("été", 227742, 42),
    ("\U0001f600", 1772899, 49),
]


@pytest.mark.parametrize("group, hash_code, partition", CASES)
def test_java_hash_and_partition(group, hash_code, partition):
    assert java_string_hash(group) == hash_code
    assert partition_for(group, 50) == partition


def test_abs_is_kafkas_not_a_mask():
    # Utils.abs, not Utils.toPositive: my-group would land in 36 with the mask.
    assert kafka_abs(-1906497762) % 50 == 12
    assert (-1906497762 & 0x7FFFFFFF) % 50 == 36
    assert kafka_abs(-(2**31)) == 0


@pytest.mark.parametrize("length", [1, 2, 31, 255, 256, 257, 1000])
def test_long_ascii_ids_hash_as_java_does(length):
    """An ASCII id is hashed as one sum of products with 31**k mod 2**32 (up to 256 characters), a
    longer one by Java's loop: both are h = 31*h + c wrapped to 32 bits."""
    s = "".join(chr(33 + (i * 7) % 90) for i in range(length))
    h = 0
    for c in s.encode():
        h = (31 * h + c) & 0xFFFFFFFF
    assert java_string_hash(s) == (h - (1 << 32) if h & 0x8000_0000 else h)
