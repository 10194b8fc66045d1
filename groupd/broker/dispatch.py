"""What every handler is given and gives back: the request's context, and its ``Answer``.

A handler is a plain function; its answer is one of
- a ``Response``: the response entity of the request's version, or its body already written
  (``Encoded``), sent at once;
- a ``Later``: the response comes when something settles it (a coordinator's flush round, or a task that
  waits for durability, data or another coordinator's call: ``later_of``, ``waits``);
- None: Kafka sends no response (Produce with acks=0).
So a request answered at once costs no task, and the connection never steps a coroutine itself.
The routing table is ``broker/routes.py``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from kio.static.protocol import ResponsePayload

from groupd.coordinator.service import CoordinatorError
from groupd.protocol import codec
from groupd.protocol.request import Encoded, RequestHeader

if TYPE_CHECKING:
    from groupd.broker.app import Broker


class RequestContext:
    """One request's header, where it came from, and helpers to answer it in its version's shape.

    ``version`` is a plain attribute, not a property over the header: the group handlers read it several
    times a request (a rebalance's nine requests read it 42 times), and a property costs a Python frame
    each time."""

    __slots__ = ("header", "version", "client_host", "connection_id", "conn", "size")

    def __init__(
        self, header: RequestHeader, client_host: str, connection_id: str, conn: Any = None, size: int = 0
    ) -> None:
        self.header = header
        self.version: int = header.api_version
        self.client_host = client_host
        self.connection_id = connection_id
        self.conn = conn  # the Connection: its principal, and muting it for a quota
        self.size = size  # the request's bytes (after the length prefix), as Kafka measures a produce quota

    @property
    def listener(self) -> str | None:
        """Name of the listener the request came through (None: the first)."""
        return self.conn.listener if self.conn is not None else None

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def response_class(self) -> type:
        return codec.response_class(self.header.api_key, self.header.api_version)

    def respond(self, **values: Any) -> Any:
        """The response entity of this request's version, built from newest-shape values."""
        return codec.make(self.response_class, **values)

    def encoded(self, **values: Any) -> Encoded:
        """Like ``respond``, but the body is written at once, no entity built: for the answers of
        every rebalance (JoinGroup, SyncGroup), where building the entity cost as much as writing it,
        and for answers kept as bytes (Heartbeat). The error code is the top-level one; an answer
        whose errors sit in nested entries builds its ``Encoded`` itself (OffsetCommit)."""
        return Encoded(codec.encode_values(self.response_class, values), int(values.get("error_code", 0)))

    def nested(self, name: str) -> type:
        return codec.nested(self.response_class, name)

    def by_topic(
        self,
        topic_entity: str,
        partition_entity: str,
        rows: Any,
        parts_field: str = "partitions",
        key_field: str = "name",
    ) -> tuple:
        """Nest per-partition answers ``(topic, {partition fields})`` under their topics, in first-seen
        order; ``topic`` fills ``key_field`` (``topic_id`` where a version names topics by id)."""
        part_cls = self.nested(partition_entity)
        grouped: dict[Any, list[Any]] = {}
        for topic, fields in rows:
            grouped.setdefault(topic, []).append(codec.make(part_cls, **fields))
        topic_cls = self.nested(topic_entity)
        return tuple(codec.make(topic_cls, **{key_field: t, parts_field: tuple(ps)}) for t, ps in grouped.items())


class Later:
    """An answer that a callback brings (the end of a flush round), not a coroutine: a commit then
    costs no coroutine, no future and no loop turn of its own between its round and its answer.

    The coordinator's runtime delivers to it as to any waiter (``set_result``/``set_exception``, or a
    call with (payload, error)) once; ``finish`` turns that into the response entity. The connection
    listens for it, unless it came before the handler returned (then it answers at once).
    """

    __slots__ = ("finish", "payload", "error", "settled", "listener", "abandon")

    def __init__(self, finish: Callable[[Any, BaseException | None], Response]) -> None:
        self.finish = finish
        self.payload: Any = None
        self.error: BaseException | None = None
        self.settled = False
        self.listener: Callable[[Later], None] | None = None
        # called if the connection goes away first (a join may be parked for a whole rebalance)
        self.abandon: Callable[[], object] | None = None

    def __call__(self, payload: Any, error: BaseException | None) -> None:
        if self.settled:
            return
        self.settled, self.payload, self.error = True, payload, error
        if self.listener is not None:
            self.listener(self)

    # the runtime's Waiter: the payload of a token comes here with no adapter in between
    def done(self) -> bool:
        return self.settled

    def set_result(self, payload: Any) -> None:
        self(payload, None)

    def set_exception(self, error: BaseException) -> None:
        self(None, error)

    def answer(self) -> Response:
        return self.finish(self.payload, self.error)


Response: TypeAlias = ResponsePayload | Encoded
Answer: TypeAlias = Response | Later | None
Request = TypeVar("Request")


def answered_later(
    broker: Broker,
    group_id: str,
    handler: Callable[..., Any],
    request: Any,
    finish: Callable[[Any, BaseException | None], Response],
) -> Answer:
    """Run a core handler through the coordinator; the answer is ``finish(payload, None)`` once the
    payload is delivered, or ``finish(None, error)`` when the coordinator refuses (not its partition,
    still loading): a Later (the connection answers one already settled at once), or the refusal."""
    later = Later(finish)
    try:
        token = broker.coordinator.submit(group_id, handler, request, later)
    except CoordinatorError as exc:
        return finish(None, exc)
    later.abandon = functools.partial(broker.coordinator.abandon, token)
    return later


def later_of(awaitable: Awaitable[Any], then: Callable[[Any], Response] | None = None) -> Later:
    """An answer that has to wait on futures (a durable append, data to fetch): the Later settles with
    the awaitable's outcome (``then`` of it, if given); abandoning it cancels the awaitable, so a waiting
    handler unwinds as it would if its connection went away. A coroutine runs as a Task: only what
    really waits pays for one."""
    future = asyncio.ensure_future(awaitable)
    later = Later(functools.partial(_outcome, then))
    future.add_done_callback(functools.partial(_settle, later))
    later.abandon = future.cancel
    return later


def waits(
    handler: Callable[[Broker, RequestContext, Request], Awaitable[Response]],
) -> Callable[[Broker, RequestContext, Request], Answer]:
    """A handler written as a coroutine because it always waits (another coordinator's call, the share
    state's store): the routed handler answers with a Later of it."""

    @functools.wraps(handler)
    def plain(broker: Broker, ctx: RequestContext, req: Request) -> Answer:
        return later_of(handler(broker, ctx, req))

    return plain


def _settle(later: Later, future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        later(None, asyncio.CancelledError())
        return
    error = future.exception()
    later(None if error is not None else future.result(), error)


def _outcome(then: Callable[[Any], Response] | None, payload: Any, error: BaseException | None) -> Any:
    if error is not None:
        raise error
    return payload if then is None else then(payload)
