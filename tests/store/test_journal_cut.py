"""Issue 26 item 6 as it was found: 64 acknowledged commits, a crash that undoes the partitions' unsynced
writes, and the offsets journal cut inside the part that had been synced. The commits cut away cannot
come back; start-up goes on (docs/operations.md) but says so in ERROR lines with numbers, where it
used to say only "0 batches restored"."""

from __future__ import annotations

import time

import pytest

from groupd.storage.journal_scan import scan
from tests.harness import BrokerProcess, WireClient
from tests.store.test_crash import _last_segments
from tests.store.test_full_disk import _commit, _committed, _create_topic
from tests.wire.test_groups import commit_body

COMMITS = 64


@pytest.mark.timeout(120)
async def test_a_journal_cut_inside_its_synced_part_is_an_error_with_numbers(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data)
    broker.start()
    try:
        await _create_topic(broker.port, "t")
        await _commit(broker.port, "g", range(1))
        assert broker.stop() == 0  # a clean stop: every partition durable on its own
        durable = {d: (seg, seg.stat().st_size) for d, seg in _last_segments(data).items()}
        broker.start()
        client = await WireClient.connect(broker.port)
        for offset in range(1, COMMITS + 1):  # each acknowledged after the journal's fdatasync
            resp = await client.call(8, 8, commit_body("g", "t", 0, offset, f"m{offset}"))
            assert resp.topics[0].partitions[0].error_code == 0
        await client.close()
        broker.kill()
        for d, seg in _last_segments(data).items():  # the power loss: unsynced partition writes undone
            if d not in durable or durable[d][0] != seg:
                seg.unlink()
                continue
            with open(seg, "r+b") as f:
                f.truncate(durable[d][1])
        journal = data / "__consumer_offsets.journal.0"
        entries = scan(journal.read_bytes()).entries
        assert len(entries) == COMMITS
        cut = entries[COMMITS // 2][0] + 5  # inside the 33rd entry
        with open(journal, "r+b") as f:
            f.truncate(cut)

        started = time.monotonic()
        broker.start()  # start-up goes on with what is left
        committed = await _committed(broker.port, "g")
        assert committed == COMMITS // 2  # offsets 1..32 restored, 33..64 were cut away
        log = broker.log_text()
        cut_lines = [line for line in log.splitlines() if " ERROR " in line and "it was cut" in line]
        assert len(cut_lines) == 1 and f"is {cut} bytes" in cut_lines[0] and "32 entries read" in cut_lines[0], (
            cut_lines
        )
        assert any(" ERROR " in line and "acknowledged commits are lost" in line for line in log.splitlines())
        assert "Traceback" not in log
        assert time.monotonic() - started < 30
    finally:
        broker.kill()
