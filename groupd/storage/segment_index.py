"""A segment's sparse index in two levels, so its resident memory does not grow with the data stored.

The fine level has one entry per ``index.interval.bytes`` run of batches (Kafka's offset and time index
entries): the run's first batch's base offset and file position, and the largest batch max timestamp in
the run. Entries are grouped in blocks of ``BLOCK``. Only the coarse level stays in memory for every
block (its first offset, first position and largest timestamp), plus the fine entries of the last block
of a segment still being appended to (the tail). A block that fills is written to the side file beside
the segment (``00000000000000000000.batches``) and read back on demand, one block per lookup, through a
small cache of decoded blocks bounded by count (``CACHE``): Kafka pages its memory-mapped index files in
on demand for the same reason. A rolled segment seals its last, partial block too, so it holds only the
coarse level.

The side file is read through a descriptor kept open beside the segment's own (``reader``), counted
against the same bound on open files and closed with the segment's when it is idle
(storage/open_files.py): opening and closing the file for each block read cost a random read whose
block is not cached more than the read itself (about 7 of 9 us). It is not memory-mapped: mapped pages
would count as resident once touched, up to the whole side file (6 MiB per GiB stored).

The side file holds the blocks, each ``BLOCK`` entries wide (three runs of ``BLOCK`` native int64: the
offsets, the positions, the timestamps; a partial last block is padded). It is written without fsync: a
clean close appends a trailer naming the segment file it describes (inode, size, mtime) and a CRC-32C
of the whole file, and only a file whose trailer matches is trusted at the next open. After a crash the
segment is scanned again and the file rewritten, as before this index existed.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import logging
import os
import struct
import sys
import time
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from crc32c import crc32c

from groupd.storage import open_files
from groupd.storage.errors import StorageError

log = logging.getLogger("groupd.storage")

BLOCK = 64  # fine entries per block: a block read is 1.5 KiB; the coarse level is 24 B per 256 KiB stored
_ENTRY = 24  # three int64
# the trailer a clean close appends: magic, version (3: blocks; 2 was one resident sparse index, 1 one
# entry per batch), whether the int64s are little-endian, entries per block, the segment file's inode,
# size and mtime (ns), its next offset, the entry count and the block count; then a CRC-32C of the file.
_TRAILER = struct.Struct(">4sHBIQQqqqq")
_MAGIC = b"GDBI"
_VERSION = 3
_WARN_EVERY_S = 60.0
_warned = {"last": -_WARN_EVERY_S}
_tokens = itertools.count(1)


def block_key(token: int, b: int) -> int:
    """A block's name in the cache: one int, cheaper to make and hash than a tuple (a segment has fewer
    than 2**32 blocks: 2 GiB at one entry per 61-byte batch is 550,000)."""
    return token << 32 | b


class BlockCache:
    """Decoded blocks of every segment's side file, the least recently used dropped beyond ``limit``.
    Shared by the logs of every thread (a log opened or replayed on a worker reads blocks too), without a
    lock: each step is one C call under the GIL, and two threads at once can at worst drop one block too
    many or read one again. A lock cost a Fetch's lookup more than the lookup itself."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.blocks: OrderedDict[int, array] = OrderedDict()  # by block_key(token, block)
        self.misses = 0

    def get(self, key: int) -> array | None:
        """The block, taken out and put back last (the most recently used)."""
        blocks = self.blocks
        block = blocks.pop(key, None)
        if block is not None:
            blocks[key] = block
        return block

    def put(self, key: int, block: array) -> None:
        self.misses += 1
        self.blocks[key] = block
        self._trim()

    def resize(self, limit: int) -> None:
        """Keep at most ``limit`` blocks from now on (``log.index.cache.blocks``), dropping the oldest."""
        self.limit = max(limit, 1)
        self._trim()

    def _trim(self) -> None:
        blocks = self.blocks
        while len(blocks) > self.limit:
            try:
                blocks.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break


# one per process, sized by log.index.cache.blocks: 256 blocks of 1.5 KiB and their arrays, about 0.4 MiB
CACHE = BlockCache(256)
_cached = CACHE.blocks


def _warn(message: str, *args: object) -> None:
    now = time.monotonic()
    if now - _warned["last"] >= _WARN_EVERY_S:
        _warned["last"] = now
        log.warning(message, *args)


