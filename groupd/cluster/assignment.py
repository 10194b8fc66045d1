"""Which live node should own which resource: balanced, and moving as little as it can.

Every node computes the same target from the same view (the live nodes, who owns what), so each can act
on its own part alone: take what the target gives it, hand over what the target gives another node.
Balanced means every node's count of each topic's partitions is ``partitions // nodes`` or one more, and
so is its count of all resources; a node keeps what it already owns up to its quota, so a node joining
takes only its share and a node leaving frees only its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Resource = tuple[str, int]  # (topic, partition): a data partition or a shard of an internal topic


def target(resources: Iterable[Resource], live: Iterable[int], owners: Mapping[Resource, int]) -> dict[Resource, int]:
    """The owner each resource should have. ``owners`` holds the current owner of the resources whose
    lease is held (an owner not in ``live`` is ignored). Empty when no node is live.

    Topic by topic (by name), as Kafka spreads each topic's partition leaders over the brokers: every node
    gets ``partitions // nodes`` of the topic, and the remainder's one more each goes to the nodes with the
    fewest resources so far (then to those holding more of the topic: fewest moves; then the lower id), so
    each topic is spread and the totals differ by one at most."""
    nodes = sorted(set(live))
    if not nodes:
        return {}
    by_topic: dict[str, list[Resource]] = {}
    for r in sorted(set(resources)):
        by_topic.setdefault(r[0], []).append(r)
    total = dict.fromkeys(nodes, 0)
    out: dict[Resource, int] = {}
    for ordered in by_topic.values():
        held: dict[int, list[Resource]] = {n: [] for n in nodes}
        for r in ordered:
            owner = owners.get(r)
            if owner in held:
                held[owner].append(r)
        base, extra = divmod(len(ordered), len(nodes))
        by_need = sorted(nodes, key=lambda n: (total[n], -len(held[n]), n))
        quota = {n: base + (1 if i < extra else 0) for i, n in enumerate(by_need)}
        spare: list[int] = []
        for n in nodes:
            kept = held[n][: quota[n]]
            for r in kept:
                out[r] = n
            spare += [n] * (quota[n] - len(kept))
            total[n] += quota[n]
        free = [r for r in ordered if r not in out]
        for r, n in zip(free, spare, strict=True):
            out[r] = n
    return out
