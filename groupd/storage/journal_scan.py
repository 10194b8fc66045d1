"""Reading a journal file at start-up: its entries, and whether it was damaged where it had been synced.

Format in storage/journal.py. While the broker runs a journal file is never shorter than its prefilled
size, and the entries of the file's current turn are followed by zeros, by the torn tail of the round
a crash interrupted, or by entries of an earlier turn (which their partitions already hold). A round
starts only once the one before it is synced. Hence two signs of damage that no crash leaves:

- a **cut**: entries that run up to the end of a file shorter than its prefilled size;
- a **damaged entry inside the synced part**: an entry whose CRC fails, followed by entries of later
  rounds (so its own round had been synced and acknowledged). An entry is later when its partition
  lacks it (an earlier turn's entries are all in their partitions) or when its timestamp is no older
  than the last entry's before the damage (an earlier turn's are older: they precede a checkpoint).

A damaged entry whose length field is whole is stepped over, so the partitions with nothing after it
lose nothing; its own partition stops there (a gap, see ``journal._restore``).
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

from crc32c import crc32c

from groupd.storage.batch import BATCH_OVERHEAD, parse_header

log = logging.getLogger("groupd.storage")

ENTRY_HEAD = struct.Struct(">iiI")  # batch length, partition, CRC-32C
_BASE_OFFSET = struct.Struct(">q")  # a batch's first field
_LENGTH_PARTITION_SIZE = 8


@dataclass
class Scan:
    """What one journal file holds, read from its start."""

    entries: list[tuple[int, int, memoryview]] = field(default_factory=list)  # (position, partition, batch)
    damaged: list[tuple[int, int, memoryview]] = field(
        default_factory=list
    )  # (position, partition by its header, batch)
    stop: int = 0  # where reading ended
    at_end: bool = False  # the entries ran up to the end of the file: no zeros or garbage after them

    def valid_prefix(self) -> list[tuple[int, memoryview]]:
        """(partition, batch) of the entries before the first damaged one."""
        first = self.damaged[0][0] if self.damaged else None
        return [(p, b) for pos, p, b in self.entries if first is None or pos < first]


def scan(data: bytes | memoryview) -> Scan:
    view = memoryview(data)
    out = Scan()
    pos, end = 0, len(view)
    unpack, head, entries = ENTRY_HEAD.unpack_from, ENTRY_HEAD.size, out.entries  # a loop over every entry
    while True:
        if end - pos < head:
            # the end of the file right after an entry, or a header it cuts off (a few zeros: the end of
            # this turn's entries, which a cut just missed)
            rest = view[pos:end]
            out.at_end = not rest or any(rest)
            break
        length, partition, crc = unpack(view, pos)
        start = pos + head
        if length < BATCH_OVERHEAD or partition < 0:
            # zeros (the end of this turn's entries), a torn header, or what an earlier turn left
            break
        if end - start < length:
            out.at_end = True  # an entry the end of the file cuts off
            break
        batch = view[start : start + length]
        if crc32c(batch, crc32c(view[pos : pos + _LENGTH_PARTITION_SIZE])) == crc:
            entries.append((pos, partition, batch))
        else:
            out.damaged.append((pos, partition, batch))
        pos = start + length
    out.stop = pos
    return out


def judge(
    name: str, size: int, prefill: int, found: Scan, ends_before: dict[int, int], ends_after: dict[int, int]
) -> bool:
    """Log what damage ``found`` shows (ERROR with numbers) given each partition's end offset before
    and after the restore; True when acknowledged batches may be lost."""
    damaged = False
    if found.damaged:
        damaged = _judge_damaged_entry(name, found, ends_before, ends_after)
    if 0 < size < prefill:
        if found.at_end:
            log.error(
                "%s: is %d bytes, shorter than the %d bytes a journal file keeps while the broker runs, and "
                "its entries run up to its end: it was cut, and whatever was journaled after byte %d is lost, "
                "acknowledged commits among it (%d entries read before the cut)",
                name,
                size,
                prefill,
                size,
                len(found.entries),
            )
            damaged = True
        else:
            log.warning(
                "%s: is %d bytes, shorter than the %d bytes a journal file keeps while the broker runs: it was "
                "cut, but after its last entry (byte %d): nothing journaled is lost",
                name,
                size,
                prefill,
                found.stop,
            )
    return damaged


def _judge_damaged_entry(name: str, found: Scan, ends_before: dict[int, int], ends_after: dict[int, int]) -> bool:
    first, partition, broken = found.damaged[0]
    before = [b for pos, _p, b in found.entries if pos < first]
    since = parse_header(before[-1]).max_timestamp if before else None
    later = [(p, parse_header(b)) for pos, p, b in found.entries if pos > first]
    # journaled after the damaged entry: its partition lacked it (an earlier turn's entries are all in
    # their partitions), or it is no older than the last entry before the damage (they are older too)
    newer = [
        (p, h.base_offset)
        for p, h in later
        if (p in ends_before and h.base_offset >= ends_before[p]) or (since is not None and h.max_timestamp >= since)
    ]
    if not newer:
        log.info("%s: ends in a round torn at byte %d by a crash (never acknowledged)", name, first)
        return False
    base = _BASE_OFFSET.unpack_from(broken)[0] if len(broken) >= _BASE_OFFSET.size else -1
    lost = sum(1 for p, b in newer if p in ends_after and b >= ends_after[p])
    if not lost and partition in ends_after and 0 <= base < ends_after[partition]:
        log.warning(
            "%s: the entry at byte %d is damaged (CRC mismatch) inside the part that had been synced, but its "
            "batch (offset %d of partition %d) is in its partition: nothing is lost",
            name,
            first,
            base,
            partition,
        )
        return False
    log.error(
        "%s: the entry at byte %d (offset %d of partition %d by its header) is damaged (CRC mismatch), yet "
        "%d entries after it were journaled later, so its round had been synced: acknowledged commits are "
        "lost; its batch and %d batches after it could not be restored (their partition lacks the damaged "
        "one), %d damaged entries in all",
        name,
        first,
        base,
        partition,
        len(newer),
        lost,
        len(found.damaged),
    )
    return True
