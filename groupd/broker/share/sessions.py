"""Share sessions (Kafka's ShareSessionCache, ShareSession, CachedSharePartition and the session part of
SharePartitionManager.newContext/acknowledgeSessionUpdate): one session per (group, member), the
partitions it fetches, its epoch, and which partitions an incremental response must carry.

Pure: no I/O. The manager releases the records of a session that ends (epoch -1, a new epoch 0, a
disconnect); this module only says which session ended and on which partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_EPOCH = 2**31 - 1

INVALID_REQUEST = 42
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
SHARE_SESSION_LIMIT_REACHED = 133

TopicIdPartition = tuple[uuid.UUID, int]
SessionKey = tuple[str, str]  # (group id, member id)


class SessionError(Exception):
    """A request's session Kafka refuses; ``code`` is the top-level error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: 0 -> 1, ..., Integer.MAX_VALUE wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    connection: str
    epoch: int = 1
    # the session's partitions in order; True = the next response must carry it (new, or had an error)
    partitions: dict[TopicIdPartition, bool] = field(default_factory=dict)
    # each partition's topic name when it joined the session (None: its id was unknown then), as
    # CachedSharePartition keeps it: a later fetch answers UNKNOWN_TOPIC_ID only for those
    names: dict[TopicIdPartition, str | None] = field(default_factory=dict)

    def update(self, wanted: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition],
               names: Mapping[TopicIdPartition, str | None]) -> None:
        for tp in wanted:
            if tp not in self.partitions:
                self.partitions[tp] = True
                self.names[tp] = names.get(tp)
        for tp in forgotten:
            self.partitions.pop(tp, None)
            self.names.pop(tp, None)

    def must_respond(self, tp: TopicIdPartition, has_records: bool, error: int) -> bool:
        """CachedSharePartition.maybeUpdateResponseData: records, an error, or the first answer after an
        error (or after being added) go into an incremental response; quiet partitions stay out."""
        respond = has_records
        if self.partitions.get(tp):
            respond = True
            self.partitions[tp] = False
        if error:
            self.partitions[tp] = True
            respond = True
        if respond and has_records and tp in self.partitions:  # moved to the end, as Kafka re-adds it
            self.partitions[tp] = self.partitions.pop(tp)
        return respond


@dataclass(slots=True)
class FetchContext:
    """What a ShareFetch works on: the partitions to fetch and whether the answer is incremental."""

    session: ShareSession | None
    partitions: list[TopicIdPartition]
    final: bool = False  # epoch -1: acknowledge, fetch nothing, close the session
    incremental: bool = False


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2_000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}
        self._by_connection: dict[str, list] = {}  # connection -> [key, stale]

    def get(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.get(key)

    def remove(self, key: SessionKey) -> ShareSession | None:
        session = self.sessions.pop(key, None)
        if session is not None:
            entry = self._by_connection.get(session.connection)
            if entry is not None and entry[0] == key:
                entry[1] = True  # stale: a later disconnect of that connection must not end a newer session
        return session

    def new_context(self, group: str, member: str, epoch: int, wanted: list[TopicIdPartition],
                    forgotten: list[TopicIdPartition], acks_present: bool, connection: str,
                    names: Mapping[TopicIdPartition, str | None] | None = None) -> FetchContext:
        """SharePartitionManager.newContext. A new epoch 0 replaces the member's session without releasing
        its records (Kafka leaves them to their locks). Raises SessionError."""
        key = (group, member)
        if epoch == FINAL_EPOCH:
            session = self.sessions.get(key)
            if session is None:
                raise SessionError(SHARE_SESSION_NOT_FOUND, f"Share session for {key} not found")
            return FetchContext(session, [], final=True)
        if epoch == INITIAL_EPOCH:
            if acks_present:
                raise SessionError(INVALID_REQUEST, "Acknowledge data present in Initial Fetch Request")
            self.remove(key)
            if len(self.sessions) >= self.max_sessions:
                raise SessionError(SHARE_SESSION_LIMIT_REACHED, "The limit of share sessions has been reached")
            session = ShareSession(key, connection, next_epoch(INITIAL_EPOCH), dict.fromkeys(wanted, False),
                                   {tp: (names or {}).get(tp) for tp in wanted})
            self.sessions[key] = session
            self._by_connection[connection] = [key, False]
            return FetchContext(session, list(wanted))
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(SHARE_SESSION_NOT_FOUND, f"Share session for {key} not found")
        if session.epoch != epoch:
            raise SessionError(INVALID_SHARE_SESSION_EPOCH, f"expected epoch {session.epoch}, but got {epoch}")
        session.update(wanted, forgotten, names or {})
        session.epoch = next_epoch(session.epoch)
        return FetchContext(session, list(session.partitions), incremental=True)

    def acknowledge_update(self, group: str, member: str, epoch: int) -> ShareSession:
        """SharePartitionManager.acknowledgeSessionUpdate: ShareAcknowledge shares the epoch sequence."""
        if epoch == INITIAL_EPOCH:
            raise SessionError(INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot use the initial epoch")
        session = self.sessions.get((group, member))
        if session is None:
            raise SessionError(SHARE_SESSION_NOT_FOUND, f"Share session for {(group, member)} not found")
        if epoch == FINAL_EPOCH:
            return session
        if session.epoch != epoch:
            raise SessionError(INVALID_SHARE_SESSION_EPOCH, f"expected epoch {session.epoch}, but got {epoch}")
        session.epoch = next_epoch(session.epoch)
        return session

    def disconnected(self, connection: str) -> tuple[str | None, ShareSession | None]:
        """ShareSessionCache's disconnect listener: (the group of the connection's last session, that
        session if it was still live: it ends now; None if it was closed already or replaced from
        another connection)."""
        entry = self._by_connection.pop(connection, None)
        if entry is None:
            return None, None
        return entry[0][0], (None if entry[1] else self.remove(entry[0]))

    def group_has_sessions(self, group: str) -> bool:
        return any(key[0] == group for key in self.sessions)

    def partition_count(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())
