"""Two in-process cluster nodes whose lease is long enough that neither heartbeats by itself: each step
is taken by hand (``step``), so "a node has not followed yet" is a fact in a test, not a race."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupd.broker.app import Broker
from groupd.broker.config import Config
from tests.cluster.test_broker_nodes import metadata, node_config
from tests.harness import WireClient

LONG_LEASE_MS = 120_000  # heartbeats every 30 s: none happens unless the test steps
STATE_SHARDS = 3  # share.coordinator.state.topic.num.partitions: few share-state partitions


def stepped(config: Config) -> Broker:
    """A cluster node that follows others only when stepped: neither its heartbeat (the long lease) nor the
    database's notifications of metadata changes (groupd/cluster/changes.py) move it by itself."""
    broker = Broker(config)
    assert broker.cluster is not None
    broker.cluster.follow_changes = False
    return broker


async def step(*nodes: Broker) -> None:
    """One heartbeat of each node, in order; the data partitions it followed or took are open (they open off
    the loop) when it returns."""
    for b in nodes:
        assert b.cluster is not None
        await b.cluster.member.step()
        await b.cluster.opened()


@dataclass
class TwoNodes:
    """Nodes 1 and 2 by id, a client of each, and the ids a test stopped itself (the rest stop after it)."""

    nodes: dict[int, Broker]
    clients: dict[int, WireClient]
    stopped: set[int] = field(default_factory=set)

    async def stop(self, node: int) -> None:
        await self.nodes[node].stop()
        self.stopped.add(node)


@contextlib.asynccontextmanager
async def two_started(
    tmp_path: Path, url: str, *, by_hand: bool = True, **config: str
) -> AsyncIterator[TwoNodes]:
    """Two nodes with a long lease (stepped by hand), four partitions a topic, few share-state partitions;
    ``config``: more keys for both. ``by_hand`` False: they follow the database's notifications of changes
    by themselves (only those)."""
    more = {"num.partitions": "4", "share.coordinator.state.topic.num.partitions": str(STATE_SHARDS), **config}
    make = stepped if by_hand else Broker
    one = make(node_config(tmp_path, url, 1, LONG_LEASE_MS, **more))
    two = make(node_config(tmp_path, url, 2, LONG_LEASE_MS, **more))
    await one.start()
    await two.start()
    both = TwoNodes({1: one, 2: two}, {1: await WireClient.connect(one.port), 2: await WireClient.connect(two.port)})
    try:
        yield both
    finally:
        for c in both.clients.values():
            await c.close()
        for n in (2, 1):
            if n not in both.stopped:
                await both.nodes[n].stop()


async def settled(both: TwoNodes, topic: str) -> Any:
    """The usual start: both nodes registered and seen live (a beat each), ``topic`` auto-created at node 1,
    then two more beats each, in which both follow it and each takes and opens its share of the partitions
    (both then agree on every leader). Node 1's Metadata entry of the topic."""
    one, two = both.nodes[1], both.nodes[2]
    await step(one, two)
    created = (await metadata(both.clients[1], topic)).topics[0]
    await step(one, two, one, two)
    return created


def hold_reopening(node: Broker) -> asyncio.Event:
    """Make the data partitions the node takes wait before they are reopened until the returned event is
    set: "taken, not yet served" held as long as a test needs it."""
    real = node.partitions.open_off_loop
    go_on = asyncio.Event()

    async def held(keys: list[tuple[str, int]], replace: bool) -> None:
        await go_on.wait()
        await real(keys, replace)

    node.partitions.open_off_loop = held  # type: ignore[method-assign]
    return go_on
