"""KIP-951: an answer that tells a client it asked the wrong node also names the right one, so that the
client redirects without a Metadata round first.

Kafka's KafkaApis fills a partition's CurrentLeader (the leader's id and epoch) and adds the leader's
endpoint, on the listener the request came in on, to the answer's NodeEndpoints: in Produce v10+ for
NOT_LEADER_OR_FOLLOWER, in Fetch v16+ for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH. A leader it does
not know is answered id -1, epoch -1, no endpoint (its getCurrentLeader). A single node leads everything
it has, so only a cluster (docs/cluster.md) answers these errors with another node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupd.protocol import codec

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.broker.dispatch import RequestContext


class CurrentLeaders:
    """The CurrentLeader entities of one answer and the NodeEndpoints they need, each node once."""

    def __init__(self, broker: Broker, ctx: RequestContext) -> None:
        self.broker = broker
        self.ctx = ctx
        self._leader_cls = ctx.nested("LeaderIdAndEpoch")
        self._endpoints: dict[int, Any] = {}

    def of(self, topic: str | None, partition: int) -> Any:
        """The partition's CurrentLeader (its endpoint kept for ``endpoints``)."""
        broker = self.broker
        leader: int | None = None
        epoch = -1
        if topic is not None and broker.cluster is not None:
            leader = broker.cluster.leader(topic, partition)
            if leader is not None:
                epoch = broker.cluster.view_epoch(topic, partition)
        if leader is None:
            return codec.make(self._leader_cls, leader_id=-1, leader_epoch=-1)
        address = (
            broker.advertised_for(self.ctx.listener)
            if leader == broker.node_id
            else broker.cluster.address(leader)
            if broker.cluster is not None
            else None
        )
        if address is not None and leader not in self._endpoints:
            self._endpoints[leader] = codec.make(
                self.ctx.nested("NodeEndpoint"), node_id=leader, host=address[0], port=address[1], rack=None
            )
        return codec.make(self._leader_cls, leader_id=leader, leader_epoch=epoch)

    def endpoints(self) -> tuple:
        return tuple(self._endpoints.values())
