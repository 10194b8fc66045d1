"""A journal damaged inside the part that was synced (issue 26 item 6) is said so, loudly, with numbers.

While the broker runs each journal file is at least its prefilled size (zeros up to a checkpoint and a
MiB, see ``Journal.reset``) and its entries are followed by zeros, by the torn tail of the last round,
or by entries of an earlier turn that their partitions hold already. So entries that run up to the end
of a file shorter than that were cut; and a damaged entry followed by entries that their partitions
still lack was inside the synced part, since a round starts only after the one before it is synced.
Neither is a crash's doing: both are ERROR lines that say how much was lost. Start-up goes on with
what is left (documented in docs/operations.md). A torn last round, a cut among the zeros, and
entries of an earlier turn stay quiet.
"""

from __future__ import annotations

import logging
import os

from groupd.storage.journal import Journal, entry
from groupd.storage.log import Log, LogConfig, build_batch

CHECKPOINT = 64 << 10
ROUNDS = 20
T0 = 1_700_000_000_000  # rounds are stamped with the wall clock, one millisecond apart here


def open_logs(root, n):
    logs = {}
    for p in range(n):
        lg = Log.open(root / f"__consumer_offsets-{p}", LogConfig(segment_bytes=100 << 20))
        lg.write_behind = True
        lg.journal_partition = p
        logs[p] = lg
    return logs


def journaled_then_killed(root, rounds=ROUNDS, partitions=2, written_out=()):
    """``rounds`` rounds of one batch per partition, journaled (as synced rounds are) into a prefilled
    journal and never written to the partitions' files but those of ``written_out``; then the process
    dies. Returns each entry's (start, end) byte range in journal file 0, in order."""
    logs = open_logs(root, partitions)
    journal = Journal(root, checkpoint_bytes=CHECKPOINT)
    journal.reset()
    spans = []
    for i in range(rounds):
        entries = []
        for p, lg in logs.items():
            lg.append_records([(b"key-%d" % p, b"value-%d" % i)], T0 + i)
            entries.append((p, bytes(lg._unwritten[-1][2])))
        for p, b in entries:
            start = journal.position
            journal.append([(p, b)])
            spans.append((start, journal.position))
    for p in written_out:
        logs[p].write_pending()
    for lg in logs.values():  # killed: the write-behind batches never reach the partitions' files
        lg._unwritten.clear()
        lg._unjournaled.clear()
        lg.close()
    journal.close()
    return spans


def recover(root, partitions=2):
    logs = open_logs(root, partitions)
    journal = Journal(root, checkpoint_bytes=CHECKPOINT)
    restored = journal.recover(logs)
    ends = {p: lg.log_end_offset for p, lg in logs.items()}
    for lg in logs.values():
        lg.close()
    journal.close()
    return restored, ends, journal


