"""Kafka record batches v2 (magic 2): header parsing, CRC-32C, building and record decoding.

Layout: baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32, attributes i16,
lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64, producerId i64, producerEpoch i16,
baseSequence i32, recordCount i32, then records. The CRC covers attributes..end, so the broker can
rewrite baseOffset (and the leader epoch) without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from crc32c import crc32c

from groupd.storage import codecs
from groupd.storage.errors import CorruptBatch, UnsupportedMagic

_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = _HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
CRC_START = 21
_BASE = struct.Struct(">q")
_LEN_MAGIC = struct.Struct(">qiib")


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# Replay speed: a frozen dataclass sets each field through object.__setattr__ (~1.5 us for the 13-field
# header, ~0.6 us for a record), the main cost of replaying millions of records. A plain slotted twin with
# the very same slots is built instead and then given the frozen class: identical layout, so CPython
# allows the __class__ assignment, and the result is an ordinary frozen instance (eq, hash, replace).


def _twin(cls: type) -> type:
    annotations = {name: object for name in cls.__dict__["__slots__"]}
    return dataclass(slots=True)(type("_Mutable" + cls.__name__, (), {"__annotations__": annotations}))


_HeaderTwin = _twin(BatchHeader)
_RecordTwin = _twin(Record)


def _make_header(fields: tuple) -> BatchHeader:
    h = _HeaderTwin(*fields)
    h.__class__ = BatchHeader
    return h


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < BATCH_OVERHEAD:
        raise CorruptBatch(f"batch header truncated at {pos}")
    h = _make_header(_HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise UnsupportedMagic(f"record batch magic {h.magic} is not supported (only v2)")
    if h.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptBatch(f"batch length {h.batch_length} is shorter than a batch header")
    return h


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    end = pos + header.size
    if end > len(buf):
        return False
    return crc32c(memoryview(buf)[pos + CRC_START : end]) == header.crc


def validate_batch(buf: bytes | bytearray | memoryview) -> BatchHeader:
    """One whole produced batch: magic 2, consistent length, CRC ok."""
    if len(buf) >= 17 and buf[16] != 2:
        raise UnsupportedMagic(f"record batch magic {buf[16]} is not supported (only v2)")
    header = parse_header(buf, 0)
    if header.size != len(buf):
        raise CorruptBatch(f"batch length {header.size} does not match {len(buf)} bytes received")
    if not crc_ok(buf, 0, header):
        raise CorruptBatch("record batch CRC mismatch")
    return header


def split_batches(buf: bytes | memoryview) -> Iterator[memoryview]:
    """Produce requests may carry several batches in one records field."""
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        if len(view) - pos < LOG_OVERHEAD:
            raise CorruptBatch("trailing bytes after the last batch")
        _, length = struct.unpack_from(">qi", view, pos)
        end = pos + LOG_OVERHEAD + length
        if length < 0 or end > len(view):
            raise CorruptBatch("batch length runs past the records")
        yield view[pos:end]
        pos = end


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _BASE.pack_into(buf, pos, base_offset)


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Batches in ``buf`` from ``pos``; stops before the first incomplete one."""
    end = len(buf)
    while end - pos >= BATCH_OVERHEAD:
        header = parse_header(buf, pos)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


# ---------------------------------------------------------------- varints


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _write_varint(out: bytearray, n: int) -> None:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBatch("varint too long")


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


@overload
def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    offset_deltas: Sequence[int] | None = None,
    timestamps: Sequence[int] | None = None,
    mutable: Literal[False] = False,
) -> bytes: ...


