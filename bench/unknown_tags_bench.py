"""What a request carrying tagged fields kio does not know costs to decode: ``python -m bench.unknown_tags_bench``.

Each request of the hot path (bench/decode_bench's) is decoded by ``groupd.protocol.request.parse_request`` as a
client sends it, with one unknown tag in its top-level section (kio refuses it, the frame is walked and
rewritten, kio reads it again: groupd/protocol/unknown_tags), and with unknown tags in every section (the
header's, the body's, each nested struct's and array element's). Interleaved rounds, the best of each
kept, CPU time counted. See docs/malformed-requests.md.
"""

from __future__ import annotations

from bench.decode_bench import _per_decode_us, requests
from groupd.protocol import codec
from groupd.protocol.bounds import read_uvarint
from groupd.protocol.fastwrite import _uvarint
from groupd.protocol.request import encode_request, parse_request
from tests.fuzz import length_fields

UNKNOWN = _uvarint(9999) + _uvarint(4) + b"tag!"  # a tag no struct holds, with a 4-byte value


def _add_unknown(frame: bytes, at: int) -> bytes:
    """``frame`` with one more (unknown) field in the tagged section whose count is at ``at``."""
    count, after = read_uvarint(frame, at)
    return frame[:at] + _uvarint(count + 1) + UNKNOWN + frame[after:]


def variants(key: int, version: int, values: dict) -> dict[str, bytes]:
    """The request's frame (no size prefix) as sent, with an unknown tag at its top level, and with one
    in every section."""
    frame = encode_request(key, version, values, 1, "bench")[4:]
    _, head = codec.decode(codec.request_header_class(key, version), frame)
    sections = [head - 1] + [
        head + f.pos for f in length_fields(codec.request_class(key, version), frame[head:]) if f.what == "tags"
    ]
    everywhere = frame
    for at in reversed(sections):
        everywhere = _add_unknown(everywhere, at)
    return {
        "clean": frame,
        "top": _add_unknown(frame, len(frame) - 1),
        "everywhere": everywhere,
        "sections": bytes([len(sections)]),
    }


def main(rounds: int = 9, reps: int = 5_000) -> None:
    print(
        "| request | sections | clean | one unknown tag (top level) | one in every section |\n| --- | ---: | ---: | "
        "---: | ---: |"
    )
    for name, (key, version, values) in requests().items():
        frames = variants(key, version, values)
        sections = frames.pop("sections")[0]
        clean = parse_request(frames["clean"], key, version)
        assert all(parse_request(f, key, version) == clean for f in frames.values())  # also resolves the readers once
        best = dict.fromkeys(frames, float("inf"))
        for _ in range(rounds):
            for k, f in frames.items():
                best[k] = min(best[k], _per_decode_us(f, key, version, reps))
        c, t, e = best["clean"], best["top"], best["everywhere"]
        print(f"| {name} | {sections} | {c:.2f} µs | {t:.2f} µs ({t / c:.1f}x) | {e:.2f} µs ({e / c:.1f}x) |")


if __name__ == "__main__":
    main()
