"""The request/answer exchange of one Kafka connection, as bytes: no socket, no event loop, no clock.

Bytes go in (``receive``); whole request frames come out (``next_request``), each with a ticket; answers
go in tagged with their ticket (``answer``) and response bytes come out strictly in request order,
however the answers arrive. h11's connection object is the model: the object only keeps the state of
the exchange, and whoever owns the socket (``broker/network/connection.py``) does the I/O, runs the
handlers and keeps the time.

What it enforces, with Kafka's names (the broker's configuration gives the numbers):

- ``socket.request.max.bytes``: a frame announcing more (or a negative or header-less size) is a
  ``FrameError``; the owner closes the connection.
- ``queued.max.requests`` and ``queued.max.request.bytes``: how far reading may run ahead of answering.
  ``over_read_ahead`` says when the owner should stop reading; it may read again once it is False.
- ``in_flight``: how many requests are handed out before the first of them is answered. Kafka (and
  the broker) hand out one at a time, so a parked JoinGroup holds back the requests behind it on its
  own connection; with more, answers that come early wait for the ones before them.
- Muting (KIP-219): a throttled connection gets its answer at once, then no further request is handed
  out until ``unmute``; the owner decides when, from its own clock.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from groupd.protocol.framing import HEADER_PREFIX, SIZE, check_size

NO_BOUND = 1 << 62  # queued.max.request.bytes <= 0 is Kafka's "no bound"
_MIN_FRAME = HEADER_PREFIX.size  # a shorter frame, or a torn one, takes the checked path in receive
Chunks = Sequence[bytes]  # one answer's bytes, size prefix included: empty when Kafka sends none


class Exchange:
    __slots__ = (
        "max_bytes", "max_queued", "max_queued_bytes", "in_flight",
        "_buf", "frames", "_queued_bytes", "_open", "_open_bytes", "_next_ticket", "_next_out", "_held",
        "_muted",
    )

    def __init__(self, max_bytes: int, max_queued: int, max_queued_bytes: int, in_flight: int = 1) -> None:
        self.max_bytes = max_bytes  # the SASL gate lowers it until the client authenticates
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes if max_queued_bytes > 0 else NO_BOUND
        self.in_flight = in_flight
        self._buf = bytearray()  # the start of a frame not yet whole
        # whole frames not yet handed out; the owner may test it for emptiness before asking next_request
        self.frames: collections.deque[bytes] = collections.deque()
        self._queued_bytes = 0  # the frames' bytes
        self._open: dict[int, int] = {}  # ticket -> request bytes, handed out and not yet answered
        self._open_bytes = 0
        self._next_ticket = 0
        self._next_out = 0  # the ticket whose answer goes out next
        self._held: dict[int, Chunks] = {}  # answers that came before an earlier request's
        self._muted = False

    # ------------------------------------------------------------ bytes in, requests out

    def receive(self, data: bytes) -> None:
        """Cut whole frames from what was read. Raises ``FrameError`` on a size that must not be read;
        frames cut before it are then of no use (the connection closes)."""
        buf = self._buf
        if not buf and len(data) >= 4:
            (size,) = SIZE.unpack_from(data, 0)
            if size + 4 == len(data) and _MIN_FRAME <= size <= self.max_bytes:
                # exactly one whole frame, the usual read of a client waiting for each answer: one copy
                self.frames.append(data[4:])
                self._queued_bytes += size
                return
        buf += data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = SIZE.unpack_from(buf, pos)
            check_size(size, self.max_bytes)
            if end - pos - 4 < size:
                break
            self.frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            self._queued_bytes += size
            pos += 4 + size
        if pos:
            del buf[:pos]

    def take(self, data: bytes) -> tuple[int, bytes] | None:
        """``receive`` and ``next_request`` in one call, for the usual read of a client that waits for each
        answer: when nothing is read ahead, in hand or muted and ``data`` is exactly one whole frame under
        the byte bound, it is handed out at once (one copy, no queue). Otherwise ``data`` is only
        received and None returned: the owner checks the bounds and asks ``next_request`` as usual."""
        if not self._buf and not self.frames and not self._open and not self._muted and len(data) >= 4:
            (size,) = SIZE.unpack_from(data, 0)
            if size + 4 == len(data) and _MIN_FRAME <= size <= self.max_bytes and size < self.max_queued_bytes:
                ticket = self._next_ticket
                self._next_ticket = ticket + 1
                self._open[ticket] = size
                self._open_bytes += size
                return ticket, data[4:]
        self.receive(data)
        return None

    def next_request(self) -> tuple[int, bytes] | None:
        """The next request to handle, as (ticket, frame without its size), or None: nothing read, the
        connection muted, or ``in_flight`` requests already waiting for their answers."""
        if not self.frames or self._muted or len(self._open) >= self.in_flight:
            return None
        body = self.frames.popleft()
        size = len(body)
        self._queued_bytes -= size
        ticket = self._next_ticket  # as admit(size), without a second call on the hot path
        self._next_ticket = ticket + 1
        self._open[ticket] = size
        self._open_bytes += size
        return ticket, body

    def admit(self, size: int) -> int:
        """A ticket for a frame of ``size`` bytes the owner cut itself and handles now (the SASL gate's)."""
        ticket = self._next_ticket
        self._next_ticket = ticket + 1
        self._open[ticket] = size
        self._open_bytes += size
        return ticket

    # ------------------------------------------------------------ answers in, bytes out

    def answer(self, ticket: int, chunks: Chunks) -> Chunks:
        """The answer to ``ticket`` (``()`` for none); returns what may be sent now, in request order:
        nothing while an earlier request is unanswered, and every answer it held back once it is."""
        size = self._open.pop(ticket, None)
        if size is None:
            return ()  # the connection was lost meanwhile, or answered twice: for nobody
        self._open_bytes -= size
        if ticket == self._next_out and not self._held:
            self._next_out = ticket + 1
            return chunks
        self._held[ticket] = chunks
        out: list[bytes] = []
        held = self._held
        while self._next_out in held:
            out.extend(held.pop(self._next_out))
            self._next_out += 1
        return out

    # ------------------------------------------------------------ bounds and muting

    def over_read_ahead(self) -> bool:
        """Past ``queued.max.requests`` frames, or ``queued.max.request.bytes`` bytes read and not yet
        answered (the partial frame included). Only while something is outstanding: a lone frame is
        always read whole, whatever its size (``socket.request.max.bytes`` caps that)."""
        pending = self._queued_bytes + self._open_bytes
        return len(self.frames) >= self.max_queued or (
            pending > 0 and pending + len(self._buf) >= self.max_queued_bytes
        )

    @property
    def bounded_by_bytes(self) -> bool:
        """Over the read-ahead bound by bytes rather than by the count of frames."""
        return len(self.frames) < self.max_queued

    @property
    def unanswered_bytes(self) -> int:
        """Bytes read and not yet answered: queued frames, requests in hand, the partial frame."""
        return self._queued_bytes + self._open_bytes + len(self._buf)

    @property
    def read_ahead_bytes(self) -> int:
        """Bytes read and not yet handed out: queued frames and the partial frame."""
        return self._queued_bytes + len(self._buf)

    def mute(self) -> None:
        self._muted = True

    def unmute(self) -> bool:
        """Hand out requests again; False if it was not muted."""
        was, self._muted = self._muted, False
        return was

    @property
    def queued(self) -> int:
        """Whole frames read and not yet handed out."""
        return len(self.frames)

    @property
    def busy(self) -> bool:
        """A request read and not yet answered, or muted: the connection is not idle."""
        return bool(self.frames) or bool(self._open) or self._muted

    @property
    def tail(self) -> bytes:
        """The bytes of a frame not yet whole (what a peer that stops mid-frame leaves)."""
        return bytes(self._buf)

    # ------------------------------------------------------------ the end

    def drop_queued(self) -> None:
        """Forget the frames not yet handed out (the connection is closing)."""
        self.frames.clear()
        self._queued_bytes = 0

    def lost(self) -> None:
        """The peer is gone: nothing queued or outstanding is for anyone; answers that come later
        return nothing."""
        self.drop_queued()
        self._open.clear()
        self._open_bytes = 0
        self._held.clear()
