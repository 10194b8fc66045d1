"""Share sessions (Kafka's ShareSessionCache and newContext): scenarios 37, 38 and 46 of the spec."""

from __future__ import annotations

import uuid

import pytest

from groupd.broker.share.sessions import (
    INVALID_REQUEST,
    INVALID_SHARE_SESSION_EPOCH,
    MAX_EPOCH,
    SHARE_SESSION_LIMIT_REACHED,
    SHARE_SESSION_NOT_FOUND,
    SessionError,
    ShareSessionCache,
    next_epoch,
)

T = uuid.UUID(int=7)
P0, P1 = (T, 0), (T, 1)


def code(fn, *args) -> int:
    with pytest.raises(SessionError) as e:
        fn(*args)
    return e.value.code


def test_epoch_0_with_acks_is_invalid_request():
    cache = ShareSessionCache()
    assert code(cache.new_context, "g", "m", 0, [P0], [], True, "c1") == INVALID_REQUEST


def test_unknown_session_and_wrong_epoch():
    cache = ShareSessionCache()
    assert code(cache.new_context, "g", "m", 3, [P0], [], False, "c1") == SHARE_SESSION_NOT_FOUND
    cache.new_context("g", "m", 0, [P0], [], False, "c1")
    assert cache.get(("g", "m")).epoch == 1
    assert code(cache.new_context, "g", "m", 2, [], [], False, "c1") == INVALID_SHARE_SESSION_EPOCH
    ctx = cache.new_context("g", "m", 1, [], [], False, "c1")
    assert ctx.incremental and ctx.partitions == [P0]
    cache.new_context("g", "m", 2, [], [], False, "c1")


def test_acknowledge_shares_the_epoch_sequence():
    cache = ShareSessionCache()
    assert code(cache.acknowledge_update, "g", "m", 0) == INVALID_SHARE_SESSION_EPOCH
    assert code(cache.acknowledge_update, "g", "m", 1) == SHARE_SESSION_NOT_FOUND
    cache.new_context("g", "m", 0, [P0], [], False, "c1")
    cache.acknowledge_update("g", "m", 1)
    assert code(cache.new_context, "g", "m", 1, [], [], False, "c1") == INVALID_SHARE_SESSION_EPOCH
    cache.new_context("g", "m", 2, [], [], False, "c1")
    cache.acknowledge_update("g", "m", -1)  # final: no epoch check, no advance
    assert cache.get(("g", "m")).epoch == 3


def test_final_epoch_without_session_is_not_found():
    cache = ShareSessionCache()
    assert code(cache.new_context, "g", "m", -1, [], [], True, "c1") == SHARE_SESSION_NOT_FOUND
    cache.new_context("g", "m", 0, [P0], [], False, "c1")
    ctx = cache.new_context("g", "m", -1, [], [], True, "c1")
    assert ctx.final and ctx.partitions == []


def test_session_limit():
    cache = ShareSessionCache(max_sessions=1)
    cache.new_context("g", "a", 0, [P0], [], False, "c1")
    assert code(cache.new_context, "g", "b", 0, [P0], [], False, "c2") == SHARE_SESSION_LIMIT_REACHED
    cache.new_context("g", "a", 0, [P0], [], False, "c3")  # replacing one's own session is fine


def test_forgotten_and_added_partitions_and_incremental_responses():
    cache = ShareSessionCache()
    ctx = cache.new_context("g", "m", 0, [P0], [], False, "c1")
    session = ctx.session
    assert not ctx.incremental
    ctx = cache.new_context("g", "m", 1, [P1], [P0], False, "c1")
    assert ctx.partitions == [P1]
    assert session.must_respond(P1, False, 0)  # newly added: answered once
    assert not session.must_respond(P1, False, 0)  # then only with records or an error
    assert session.must_respond(P1, True, 0)
    assert session.must_respond(P1, False, 100)
    assert session.must_respond(P1, False, 0)  # the first answer after an error


def test_disconnect_ends_only_the_live_session_of_that_connection():
    cache = ShareSessionCache()
    cache.new_context("g", "m", 0, [P0], [], False, "c1")
    cache.new_context("g", "m", 0, [P0], [], False, "c2")  # replaced from another connection
    assert cache.disconnected("c1") == ("g", None)
    assert cache.get(("g", "m")) is not None and cache.group_has_sessions("g")
    group, ended = cache.disconnected("c2")
    assert group == "g" and ended is not None and ended.partitions == {P0: False} and ended.names == {P0: None}
    assert cache.get(("g", "m")) is None and not cache.group_has_sessions("g")
    assert cache.disconnected("c3") == (None, None)


def test_topic_names_are_kept_as_partitions_join():
    cache = ShareSessionCache()
    ctx = cache.new_context("g", "m", 0, [P0], [], False, "c1", {P0: "t"})
    cache.new_context("g", "m", 1, [P0, P1], [], False, "c1", {P0: "renamed", P1: None})
    assert ctx.session.names == {P0: "t", P1: None}
    cache.new_context("g", "m", 2, [], [P1], False, "c1")
    assert ctx.session.names == {P0: "t"}


def test_epoch_wraps_to_1():
    assert next_epoch(0) == 1 and next_epoch(MAX_EPOCH) == 1

