"""KIP-951: an answer that tells a client it asked the wrong node also names the right one, so that the
client redirects without a Metadata round first.

Kafka's KafkaApis fills a partition's CurrentLeader (the leader's id and epoch) and adds the leader's
endpoint, on the listener the request came in on, to the answer's NodeEndpoints: in Produce v10+ for
NOT_LEADER_OR_FOLLOWER, in Fetch v16+ for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH. A leader it does
not know is answered id -1, epoch -1, no endpoint, and a leader without the request's listener by its id
and epoch with no endpoint (its getCurrentLeader). A single node leads everything it has, so only a
cluster (docs/cluster.md) answers these errors with another node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupd.broker.dataplane.leader_epochs import LEADER_EPOCH
from groupd.protocol import codec

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.broker.dispatch import RequestContext


class CurrentLeaders:
    """The CurrentLeader entities of one answer and the NodeEndpoints they need, each node once.

    A single node leads everything, at epoch 0; in a cluster the leader is the partition's lease holder.
    ``itself_unknown``: in a cluster, a leader that is this very node is answered as unknown (-1, -1, no
    endpoint), as ShareFetch and ShareAcknowledge answer it: the node cannot serve a share-partition it
    holds the lease of, so naming itself would send the client back to it."""

    def __init__(self, broker: Broker, ctx: RequestContext, itself_unknown: bool = False) -> None:
        self.broker = broker
        self.ctx = ctx
        self.itself_unknown = itself_unknown
        self._leader_cls = ctx.nested("LeaderIdAndEpoch")
        self._endpoints: dict[int, Any] = {}

    def of(self, topic: str | None, partition: int) -> Any:
        """The partition's CurrentLeader (its endpoint, on the request's listener, kept for ``endpoints``);
        a partition of no known topic: the unknown leader (-1, -1)."""
        broker, cluster = self.broker, self.broker.cluster
        leader: int | None = broker.node_id
        if cluster is not None and topic is not None:
            leader = cluster.leader(topic, partition)
            if self.itself_unknown and leader == broker.node_id:
                leader = None
        if topic is None or leader is None:
            return codec.make(self._leader_cls, leader_id=-1, leader_epoch=-1)
        if cluster is None:
            address, epoch = broker.advertised_for(self.ctx.listener), LEADER_EPOCH
        else:
            address, epoch = cluster.endpoint(leader, self.ctx.listener), cluster.view_epoch(topic, partition)
        if address is not None and leader not in self._endpoints:
            self._endpoints[leader] = codec.make(
                self.ctx.nested("NodeEndpoint"), node_id=leader, host=address[0], port=address[1], rack=None
            )
        return codec.make(self._leader_cls, leader_id=leader, leader_epoch=epoch)

    def endpoints(self) -> tuple:
        return tuple(self._endpoints.values())
