"""Property: whatever is appended comes back from a replay, with the offsets the appends returned."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage.batch import build_batch, iter_records
from groupd.storage.log import Log, LogConfig

blob = st.one_of(st.none(), st.binary(max_size=40))
header = st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5)))
record = st.tuples(blob, blob, st.lists(header, max_size=2))
batches = st.lists(st.lists(record, min_size=1, max_size=6), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(batches=batches, segment_bytes=st.integers(1000, 4000), reopen=st.booleans())
def test_replay_equals_appended(batches, segment_bytes, reopen):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p"
        cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=64)
        log = Log.open(path, cfg, now_ms=lambda: 0)
        expected = []
        for i, recs in enumerate(batches):
            data = build_batch([(k, v) for k, v, _ in recs], timestamp_ms=i,
                               headers=[hs for _, _, hs in recs])
            base, last = log.append(data)
            assert last - base == len(recs) - 1
            expected += [(base + j, k, v, tuple(hs), i) for j, (k, v, hs) in enumerate(recs)]
        if reopen:
            log.close()
            log = Log.open(path, cfg, now_ms=lambda: 0)
        got = [
            (r.offset, r.key, r.value, r.headers, r.timestamp)
            for _, view in log.batches() for r in iter_records(view)
        ]
        assert got == expected
        assert log.log_end_offset == len(expected)
        mid = len(expected) // 2
        assert next(iter_records(log.read(mid, 1))).offset <= mid
        log.close()
