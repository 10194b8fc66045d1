"""The fetched-records count (groupd/broker/dataplane/records_out.py) of a Fetch answer's message set:
a v2 batch counts the records its header says, a message of magic 0 or 1 (a down-converted answer) one;
an entry cut short counts as it did when each field was sliced out and converted one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.broker.dataplane.records_out import records_in
from groupd.storage.batch import build_batch
from groupd.storage.message_sets import down_convert


def _sliced(data: bytes) -> int:
    """The count as the handler made it before: each entry's fields sliced out and converted."""
    records, pos, end = 0, 0, len(data)
    while pos + 17 <= end:
        if data[pos + 16] >= 2:
            records += int.from_bytes(data[pos + 57 : pos + 61], "big") if pos + 61 <= end else 0
        else:
            records += 1
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    return records


batches = st.lists(st.tuples(st.integers(1, 6), st.integers(0, 80)), min_size=0, max_size=12)


@settings(max_examples=80, deadline=None)
@given(shapes=batches, magic=st.sampled_from([0, 1, 2]), cut=st.integers(0, 2000))
def test_the_count_is_the_records_of_the_batches(shapes, magic, cut):
    data = b"".join(
        build_batch([(None, b"v" * size)] * n, base_offset=sum(k for k, _ in shapes[:i]), timestamp_ms=i)
        for i, (n, size) in enumerate(shapes)
    )
    if magic < 2:  # what a Fetch v0-3 answers: one message per record
        data, _ = down_convert(data, magic, 0)
    assert records_in(data) == sum(n for n, _ in shapes)
    torn = data[: max(len(data) - cut, 0)]  # an entry cut anywhere, as the reference counts it
    assert records_in(torn) == _sliced(torn)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=400))
def test_any_bytes_count_as_the_sliced_reading_did(data):
    assert records_in(data) == _sliced(data)
