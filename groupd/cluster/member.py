"""One node's part in a cluster: the loop that heartbeats, renews, acquires and hands over, and what the
broker asks of it per request (is this resource mine to serve now? who owns that one?).

Every ``heartbeat_interval_ms`` a step reads the view (lease.py), decides, stops serving what it hands
over *before* releasing it, applies the decision in one transaction, and tells the broker what it
acquired (load it from the database, then serve) and what it lost (drop it). Serving is checked per
request against the node's own monotonic deadline, not only at the next step, so a node whose loop or
database is stuck stops serving in time by itself; the fence (the engine's) refuses its writes anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence

from groupd.cluster.assignment import Resource
from groupd.cluster.lease import LocalLeases, View, decide, heartbeat_interval_ms
from groupd.cluster.store import ClusterStore, ListenerEndpoint, NodeInfo
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.fencing import Fence

log = logging.getLogger("groupd.cluster")

WOKEN_STEP_GAP_S = 0.05


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClusterMember:
    def __init__(
        self,
        store: ClusterStore,
        fence: Fence | None,
        resources: Callable[[], Iterable[Resource]],
        *,
        on_acquired: Callable[[Resource, int], None],
        on_lost: Callable[[Resource], None],
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.store = store
        self.node_id = store.node_id
        self.fence = fence
        self.resources = resources
        self.on_acquired = on_acquired
        self.on_lost = on_lost
        self.clock = clock
        self.local = LocalLeases(store.lease_ms)
        self.view: View | None = None
        self.nodes: list[NodeInfo] = []
        self.leaving = False
        self.steps = self.takeovers = self.renewals = self.failures = 0
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._woken: asyncio.Event | None = None

    # ------------------------------------------------------------ what a request asks

    def serving(self, r: Resource) -> int | None:
        """The lease epoch this node serves ``r`` at, or None: not held, or past its own deadline."""
        return self.local.serving(r, self.clock())

    def owner(self, r: Resource) -> int | None:
        """The node that owns ``r`` as far as this node knows: itself while it serves ``r``, else the
        holder in the last view (None when nobody holds it, or the view says this node but it stopped)."""
        if self.serving(r) is not None:
            return self.node_id
        holder = self.view.holder(r) if self.view is not None else None
        return None if holder == self.node_id else holder

    def node(self, node_id: int) -> NodeInfo | None:
        """A live node's registration (its listeners) in the last view; None when it is not live there."""
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        return None

    # ------------------------------------------------------------ lifecycle

    async def start(self, endpoints: Sequence[ListenerEndpoint], rack: str | None = None) -> None:
        """Register with every advertised listener (StorageError when a live node holds this ``node.id``),
        take a first share, start the loop."""
        if not await asyncio.to_thread(self.store.register, endpoints, rack):
            raise StorageError(f"node.id {self.node_id} is held by another live node of the cluster")
        self._woken = asyncio.Event()
        await self.step()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        """Step now rather than at the next heartbeat (a topic was created or grown somewhere: its new
        partitions want owners). Wakes coalesce: however many come during a step, one more step follows."""
        if self._woken is not None:
            self._woken.set()

    async def stop(self) -> None:
        """Controlled shutdown: stop serving everything, then release it all in the database."""
        self.leaving = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for r in list(self.local.held):
            self._lose(r)
        try:
            await asyncio.to_thread(self.store.leave)
        except StorageError as exc:
            log.warning("node %d could not release its leases (they expire by themselves): %s", self.node_id, exc)

    async def _run(self) -> None:
        interval = heartbeat_interval_ms(self.store.lease_ms) / 1000
        woken = self._woken
        assert woken is not None  # start() made it
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await woken.wait()
                await asyncio.sleep(WOKEN_STEP_GAP_S)  # a storm of topic changes: a step every gap at most
            woken.clear()
            await self.step()

    async def step(self) -> None:
        """One heartbeat: expire what is past its deadline, read, decide, apply, tell the broker."""
        self.steps += 1
        now = self.clock()
        for r in [r for r, h in self.local.held.items() if now >= h.serve_until]:
            log.warning("node %d stops serving %s-%d: its lease could not be renewed in time", self.node_id, *r)
            self._lose(r)
        sent = self.clock()
        try:
            wanted = list(self.resources())  # reads the topics from the database too: inside, as a failed beat
            view, nodes = await asyncio.to_thread(self._read, wanted)
            if view is None:
                log.error(
                    "node %d: another process registered as node.id %d: serving nothing", self.node_id, self.node_id
                )
                for r in list(self.local.held):
                    self._lose(r)
                return
            decision = decide(self.node_id, view, wanted, self.leaving, serving=list(self.local.held))
            for r, _epoch in decision.release:
                self._lose(r)  # stop serving before the database lets another node take it
            held = await asyncio.to_thread(self.store.apply, decision)
        except StorageError as exc:
            self.failures += 1
            if not self._failing:
                log.warning("node %d: heartbeat failed (retrying every beat): %s", self.node_id, exc)
            self._failing = True
            return
        if self._failing:
            log.info("node %d: heartbeats succeed again", self.node_id)
        self._failing = False
        self.view, self.nodes = view, nodes
        for r, _epoch in decision.renew:
            if r not in held:
                self._lose(r)
        self.renewals += sum(1 for r, _e in decision.renew if r in held)
        for r, epoch in sorted(held.items()):
            before = self.local.held.get(r)
            self.local.granted(r, epoch, sent)
            if self.fence is not None:
                self.fence.hold(r, epoch)
            if before is None or before.epoch != epoch:
                self.takeovers += 1
                self.on_acquired(r, epoch)

    def _read(self, wanted: list[Resource]) -> tuple[View | None, list[NodeInfo]]:
        view = self.store.tick(wanted)
        return view, (self.store.live_nodes() if view is not None else [])

    def _lose(self, r: Resource) -> None:
        if self.fence is not None:
            self.fence.drop(r)
        if self.local.lost(r) is not None:
            self.on_lost(r)