@overload
def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    offset_deltas: Sequence[int] | None = None,
    timestamps: Sequence[int] | None = None,
    mutable: Literal[True],
) -> bytearray: ...


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    offset_deltas: Sequence[int] | None = None,
    timestamps: Sequence[int] | None = None,
    mutable: bool = False,
) -> bytes | bytearray:
    """An uncompressed v2 batch. ``offset_deltas``/``timestamps`` let compaction keep gaps truthful.
    ``mutable``: as a bytearray, whose base offset the log then writes in place."""
    max_ts = timestamp_ms
    plain = headers is None and timestamps is None and offset_deltas is None and len(records) < 64
    # the coordinator's few short records: laid out with one-byte varints when they all fit
    small = _small_records(records) if plain else None
    body = bytearray() if small is None else small
    for i, (key, value) in enumerate(records if small is None else ()):
        rec = bytearray(b"\x00")  # attributes
        ts = timestamps[i] if timestamps is not None else timestamp_ms
        max_ts = max(max_ts, ts)
        _write_varint(rec, ts - timestamp_ms)
        _write_varint(rec, offset_deltas[i] if offset_deltas is not None else i)
        _write_bytes(rec, key)
        _write_bytes(rec, value)
        hdrs = headers[i] if headers is not None else ()
        _write_varint(rec, len(hdrs))
        for hk, hv in hdrs:
            _write_bytes(rec, hk.encode())
            _write_bytes(rec, hv)
        _write_varint(body, len(rec))
        body += rec
    count = len(records)
    last_delta = (offset_deltas[-1] if offset_deltas else count - 1) if count else 0
    tail = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_delta,
            timestamp_ms,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + body
    )
    crc = crc32c(tail)
    head = _HEAD.pack(base_offset, len(tail) + 9, 0, 2, crc)
    return bytearray(head) + tail if mutable else head + tail


_HEAD = struct.Struct(">qiibI")

TRANSACTIONAL = 0x10  # batch attribute bits
CONTROL = 0x20
ABORT_MARKER, COMMIT_MARKER = 0, 1  # a control record's key: version int16 0, type int16
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")  # version int16 0, coordinator epoch int32


def build_control_batch(
    producer_id: int, producer_epoch: int, commit: bool, *, timestamp_ms: int, coordinator_epoch: int = 0
) -> bytearray:
    """A transaction marker as Kafka writes it: a transactional control batch of one record, whose key
    says COMMIT or ABORT and whose value carries the coordinator's epoch. Consumers never see it as a
    message; READ_COMMITTED readers use it to end the producer's transaction."""
    key = _CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [(key, value)],
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        attributes=TRANSACTIONAL | CONTROL,
        mutable=True,
    )


def control_marker(batch: bytes | memoryview, header: BatchHeader | None = None) -> int | None:
    """COMMIT_MARKER or ABORT_MARKER for a control batch's first record; None for another control type."""
    for rec in iter_records(batch, header):
        if rec.key is not None and len(rec.key) >= 4:
            version, kind = _CONTROL_KEY.unpack_from(rec.key, 0)
            return kind if kind in (ABORT_MARKER, COMMIT_MARKER) else None
        return None
    return None


_ONE_BYTE = [bytes([(n << 1) & 0xFF]) for n in range(64)]  # zigzag varints of 0..63
_TWO_BYTES = [bytes((((n << 1) & 0x7F) | 0x80, n >> 6)) for n in range(256)]  # of 64..255 (a record's length)


def _small_records(records: Sequence[tuple[bytes | None, bytes | None]]) -> bytearray | None:
    """Records whose varints but the record length are one byte (keys and values under 64 bytes, fewer
    than 64 records), laid out without the general varint writer; None when one does not fit."""
    body = bytearray()
    one = _ONE_BYTE
    for i, (key, value) in enumerate(records):
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        if klen >= 64 or vlen >= 64:
            return None
        # attributes, timestamp delta 0, offset delta i, key, value, no headers
        length = 6 + max(klen, 0) + max(vlen, 0)
        if length < 64:
            body += one[length]
        elif length < 256:
            body += _TWO_BYTES[length]
        else:
            _write_varint(body, length)
        body += b"\x00\x00"
        body += one[i]
        body += b"\x01" if key is None else one[klen] + key
        body += b"\x01" if value is None else one[vlen] + value
        body += b"\x00"
    return body


def _decompress(codec: int, data: bytes) -> bytes:
    return data if codec == 0 else codecs.decompress(codec, data, 2)


