"""Flexible requests carrying tagged fields kio does not know are answered as Kafka answers them (it
skips such fields), and the connection stays open for the next request; a malformed tag section closes
the connection with one WARNING line and no traceback (groupd/protocol/unknown_tags.py)."""

from __future__ import annotations

import asyncio
import logging
import struct

from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request
from tests.unit.test_unknown_tags import CLIENT, _header_len, replace_empty, section


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes) -> bytes:
    """Send one request (header and body, no size) and return the answer's bytes (no size)."""
    writer.write(struct.pack(">i", len(payload)) + payload)
    await writer.drain()
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    return await asyncio.wait_for(reader.readexactly(size), 10)


def request(key: int, version: int, body: dict, correlation_id: int) -> bytes:
    """The frame of a request given as newest-shape values (nested entities as dicts too)."""
    entity = codec._from_values(codec.request_class(key, version), body)
    return encode_request(key, version, entity, correlation_id, CLIENT)[4:]


def answer_of(key: int, version: int, data: bytes):
    _, used = codec.decode(codec.response_header_class(key, version), data)
    return codec.decode(codec.response_class(key, version), data, used)[0]


API_VERSIONS = {"client_software_name": "tagged", "client_software_version": "1"}
METADATA = {"topics": [{"topic_id": None, "name": "no-such-topic"}, {"topic_id": None, "name": "nor-this"}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def _tagged_everywhere(key: int, version: int, frame: bytes, nested_ends: list[int]) -> bytes:
    """``frame`` with unknown tags in its header's section, at ``nested_ends`` and at its top level."""
    tagged = replace_empty(frame, len(frame) - 1, section((11, b"top"), (12, b"")))
    for at in sorted(nested_ends, reverse=True):
        tagged = replace_empty(tagged, at, section((21, b"element")))
    return replace_empty(tagged, _header_len(key, version) - 1, section((3, b"\x01\x02\x03")))


async def test_unknown_tags_are_skipped_the_answer_is_the_same_and_the_connection_stays_open(broker):
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    try:
        clean = request(ApiKey.API_VERSIONS, 3, API_VERSIONS, 1)
        expected = await exchange(reader, writer, clean)
        assert await exchange(reader, writer, _tagged_everywhere(ApiKey.API_VERSIONS, 3, clean, [])) == expected

        clean = request(ApiKey.METADATA, 12, METADATA, 2)
        expected = await exchange(reader, writer, clean)
        first_topic_ends = clean.index(b"no-such-topic") + len(b"no-such-topic")  # each topic: id, name, its section
        second_topic_ends = clean.index(b"nor-this") + len(b"nor-this")
        tagged = _tagged_everywhere(ApiKey.METADATA, 12, clean, [first_topic_ends, second_topic_ends])
        assert await exchange(reader, writer, tagged) == expected
        assert b"no-such-topic" in expected and b"nor-this" in expected

        assert {t.error_code for t in answer_of(ApiKey.METADATA, 12, expected).topics} == {
            3
        }  # UNKNOWN_TOPIC_OR_PARTITION

        # and the connection still serves a plain request
        assert (
            answer_of(
                ApiKey.API_VERSIONS, 3, await exchange(reader, writer, request(ApiKey.API_VERSIONS, 3, API_VERSIONS, 3))
            ).error_code
            == 0
        )
    finally:
        writer.close()


async def test_an_offset_commit_with_unknown_tags_in_its_partitions_is_stored(broker):
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    try:
        # a topic to commit against
        create = {
            "topics": [
                {
                    "name": "tagged-commits",
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 5000,
            "validate_only": False,
        }
        await exchange(reader, writer, request(ApiKey.CREATE_TOPICS, 5, create, 1))
        partitions = [
            {
                "partition_index": i,
                "committed_offset": 40 + i,
                "committed_leader_epoch": -1,
                "committed_metadata": f"meta{i}",
            }
            for i in range(2)
        ]
        commit = {
            "group_id": "tagged-group",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": "tagged-commits", "partitions": partitions}],
        }
        clean = request(ApiKey.OFFSET_COMMIT, 8, commit, 2)
        ends = [clean.index(f"meta{i}".encode()) + len(f"meta{i}") for i in range(2)]  # each partition's section
        answer = answer_of(
            ApiKey.OFFSET_COMMIT,
            8,
            await exchange(reader, writer, _tagged_everywhere(ApiKey.OFFSET_COMMIT, 8, clean, ends)),
        )
        assert [p.error_code for p in answer.topics[0].partitions] == [0, 0]

        fetch = {
            "group_id": "tagged-group",
            "topics": [{"name": "tagged-commits", "partition_indexes": [0, 1]}],
            "require_stable": False,
        }
        fetched = answer_of(
            ApiKey.OFFSET_FETCH, 7, await exchange(reader, writer, request(ApiKey.OFFSET_FETCH, 7, fetch, 3))
        )
        assert [(p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
            (40, "meta0"),
            (41, "meta1"),
        ]
    finally:
        writer.close()


async def test_a_malformed_tag_section_closes_with_one_warning_and_no_traceback(broker, caplog):
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    clean = request(ApiKey.API_VERSIONS, 3, API_VERSIONS, 1)
    past_the_end = clean[:-1] + bytes.fromhex("0107 05abcd")  # a 5-byte value with 2 bytes left
    with caplog.at_level(logging.DEBUG):
        writer.write(struct.pack(">i", len(past_the_end)) + past_the_end)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
        await asyncio.sleep(0.1)
    writer.close()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    line = warnings[0].getMessage()
    assert "cannot decode api 18 v3: Unparseable: unknown tagged field 7: error reading byte array of 5 byte(s)" in line
    assert not any(r.exc_info for r in caplog.records)

    # everyone else is still served
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    assert answer_of(ApiKey.API_VERSIONS, 3, await exchange(reader, writer, clean)).error_code == 0
    writer.close()
