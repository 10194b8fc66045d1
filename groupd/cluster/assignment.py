"""Which live node should own which resource: balanced, and moving as little as it can.

Every node computes the same target from the same view (the live nodes, who owns what), so each can act
on its own part alone: take what the target gives it, hand over what the target gives another node.
Balanced means every node's count is ``resources // nodes`` or one more; a node keeps what it already owns
up to its quota, so a node joining takes only its share and a node leaving frees only its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Resource = tuple[str, int]  # (topic, partition): a data partition or a shard of an internal topic


def target(resources: Iterable[Resource], live: Iterable[int], owners: Mapping[Resource, int]) -> dict[Resource, int]:
    """The owner each resource should have. ``owners`` holds the current owner of the resources whose
    lease is held (an owner not in ``live`` is ignored). Empty when no node is live."""
    nodes = sorted(set(live))
    ordered = sorted(set(resources))
    if not nodes:
        return {}
    held: dict[int, list[Resource]] = {n: [] for n in nodes}
    for r in ordered:
        owner = owners.get(r)
        if owner in held:
            held[owner].append(r)
    base, extra = divmod(len(ordered), len(nodes))
    # the nodes that own the most keep the extra one each (fewest moves); ties go to the lower id
    by_load = sorted(nodes, key=lambda n: (-len(held[n]), n))
    quota = {n: base + (1 if i < extra else 0) for i, n in enumerate(by_load)}
    out: dict[Resource, int] = {}
    for n in nodes:
        for r in held[n][: quota[n]]:
            out[r] = n
    spare = [n for n in nodes for _ in range(quota[n] - sum(1 for r in held[n][: quota[n]]))]
    free = [r for r in ordered if r not in out]
    for r, n in zip(free, spare, strict=True):
        out[r] = n
    return out
