"""Fencing: every write of a partition checks, in its own transaction, that this node still holds the
partition's lease at the epoch it acquired (groupd/cluster/ keeps the leases; docs/cluster.md).

Single-node use has no fence (``Database.fence`` None): nothing is checked and nothing costs more. In a
cluster every partition the engine opens is named to the fence; a write of a partition whose lease this
node does not hold, or holds at another epoch than the database's, raises Fenced and the transaction rolls
back, so nothing of it is stored and its waiters are answered with the error, never acknowledged.

The check is one statement, ``groupd_fence()`` (schema.py), that raises (SQLSTATE GD001) unless every lease
matches: it needs no answer before the write's INSERT and COMMIT, so the pipeline sends the three together
and a fenced write costs a cluster round no round trip more than a single node's. The check locks the lease
rows it read (FOR SHARE): a takeover (an UPDATE of the row) that began first
makes the check wait and then see the new epoch; one that comes later waits for the write to commit, and
the new owner, which loads the partition after its takeover, sees that write. The database serialises the
two; no clock takes part.
"""

from __future__ import annotations

import psycopg

from groupd.storage.errors import StorageError

Resource = tuple[str, int]

CHECK = "SELECT groupd_fence(%s::bigint[], %s::bigint[], %s)"
FENCED_SQLSTATE = "GD001"  # groupd_fence()'s refusal


class Fenced(StorageError):
    """A write by a node that does not (or no longer) own the partition's lease: refused, never stored.
    ``pids``: the refused partitions (``groupd_partition.id``), when known."""

    def __init__(self, message: str, pids: frozenset[int] = frozenset()) -> None:
        super().__init__(message)
        self.pids = pids


class Fence:
    """The epochs this node writes its partitions at, by partition id (``groupd_partition.id``)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.resources: dict[int, Resource] = {}  # every partition the engine opened: pid -> (topic, partition)
        self.epochs: dict[Resource, int] = {}  # the leases this node holds (groupd/cluster/ sets them)

    def opened(self, pid: int, resource: Resource) -> None:
        self.resources[pid] = resource

    def hold(self, resource: Resource, epoch: int) -> None:
        self.epochs[resource] = epoch

    def drop(self, resource: Resource) -> None:
        self.epochs.pop(resource, None)

    def arguments(self, pids: list[int]) -> tuple[list[int], list[int], int] | None:
        """groupd_fence()'s arguments for a write of ``pids`` (None when none is a partition this engine
        opened in a cluster: nothing to check); Fenced at once for one whose lease this node does not hold."""
        fenced = list(dict.fromkeys(pid for pid in pids if pid in self.resources))
        if not fenced:
            return None
        epochs = []
        for pid in fenced:
            epoch = self.epochs.get(self.resources[pid])
            if epoch is None:
                name = _name(self.resources[pid])
                raise Fenced(f"node {self.node_id} does not own {name}: write refused", frozenset({pid}))
            epochs.append(epoch)
        return fenced, epochs, self.node_id

    def check(self, conn: psycopg.Connection, pids: list[int]) -> None:
        """Fenced unless this node holds every partition of ``pids`` at its epoch, as the database says in
        ``conn``'s transaction (the rows stay locked until it ends): at once for a partition this node holds
        no lease of, else when the transaction ends (``refused`` turns the database's error into Fenced)."""
        arguments = self.arguments(pids)
        if arguments is not None:
            conn.execute(CHECK, arguments)  # raises at the transaction's end: refused()

    def refused(self, exc: psycopg.Error) -> Fenced | None:
        """The Fenced error a failed transaction's ``exc`` stands for when it was groupd_fence()'s refusal."""
        if exc.sqlstate != FENCED_SQLSTATE:
            return None
        pids = frozenset(int(p) for p in (exc.diag.message_detail or "").split() if p.isdigit())
        return Fenced(f"node {self.node_id} {exc.diag.message_primary}: write refused", pids)


def _name(r: Resource) -> str:
    return f"{r[0]}-{r[1]}"