def errors(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_journal_cut_inside_its_entries_is_an_error_with_numbers(tmp_path, caplog):
    spans = journaled_then_killed(tmp_path)
    path = Journal(tmp_path, checkpoint_bytes=CHECKPOINT).paths[0]
    cut = spans[10][0] + 7  # inside the 11th entry: acknowledged rounds are gone
    os.truncate(path, cut)
    restored, ends, journal = recover(tmp_path)
    assert restored == 10 and ends == {0: 5, 1: 5}
    lines = errors(caplog)
    assert len(lines) == 1, lines
    prefill = journal.prefill_bytes
    assert "cut" in lines[0] and f"{cut} bytes" in lines[0] and f"{prefill}" in lines[0], lines[0]
    assert journal.damaged


def test_a_journal_cut_at_an_entry_boundary_is_an_error_too(tmp_path, caplog):
    spans = journaled_then_killed(tmp_path)
    os.truncate(Journal(tmp_path, checkpoint_bytes=CHECKPOINT).paths[0], spans[30][0])
    restored, _, journal = recover(tmp_path)
    assert restored == 30 and journal.damaged
    assert len(errors(caplog)) == 1


def test_a_damaged_entry_inside_the_synced_part_is_an_error_and_only_its_partition_stops(tmp_path, caplog):
    spans = journaled_then_killed(tmp_path)
    path = Journal(tmp_path, checkpoint_bytes=CHECKPOINT).paths[0]
    damaged = 11  # round 5, partition 1
    damage(path, spans[damaged])
    restored, ends, journal = recover(tmp_path)
    # partition 0 is whole (the entries after the damaged one are read on); partition 1 stops at it
    assert ends == {0: ROUNDS, 1: 5} and restored == ROUNDS + 5
    lines = errors(caplog)
    assert any(f"byte {spans[damaged][0]}" in line and "damaged" in line and "14 " in line for line in lines), lines
    assert journal.damaged


def damage(path, span):
    data = bytearray(path.read_bytes())
    data[span[1] - 3] ^= 0xFF  # a flipped byte in its batch: its CRC no longer matches
    path.write_bytes(data)


def test_damage_is_found_when_the_entries_after_it_had_reached_their_partitions(tmp_path, caplog):
    """After a kill (no power loss) a partition's file may hold batches journaled after the damaged
    one: they are not missing, but their timestamps say they came later, so the damaged entry had
    been synced, and its batch, which its partition lacks, is lost."""
    spans = journaled_then_killed(tmp_path, written_out=(1,))
    damage(Journal(tmp_path, checkpoint_bytes=CHECKPOINT).paths[0], spans[2 * (ROUNDS - 1)])  # round 19, partition 0
    restored, ends, journal = recover(tmp_path)
    assert ends == {0: ROUNDS - 1, 1: ROUNDS} and restored == ROUNDS - 1
    lines = errors(caplog)
    assert any("damaged" in line and "1 entries after it" in line for line in lines), lines
    assert journal.damaged


def test_a_damaged_entry_whose_batch_is_in_its_partition_is_a_warning(tmp_path, caplog):
    spans = journaled_then_killed(tmp_path, written_out=(0, 1))
    damage(Journal(tmp_path, checkpoint_bytes=CHECKPOINT).paths[0], spans[11])
    restored, ends, journal = recover(tmp_path)
    assert restored == 0 and ends == {0: ROUNDS, 1: ROUNDS}
    assert errors(caplog) == [] and not journal.damaged
    assert "nothing is lost" in caplog.text


def test_a_torn_last_round_and_a_cut_among_the_zeros_stay_quiet(tmp_path, caplog):
    spans = journaled_then_killed(tmp_path)
    path = Journal(tmp_path, checkpoint_bytes=CHECKPOINT).paths[0]
    end = spans[-1][1]
    torn = entry(0, build_batch([(b"key-0", b"value-next")], timestamp_ms=T0 + ROUNDS, base_offset=ROUNDS))
    with open(path, "r+b") as f:  # the next round died half-written
        f.seek(end)
        f.write(torn[: len(torn) // 2])
    os.truncate(path, end + 4096)  # and the zeros after it were cut: nothing acknowledged was there
    restored, ends, journal = recover(tmp_path)
    assert restored == 2 * ROUNDS and ends == {0: ROUNDS, 1: ROUNDS}
    assert errors(caplog) == [] and not journal.damaged


def test_entries_of_an_earlier_turn_after_a_torn_round_stay_quiet(tmp_path, caplog):
    logs = open_logs(tmp_path, 1)
    lg = logs[0]
    bufs = []

    def append(i):
        lg.append_records([(b"k", b"%d" % i)], T0 + i)
        bufs.append(bytes(lg._unwritten[-1][2]))

    journal = Journal(tmp_path, checkpoint_bytes=CHECKPOINT)
    journal.reset()
    for i in range(6):
        append(i)
    journal.append([(0, b) for b in bufs])  # an earlier turn, durable in the partition since
    lg.write_pending()
    journal.switch()
    journal.switch()
    append(6)
    append(7)
    journal.append([(0, bufs[6])])
    with open(journal.paths[0], "r+b") as f:  # the last round, torn, over the earlier turn's entries
        f.seek(journal.position)
        f.write(entry(0, bufs[7])[:30])
    lg._unwritten.clear()  # killed
    lg.close()
    journal.close()
    restored, ends, after = recover(tmp_path, 1)
    assert restored == 1 and ends == {0: 7}
    assert errors(caplog) == [] and not after.damaged
