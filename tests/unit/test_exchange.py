"""The connection's exchange without a socket or a loop: bytes in, requests out, answers in, bytes out."""

from __future__ import annotations

import struct

import pytest

from groupd.broker.network.exchange import Exchange
from groupd.protocol.framing import FrameError


def request(correlation_id: int, pad: int = 0) -> bytes:
    """A frame whose body is an ApiVersions v3 header prefix (then ``pad`` bytes): the exchange reads
    only the size; the body is handed out as it came."""
    body = struct.pack(">hhi", 18, 3, correlation_id) + b"\0" * pad
    return struct.pack(">i", len(body)) + body


def answer_of(body: bytes) -> bytes:
    """A stand-in answer: the request's correlation id, framed."""
    return struct.pack(">ii", 4, struct.unpack_from(">i", body, 4)[0])


def correlation_ids(chunks) -> list[int]:
    data = b"".join(chunks)
    return [struct.unpack_from(">i", data, pos + 4)[0] for pos in range(0, len(data), 8)]


def exchange(**kw) -> Exchange:
    return Exchange(kw.pop("max_bytes", 1 << 20), kw.pop("max_queued", 500), kw.pop("max_queued_bytes", 0), **kw)


def take_all(ex: Exchange) -> list[tuple[int, bytes]]:
    taken = []
    while (t := ex.next_request()) is not None:
        taken.append(t)
    return taken


def test_one_request_at_a_time_by_default():
    ex = exchange()
    ex.receive(b"".join(request(c) for c in (1, 2, 3)))
    (ticket, body), = take_all(ex)  # the second waits until the first is answered
    assert ex.queued == 2
    assert correlation_ids(ex.answer(ticket, (answer_of(body),))) == [1]
    assert [struct.unpack_from(">i", b, 4)[0] for _, b in take_all(ex)] == [2]


def test_pipelined_requests_answered_out_of_order_come_out_in_order():
    ex = exchange(in_flight=4)
    ex.receive(b"".join(request(c) for c in (1, 2, 3, 4)))
    taken = take_all(ex)
    assert len(taken) == 4
    out = []
    for ticket, body in (taken[2], taken[1], taken[3], taken[0]):
        out.extend(ex.answer(ticket, (answer_of(body),)))
        if ticket != taken[0][0]:
            assert out == []  # the first is still unanswered: nothing may go out
    assert correlation_ids(out) == [1, 2, 3, 4]
    assert not ex.busy


def test_a_request_never_answered_holds_back_every_later_answer():
    ex = exchange(in_flight=3)
    ex.receive(b"".join(request(c) for c in (1, 2, 3)))
    (_first, _), *rest = take_all(ex)
    for ticket, body in rest:
        assert ex.answer(ticket, (answer_of(body),)) == []
    assert ex.busy
    assert ex.next_request() is None


def test_a_request_with_no_answer_lets_the_next_one_out():
    ex = exchange(in_flight=2)
    ex.receive(request(1) + request(2))
    (t1, _), (t2, b2) = take_all(ex)
    assert ex.answer(t2, (answer_of(b2),)) == []
    assert correlation_ids(ex.answer(t1, ())) == [2]  # Produce with acks=0: nothing of its own


def test_a_frame_split_across_many_reads():
    ex = exchange()
    data = request(7, pad=300) + request(8)
    for i in range(len(data)):
        ex.receive(data[i : i + 1])
        if i < len(request(7, pad=300)) - 1:
            assert ex.queued == 0
    assert ex.queued == 2
    ticket, body = ex.next_request()
    assert body == request(7, pad=300)[4:]
    assert ex.tail == b""


def test_a_torn_frame_stays_as_the_tail():
    ex = exchange()
    ex.receive(request(1)[:6])
    assert ex.queued == 0
    assert ex.tail == request(1)[:6]


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (2000, "frame size 2000 exceeds socket.request.max.bytes 1000"),
        (-1, "negative frame size -1"),
        (3, "frame size 3 is shorter than a request header"),
    ],
)
def test_a_frame_of_a_size_that_must_not_be_read(size, message):
    ex = exchange(max_bytes=1000)
    with pytest.raises(FrameError, match=message):
        ex.receive(request(1) + struct.pack(">i", size))  # the connection logs it and closes


def test_an_oversize_frame_is_refused_on_its_size_alone():
    ex = exchange(max_bytes=1000)
    with pytest.raises(FrameError):
        ex.receive(struct.pack(">i", 1001))


def test_read_ahead_bounded_by_count():
    ex = exchange(max_queued=3)
    ex.receive(request(1) + request(2))
    assert not ex.over_read_ahead()
    ex.receive(request(3))
    assert ex.over_read_ahead() and not ex.bounded_by_bytes
    ticket, body = ex.next_request()
    assert not ex.over_read_ahead()