def iter_records(batch: bytes | memoryview, header: BatchHeader | None = None) -> Iterator[Record]:
    """Records of one batch (``header`` may be passed when already parsed).

    Damage shows as ``CorruptBatch`` (never IndexError), so a replay can stop cleanly; LogAppendTime
    batches give every record the batch's max timestamp, as Kafka does. Single-byte varints (nearly all
    lengths and deltas of small records) are decoded inline: this loop is the start-up replay.
    """
    if header is None:
        header = parse_header(batch, 0)
    size = header.batch_length + LOG_OVERHEAD
    if size > len(batch):
        raise CorruptBatch("incomplete batch")
    data = _decompress(header.compression, bytes(batch[BATCH_OVERHEAD:size]))
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    fixed_ts = header.max_timestamp if header.timestamp_type == 1 else None
    twin = _RecordTwin
    record_cls = Record
    read = _read_varint
    pos = 0
    end_data = len(data)
    try:
        for _ in range(header.record_count):
            b = data[pos]
            if b < 0x80:
                end = pos + 1 + (b >> 1)
                pos += 2  # the length byte and the record attributes
            else:
                length, pos = read(data, pos)
                end = pos + length
                pos += 1
            if end > end_data:
                raise CorruptBatch("record runs past the end of its batch")
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = read(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = read(data, pos)
            b = data[pos]
            if b == 1:
                key = None
                pos += 1
            elif b < 0x80 and not b & 1:
                pos += 1
                key = data[pos : pos + (b >> 1)]
                pos += b >> 1
            else:
                klen, pos = read(data, pos)
                key = None if klen < 0 else data[pos : pos + klen]
                pos += max(klen, 0)
            b = data[pos]
            if b == 1:
                value = None
                pos += 1
            elif b < 0x80 and not b & 1:
                pos += 1
                value = data[pos : pos + (b >> 1)]
                pos += b >> 1
            else:
                vlen, pos = read(data, pos)
                value = None if vlen < 0 else data[pos : pos + vlen]
                pos += max(vlen, 0)
            if data[pos] == 0:
                pos += 1
                hdrs: tuple[tuple[str, bytes | None], ...] = ()
            else:
                hdrs, pos = _read_headers(data, pos)
            if pos != end:
                raise CorruptBatch("record length does not match its fields")
            r = twin(base_offset + off_delta, base_ts + ts_delta if fixed_ts is None else fixed_ts, key, value, hdrs)
            r.__class__ = record_cls
            yield r
    except IndexError:
        raise CorruptBatch("record runs past the end of its batch") from None


def _read_headers(data: bytes, pos: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = _read_varint(data, pos)
    out = []
    for _ in range(count):
        hklen, pos = _read_varint(data, pos)
        if hklen < 0:
            raise CorruptBatch("null record header key")
        try:
            hk = data[pos : pos + hklen].decode()
        except UnicodeDecodeError as exc:
            raise CorruptBatch(f"record header key is not UTF-8: {exc}") from exc
        pos += hklen
        hvlen, pos = _read_varint(data, pos)
        hv = None if hvlen < 0 else data[pos : pos + hvlen]
        pos += max(hvlen, 0)
        out.append((hk, hv))
    return tuple(out), pos


_LEN_ATTRS_COUNT = struct.Struct(">8xi9xh34xi")  # batchLength (at 8), attributes (21), recordCount (57)

# A one-byte varint's value, by the byte: a non-negative length (an even byte below 0x80) for record,
# key and value lengths; -1 (the byte 1) marks a null key or value. None sends the walk to the general
# varint reader: a continuation byte, or a negative length other than -1 (which that reader rejects
# where it matters).
_LENGTH_BYTE = tuple((b >> 1) if b < 0x80 and not b & 1 else None for b in range(256))
_NULLABLE_LENGTH_BYTE = tuple(-1 if b == 1 else n for b, n in enumerate(_LENGTH_BYTE))


def collect_latest(buf: bytes | memoryview, latest: dict[bytes, bytes | None], txn: TxnWalk | None = None) -> int:
    """Walk whole batches in ``buf`` and keep the last value of every keyed record in ``latest`` (keys
    in the order of their first appearance: a load does not depend on the order of the survivors,
    see coordinator/service.py); returns the records seen.

    The start-up replay loop: one function over a whole chunk, no per-batch or per-record objects,
    one-byte varints decoded by table lookup. Compressed batches are decompressed and walked the same
    way. Transactional batches and markers go to ``txn`` (see TxnWalk); without one they raise
    TransactionalBatch, so a walk that cannot honour them is redone by one that can. Other control
    batches hold no data and are skipped."""
    data = bytes(buf)
    end_all = len(data)
    pos = 0
    seen = 0
    unpack = _LEN_ATTRS_COUNT.unpack_from
    while end_all - pos >= BATCH_OVERHEAD:
        length, attributes, count = unpack(data, pos)
        batch_end = pos + LOG_OVERHEAD + length
        if length < BATCH_OVERHEAD - LOG_OVERHEAD or batch_end > end_all:
            raise CorruptBatch(f"batch at position {pos} runs past its chunk")
        if not attributes & 0x37:  # plain and uncompressed: nearly every batch
            _collect_records(data, pos + BATCH_OVERHEAD, batch_end, count, latest)
        elif attributes & (TRANSACTIONAL | CONTROL):
            if attributes & TRANSACTIONAL:
                if txn is None:
                    raise TransactionalBatch(f"transactional batch at position {pos}")
                txn.batch(data, pos, batch_end, latest)
        else:
            records = _decompress(attributes & 0x07, data[pos + BATCH_OVERHEAD : batch_end])
            _collect_records(records, 0, len(records), count, latest)
        seen += count
        pos = batch_end
    return seen


class TransactionalBatch(Exception):
    """A walk without a TxnWalk met a transactional batch (a walk helper's answer: walk it here)."""


_ABSENT = object()  # no value for the key before a transaction's write
_OFFSET_KEY_TYPES = (b"\x00\x00", b"\x00\x01")  # __consumer_offsets offset-commit keys (types 0 and 1)


_COMMIT_TYPE = _CONTROL_KEY.pack(0, COMMIT_MARKER)[2:]
_MARKER_TYPES = (_COMMIT_TYPE, _CONTROL_KEY.pack(0, ABORT_MARKER)[2:])  # a control key's type, after its version


class _Held:
    """``latest``'s entry for a key that open transactions wrote: ``base`` is what readers see (the value
    before them, or a committed transaction's), ``writes`` counts the open writes held here. A later
    plain write replaces it in ``latest``, which is how the walk learns the transactions lost to it."""

    __slots__ = ("base", "base_seq", "writes")

    def __init__(self, base: object) -> None:
        self.base, self.base_seq, self.writes = base, 0, 0


class TxnWalk:
    """What ``collect_latest`` does with transactional batches of ``__consumer_offsets``, as Kafka's
    coordinator replays them: an offset record of a producer's transaction stays pending until that
    producer's marker; COMMIT applies it unless a plain write of its key (or another transaction's
    committed write) came after it, ABORT drops it. ``finish`` leaves in ``latest`` what readers see
    and returns what is still pending."""

    def __init__(self) -> None:
        self.open: dict[int, dict[bytes, tuple[_Held, int, bytes]]] = {}  # producer -> key -> write
        self.held: dict[int, tuple[bytes, _Held]] = {}  # holders still in ``latest``, by id
        self.seq = 0
        self.batches = 0
        self.epochs: dict[int, int] = {}  # the last epoch of each producer with transactional batches

    def batch(self, data: bytes, pos: int, end: int, latest: dict[bytes, Any]) -> None:
        """The transactional batch at ``data[pos:end]``."""
        self.batches += 1
        header = parse_header(data, pos)
        producer_id = header.producer_id
        if header.producer_epoch > self.epochs.get(producer_id, -1):
            self.epochs[producer_id] = header.producer_epoch
        if header.is_control and header.attributes & 0x07:  # compressed: not as Kafka writes markers
            kind = control_marker(memoryview(data)[pos:end], header)
            if kind is not None:
                self.marker(producer_id, kind == COMMIT_MARKER, latest)
            return
        if header.is_control:
            first: dict[bytes, bytes | None] = {}
            _collect_records(data, pos + BATCH_OVERHEAD, end, min(header.record_count, 1), first)
            for key in first:
                if len(key) >= 4 and key[2:4] in _MARKER_TYPES:
                    self.marker(producer_id, key[2:4] == _COMMIT_TYPE, latest)
            return
        records: Any = None
        if not header.attributes & 0x07:
            # the fast walk's reader, when no key repeats in the batch (then the last record of each
            # key is the whole story)
            found: dict[bytes, bytes | None] = {}
            _collect_records(data, pos + BATCH_OVERHEAD, end, header.record_count, found)
            if len(found) == header.record_count:
                records = found.items()
        if records is None:
            records = [
                (bytes(r.key), None if r.value is None else bytes(r.value))
                for r in iter_records(memoryview(data)[pos:end], header)
                if r.key is not None
            ]
        for key, value in records:
            if value is None or key[:2] not in _OFFSET_KEY_TYPES:
                latest[key] = value  # a tombstone or another record acts at once, as a plain one
                continue
            self.write(producer_id, key, value, latest)

    def write(self, producer_id: int, key: bytes, value: bytes, latest: dict[bytes, Any]) -> None:
        held = latest.get(key, _ABSENT)
        if type(held) is not _Held:
            held = _Held(held)
            latest[key] = held
            self.held[id(held)] = (key, held)
        self.seq += 1
        writes = self.open.setdefault(producer_id, {})
        old = writes.get(key)
        if old is not None and old[0] is held:
            held.writes -= 1  # replaced by this write
        held.writes += 1
        writes[key] = (held, self.seq, value)

    def marker(self, producer_id: int, commit: bool, latest: dict[bytes, Any]) -> None:
        writes = self.open.pop(producer_id, None)
        if writes is None:
            return
        for key, (held, seq, value) in writes.items():
            if latest.get(key) is not held:
                continue  # a plain write came after it: it lost (or a tombstone removed it)
            held.writes -= 1
            if commit and seq > held.base_seq:
                held.base, held.base_seq = value, seq
            if not held.writes:
                _settle(latest, key, held)
                del self.held[id(held)]

    def finish(self, latest: dict[bytes, Any]) -> list[tuple[int, bytes, bytes, bool]]:
        """Open writes as (producer id, key, value, superseded) in write order; ``latest`` then holds
        only values. A write a tombstone came after is gone, as Kafka's replay removes it."""
        pending = []
        for producer_id, writes in self.open.items():
            for key, (held, seq, value) in writes.items():
                now = latest.get(key, _ABSENT)
                if now is held:
                    pending.append((seq, producer_id, key, value, seq < held.base_seq))
                elif now is not None and now is not _ABSENT:
                    pending.append((seq, producer_id, key, value, True))
        for key, held in self.held.values():
            if latest.get(key) is held:
                _settle(latest, key, held)
        self.open.clear()
        self.held.clear()
        pending.sort()
        return [(pid, key, value, superseded) for _seq, pid, key, value, superseded in pending]


def _settle(latest: dict[bytes, Any], key: bytes, held: _Held) -> None:
    if held.base is _ABSENT:
        del latest[key]
    else:
        latest[key] = held.base


def _collect_records(data: bytes, p: int, stop: int, count: int, latest: dict[bytes, bytes | None]) -> None:
    """``count`` records in ``data[p:stop]``: key and value of each, into ``latest``."""
    read = _read_varint
    length_byte, nullable = _LENGTH_BYTE, _NULLABLE_LENGTH_BYTE
    try:
        for _ in range(count):
            n = length_byte[data[p]]
            if n is None:
                n, p = read(data, p)
                if n < 0:
                    raise CorruptBatch("negative record length")
                rec_end = p + n
                p -= 1  # as if the length had taken one byte
            else:
                rec_end = p + 1 + n
            if rec_end > stop:
                raise CorruptBatch("record runs past the end of its batch")
            # attributes, then the timestamp and offset deltas: skipped (one byte each unless large)
            if data[p + 2] | data[p + 3] < 0x80:
                p += 4
            else:
                _, p = read(data, p + 2)
                _, p = read(data, p)
            klen = nullable[data[p]]
            if klen is None:
                klen, p = read(data, p)
            else:
                p += 1
            if klen >= 0:
                key = data[p : p + klen]
                p += klen
                vlen = nullable[data[p]]
                if vlen is None:
                    vlen, p = read(data, p)
                else:
                    p += 1
                latest[key] = None if vlen < 0 else data[p : p + vlen]
            p = rec_end
    except IndexError as exc:
        raise CorruptBatch("record runs past the end of its batch") from exc