class ReaderHolder(Protocol):
    """What counts an index's kept descriptor against the bound on open files (its segment)."""

    def reader_opened(self, index: SegmentIndex) -> None: ...

    def reader_closed(self, index: SegmentIndex) -> None: ...


class SegmentIndex:
    """One segment's sparse index: the coarse level and the tail in memory, full blocks in the side file
    at ``path`` (None: none written, everything kept in memory, as for a segment being compacted)."""

    __slots__ = (
        "path", "interval", "width", "count", "spilled", "first_offsets", "first_positions", "block_ts",
        "offsets", "positions", "max_ts", "token", "reader", "holder",
    )  # fmt: skip

    def __init__(self, interval: int, path: Path | None, holder: ReaderHolder | None = None) -> None:
        self.path = path
        self.interval = interval
        self.reader = -1  # the side file's descriptor for block reads, or -1: opened at the next one
        self.holder = holder  # told when ``reader`` opens and closes (it counts it against the bound)
        self.width = BLOCK  # entries per block (the module's, read when made: tests make it small)
        self._reset()

    def _reset(self) -> None:
        self.count = 0  # fine entries in all
        self.spilled = 0  # blocks in the side file; the tail holds the entries from spilled * self.width on
        # the coarse level, one per block, spilled or not
        self.first_offsets = array("q")
        self.first_positions = array("q")
        self.block_ts = array("q")
        # the tail: the fine entries not in the side file
        self.offsets = array("q")
        self.positions = array("q")
        self.max_ts = array("q")
        self.token = next(_tokens)  # names this file's blocks in the cache; a new one when blocks change

    def __len__(self) -> int:
        return self.count

    # ------------------------------------------------------------ building

    def add(self, base: int, position: int, max_ts: int) -> None:
        """Index a batch at ``position``: a new entry once the current run holds ``interval`` bytes (Kafka's
        bytesSinceLastIndexEntry), else the run's timestamp grows."""
        positions = self.positions
        if not positions and self.count:
            self._take_back(self.spilled - 1)  # a sealed index appended to again (after a truncation)
        if not positions or position - positions[-1] >= self.interval:
            if self.count % self.width == 0:
                self.first_offsets.append(base)
                self.first_positions.append(position)
                self.block_ts.append(max_ts)
            self.offsets.append(base)
            positions.append(position)
            self.max_ts.append(max_ts)
            self.count += 1
            if len(positions) > self.width and self.path is not None:
                self._spill(sealing=False)
        elif max_ts > self.max_ts[-1]:
            self.max_ts[-1] = max_ts
        if max_ts > self.block_ts[-1]:
            self.block_ts[-1] = max_ts

    def seal(self) -> None:
        """Write the tail out, the last partial block too (a rolled segment keeps only the coarse level)."""
        if self.path is not None and self.positions:
            self._spill(sealing=True)

    def attach(self, path: Path) -> None:
        """Start keeping the full blocks in the side file at ``path`` (a compacted segment, once in place)."""
        self.close_reader()
        self.path = path
        self.token = next(_tokens)
        self.seal()

    def _spill(self, sealing: bool) -> None:
        """Write the tail's full blocks (and, sealing, its partial one) to the side file. A failure keeps
        them in memory, to be tried again when the next block fills."""
        assert self.path is not None
        keep = 0 if sealing else 1  # the last entry's run may still grow: its block stays until the next
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as exc:
            _warn("index blocks of %s kept in memory: %s", self.path, exc)
            return
        try:
            while len(self.positions) > keep:
                n = min(self.width, len(self.positions))
                if n < self.width and not sealing:
                    break
                block = array("q", bytes(self.width * _ENTRY))
                for f, arr in enumerate((self.offsets, self.positions, self.max_ts)):
                    block[f * self.width : f * self.width + n] = arr[:n]
                data = block.tobytes()
                if os.pwrite(fd, data, self.spilled * self.width * _ENTRY) != len(data):
                    raise OSError("short write")
                # new arrays of the entries left: a shrunk array keeps its allocation, a copy does not
                self.offsets, self.positions, self.max_ts = self.offsets[n:], self.positions[n:], self.max_ts[n:]
                self.spilled += 1
        except OSError as exc:
            _warn("index blocks of %s kept in memory: %s", self.path, exc)
        finally:
            os.close(fd)

    def _take_back(self, b: int) -> None:
        """Block ``b`` and all after it back into the tail (they are about to change)."""
        if b >= self.spilled:
            return
        head = [self._block(i) for i in range(b, self.spilled)]
        offsets, positions, max_ts = array("q"), array("q"), array("q")
        for i, block in enumerate(head, b):
            n = min(self.width, self.count - i * self.width)
            offsets.extend(block[:n])
            positions.extend(block[self.width : self.width + n])
            max_ts.extend(block[2 * self.width : 2 * self.width + n])
        self.offsets[:0], self.positions[:0], self.max_ts[:0] = offsets, positions, max_ts
        self.spilled = b
        self.token = next(_tokens)  # the blocks from b on will be written again, with other entries

    def cut(self, n: int) -> None:
        """Keep the first ``n`` entries only (a truncation, or appends taken back)."""
        if n >= self.count:
            return
        if n == 0:
            self._reset()
            return
        last = (n - 1) // self.width  # the block of the last entry kept
        self._take_back(last)
        keep = n - self.spilled * self.width
        del self.offsets[keep:], self.positions[keep:], self.max_ts[keep:]
        del self.first_offsets[last + 1 :], self.first_positions[last + 1 :], self.block_ts[last + 1 :]
        self.count = n
        self.block_ts[last] = max(self.max_ts[(last - self.spilled) * self.width :])

    def set_last_ts(self, ts: int) -> None:
        """The last run's largest timestamp (appends taken back), and so its block's."""
        if not self.positions:
            self._take_back(self.spilled - 1)
        self.max_ts[-1] = ts
        last = len(self.block_ts) - 1
        self.block_ts[last] = max(self.max_ts[(last - self.spilled) * self.width :])

    # ------------------------------------------------------------ reading

    def _block(self, b: int) -> array:
        """Spilled block ``b``, from the cache or the side file."""
        key = block_key(self.token, b)
        block = CACHE.get(key)
        if block is None:
            block = self._read(b)
            CACHE.put(key, block)
        return block

    def _read(self, b: int, fd: int = -1) -> array:
        """Block ``b`` from the side file, through ``fd`` if given, else the kept descriptor (opened if it
        is not)."""
        assert self.path is not None
        size = self.width * _ENTRY
        try:
            if fd < 0:
                fd = self.reader if self.reader >= 0 else self._open_reader()
            if fd >= 0:
                data = os.pread(fd, size, b * size)
            else:  # closed again at once, the bound being full of busy files: this read's own descriptor
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    data = os.pread(fd, size, b * size)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise self._failed(exc) from exc
        if len(data) != self.width * _ENTRY:
            raise StorageError(f"the index of {self.path.name} is short: block {b} missing")
        block = array("q")
        block.frombytes(data)
        return block

    def _open_reader(self) -> int:
        """Open the side file for block reads and keep its descriptor; the current one (-1 if the bound
        closed it again right away)."""
        assert self.path is not None
        with open_files.lock:
            if self.reader < 0:
                self.reader = os.open(self.path, os.O_RDONLY)
        if self.holder is not None:
            self.holder.reader_opened(self)
        return self.reader

    def _failed(self, exc: OSError) -> StorageError:
        """The error a failed block read answers; descriptors running out also say so in a line."""
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            _warn("reading the index of %s failed: %s (ulimit -n, or log.max.open.files)", self.path, exc)
        return StorageError(f"reading the index of {self.path} failed: {exc}")

    def close_reader(self) -> None:
        """Close the side file's descriptor if one is kept (its segment closed, or the file replaced)."""
        with open_files.lock:
            fd, self.reader = self.reader, -1
        if fd >= 0:
            if self.holder is not None:
                self.holder.reader_closed(self)
            try:
                os.close(fd)
            except OSError as exc:
                _warn("closing the index of %s failed: %s", self.path, exc)

    def _field(self, b: int, f: int) -> tuple[array, int, int]:
        """Field ``f`` (0 offsets, 1 positions, 2 timestamps) of block ``b``: (array, lo, hi)."""
        if b < self.spilled:
            lo = f * self.width
            return self._block(b), lo, lo + min(self.width, self.count - b * self.width)
        lo = (b - self.spilled) * self.width
        tail = (self.offsets, self.positions, self.max_ts)[f]
        return tail, lo, min(lo + self.width, len(tail))

    def entry(self, i: int) -> tuple[int, int, int]:
        """Entry ``i``: (offset, position, max timestamp)."""
        b = i // self.width
        arr, lo, _hi = self._field(b, 0)
        j = i - b * self.width
        if b < self.spilled:
            return arr[lo + j], arr[self.width + j], arr[2 * self.width + j]
        return self.offsets[lo + j], self.positions[lo + j], self.max_ts[lo + j]

    def position(self, i: int) -> int:
        b = i // self.width
        if i % self.width == 0:
            return self.first_positions[b]
        arr, lo, _hi = self._field(b, 1)
        return arr[lo + i - b * self.width]

    def last_ts(self) -> int:
        """The last run's largest timestamp (-1: no entry)."""
        if not self.count:
            return -1
        return self.entry(self.count - 1)[2]

    def max_timestamp(self) -> int:
        return max(self.block_ts) if self.block_ts else -1

    def run_of(self, offset: int) -> tuple[int, int]:
        """The run of the last entry whose offset is <= ``offset`` (the first run when none is): its first
        batch's position and its end, the next run's first position (-1: the segment's end). A Fetch's
        lookup in one step, one block looked at (an entry found, then its position and the next one's,
        looked at it three times, each through the cache)."""
        width = self.width
        b = max(bisect.bisect_right(self.first_offsets, offset) - 1, 0)
        if b < self.spilled:
            key = self.token << 32 | b  # block_key, inlined
            block = _cached.pop(key, None)  # BlockCache.get inlined: this is every Fetch's path
            if block is None:
                block = self._read(b)
                CACHE.put(key, block)
            else:
                _cached[key] = block
            n = min(width, self.count - b * width)
            j = max(bisect.bisect_right(block, offset, 0, n) - 1, 0)
            position = block[width + j]
            if j + 1 < n:
                return position, block[width + j + 1]
        else:
            lo = (b - self.spilled) * width
            positions = self.positions
            hi = min(lo + width, len(positions))
            j = max(bisect.bisect_right(self.offsets, offset, lo, hi) - 1, lo)
            position = positions[j]
            if j + 1 < hi:
                return position, positions[j + 1]
        starts = self.first_positions
        return position, starts[b + 1] if b + 1 < len(starts) else -1

    def floor_start(self, position: int) -> int:
        """The first position of the last run starting at or below ``position`` (-1: none), one block
        looked at once."""
        b = bisect.bisect_right(self.first_positions, position) - 1
        if b < 0:
            return -1
        arr, lo, hi = self._field(b, 1)
        return arr[bisect.bisect_right(arr, position, lo, hi) - 1]

    def _lower(self, coarse: array, f: int, value: int) -> int:
        b = bisect.bisect_left(coarse, value)
        if b == 0:
            return 0
        arr, lo, hi = self._field(b - 1, f)
        return (b - 1) * self.width + bisect.bisect_left(arr, value, lo, hi) - lo

    def lower_position(self, position: int) -> int:
        """How many entries start below ``position``."""
        return self._lower(self.first_positions, 1, position)

    def run_reaching(self, ts: int, exactly: bool = False) -> tuple[int, int] | None:
        """The first run whose largest timestamp is >= ``ts`` (None: none is), as ``run_of`` gives one: its
        first batch's position and the next run's (-1: the segment's end). With ``exactly``, the first
        whose is == ``ts``, for ``ts`` the segment's largest (blocks are picked by their largest). The
        timestamps need not grow, so both levels are scanned, not bisected: in C (``compress`` over the
        comparisons), as a ListOffsets by timestamp's loop over a segment's blocks was most of its cost;
        the block found is looked at once for the run's bounds too."""
        test = ts.__eq__ if exactly else ts.__le__
        width, starts = self.width, self.first_positions
        for b in itertools.compress(itertools.count(), map(test, self.block_ts)):
            if b < self.spilled:
                block = self._block(b)
                n = min(width, self.count - b * width)
                for j in itertools.compress(itertools.count(), map(test, block[2 * width : 2 * width + n])):
                    if j + 1 < n:
                        return block[width + j], block[width + j + 1]
                    return block[width + j], starts[b + 1] if b + 1 < len(starts) else -1
            else:
                positions = self.positions
                lo = (b - self.spilled) * width
                for j in itertools.compress(itertools.count(lo), map(test, self.max_ts[lo : lo + width])):
                    return positions[j], positions[j + 1] if j + 1 < len(positions) else -1
        return None

    def iter_positions(self) -> Iterator[int]:
        """Every entry's position, in order (a block read at a time, past the cache: start-up replay).
        Read through a descriptor of its own, not the kept one: replay runs on worker threads, and only
        the event loop's thread closes idle files, which it may do to the kept one at any moment."""
        fd = -1
        try:
            for b in range(len(self.first_positions)):
                if b < self.spilled and CACHE.get(block_key(self.token, b)) is None:
                    if fd < 0:
                        assert self.path is not None  # blocks were spilled to it
                        try:
                            fd = os.open(self.path, os.O_RDONLY)
                        except OSError as exc:
                            raise self._failed(exc) from exc
                    arr, lo = self._read(b, fd), self.width
                    hi = lo + min(self.width, self.count - b * self.width)
                else:
                    arr, lo, hi = self._field(b, 1)
                yield from arr[lo:hi]
        finally:
            if fd >= 0:
                os.close(fd)

    # ------------------------------------------------------------ the side file at close and open

    def write_trailer(self, st: os.stat_result, next_offset: int) -> None:
        """At a clean close: seal, then append the trailer naming the segment file as it is (``st``)."""
        assert self.path is not None
        self.seal()
        if self.positions:
            raise OSError(f"index blocks of {self.path.name} could not be written")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            end = self.spilled * self.width * _ENTRY
            body = bytearray()
            at = 0
            while at < end:  # the CRC covers the blocks as they are on disk
                chunk = os.pread(fd, min(8 << 20, end - at), at)
                if not chunk:
                    raise OSError(f"index blocks of {self.path.name} are short")
                body += chunk
                at += len(chunk)
            trailer = _TRAILER.pack(
                _MAGIC, _VERSION, sys.byteorder == "little", self.width, st.st_ino, st.st_size, st.st_mtime_ns,
                next_offset, self.count, self.spilled,
            )  # fmt: skip
            crc = crc32c(trailer, crc32c(body)).to_bytes(4, "big")
            os.pwrite(fd, trailer + crc, end)
            os.ftruncate(fd, end + len(trailer) + 4)
        finally:
            os.close(fd)

    def load(self, st: os.stat_result) -> int | None:
        """Fill the coarse level from the side file a clean close left, if it describes this very segment
        file (``st``: same inode, size and mtime) and is intact; returns the segment's next offset."""
        assert self.path is not None
        try:
            data = self.path.read_bytes()
        except OSError:
            return None
        size = _TRAILER.size + 4
        if len(data) < size or crc32c(memoryview(data)[:-4]) != int.from_bytes(data[-4:], "big"):
            return None
        magic, version, little, width, inode, seg_size, mtime_ns, next_offset, count, blocks = _TRAILER.unpack_from(
            data, len(data) - size
        )
        expected = (_MAGIC, _VERSION, sys.byteorder == "little", self.width, st.st_ino, st.st_size, st.st_mtime_ns)
        if (magic, version, little, width, inode, seg_size, mtime_ns) != expected:
            return None
        if len(data) != blocks * self.width * _ENTRY + size or blocks != -(-count // self.width):
            return None
        arr = array("q")
        arr.frombytes(memoryview(data)[: blocks * self.width * _ENTRY])
        for b in range(blocks):
            at, n = b * 3 * self.width, min(self.width, count - b * self.width)
            self.first_offsets.append(arr[at])
            self.first_positions.append(arr[at + self.width])
            self.block_ts.append(max(arr[at + 2 * self.width : at + 2 * self.width + n]))
        if count and (
            self.first_positions[0] != 0
            or arr[(blocks - 1) * 3 * self.width + self.width + (count - 1) % self.width] >= seg_size
        ):
            self._reset()
            return None
        self.count, self.spilled = count, blocks
        return next_offset

    def forget_file(self) -> None:
        """Start the side file afresh (a scan rebuilds it)."""
        self.close_reader()
        if self.path is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError as exc:  # overwritten block by block instead; its old trailer never matches
                _warn("stale index %s not removed: %s", self.path, exc)
        self._reset()

    def resident_bytes(self) -> int:
        """The bytes this index holds in memory (its arrays' items), cached blocks aside."""
        arrays = (self.first_offsets, self.first_positions, self.block_ts, self.offsets, self.positions, self.max_ts)
        return sum(len(a) for a in arrays) * 8