def test_read_ahead_bounded_by_bytes_counts_the_request_in_hand_and_the_partial_frame():
    ex = exchange(max_queued_bytes=1000)
    ex.receive(request(1, pad=600))
    ticket, _ = ex.next_request()  # in hand: 608 bytes unanswered
    assert not ex.over_read_ahead()
    ex.receive(request(2, pad=600)[:400])  # a partial frame crosses the bound
    assert ex.over_read_ahead() and ex.bounded_by_bytes
    assert ex.unanswered_bytes == 608 + 400
    ex.answer(ticket, ())
    assert not ex.over_read_ahead()


def test_a_lone_frame_is_read_whatever_its_size():
    ex = exchange(max_queued_bytes=100)
    assert not ex.over_read_ahead()
    ex.receive(request(1, pad=400)[:200])
    assert not ex.over_read_ahead()  # nothing outstanding: the frame is read whole


def test_no_bound_by_bytes_when_not_positive():
    ex = exchange(max_queued_bytes=-1)
    ex.receive(b"".join(request(c, pad=10_000) for c in range(10)))
    assert not ex.over_read_ahead()


def test_muted_hands_out_nothing_until_unmuted():
    ex = exchange()
    ex.receive(request(1) + request(2))
    ticket, body = ex.next_request()
    assert correlation_ids(ex.answer(ticket, (answer_of(body),))) == [1]  # a throttled answer goes out at once
    ex.mute()
    assert ex.next_request() is None
    assert ex.busy
    assert ex.unmute() is True
    assert ex.unmute() is False
    assert ex.next_request()[1] == request(2)[4:]


def test_connection_lost_with_answers_pending():
    ex = exchange(in_flight=2)
    ex.receive(request(1) + request(2) + request(3))
    (t1, b1), (t2, b2) = take_all(ex)
    assert ex.answer(t2, (answer_of(b2),)) == []
    ex.lost()
    assert ex.answer(t1, (answer_of(b1),)) == ()  # for nobody
    assert not ex.busy
    assert ex.next_request() is None
    assert ex.unanswered_bytes == 0


def test_an_answer_given_twice_goes_out_once():
    ex = exchange()
    ex.receive(request(1))
    ticket, body = ex.next_request()
    assert correlation_ids(ex.answer(ticket, (answer_of(body),))) == [1]
    assert ex.answer(ticket, (answer_of(body),)) == ()


def test_admitted_frames_take_their_turn():
    """The SASL gate cuts its own frames and answers each at once; they keep the order too."""
    ex = exchange()
    ticket = ex.admit(10)
    assert ex.busy
    assert ex.answer(ticket, (b"reply",)) == (b"reply",)
    assert not ex.busy


def test_drop_queued_forgets_frames_not_handed_out():
    ex = exchange()
    ex.receive(request(1) + request(2))
    ex.drop_queued()
    assert ex.next_request() is None
    assert ex.read_ahead_bytes == 0


def test_take_hands_out_a_lone_whole_frame_at_once():
    """The usual read of a client that waits for each answer: one whole frame, nothing else read or in
    hand. ``take`` cuts it and hands it out in the same call, with the ticket ``next_request`` would give."""
    ex = exchange()
    ticket, body = ex.take(request(7))
    assert struct.unpack_from(">i", body, 4)[0] == 7
    assert ex.queued == 0 and ex.busy and ex.unanswered_bytes == len(body)
    assert correlation_ids(ex.answer(ticket, (answer_of(body),))) == [7]
    ticket2, _ = ex.take(request(8))
    assert ticket2 == ticket + 1


@pytest.mark.parametrize(
    "why",
    ["two frames", "a torn frame", "a request in hand", "frames queued", "muted", "over the byte bound"],
)
def test_take_falls_back_to_receive_when_the_frame_cannot_go_out_at_once(why):
    """Anything but a lone whole frame that may go out now is only received: the owner then asks
    ``next_request`` as usual, and the order and bounds are those of ``receive``."""
    ex = exchange(max_queued_bytes=64)
    data = request(1)
    if why == "two frames":
        data += request(2)
    elif why == "a torn frame":
        data = data[:-1]
    elif why == "a request in hand":
        ex.receive(request(0))
        assert ex.next_request() is not None
    elif why == "frames queued":
        ex.receive(request(0) + request(0))
        ex.next_request()
    elif why == "muted":
        ex.mute()
    elif why == "over the byte bound":
        data = request(1, pad=64)
    assert ex.take(data) is None
    if why == "over the byte bound":
        assert ex.over_read_ahead()  # as receive would leave it: the owner pauses reading
    if why in ("two frames", "over the byte bound"):
        assert [struct.unpack_from(">i", b, 4)[0] for _, b in take_all(ex)] == [1]
