"""Several groupd nodes over one PostgreSQL database (docs/cluster.md).

Nodes register and heartbeat in the database; each data partition and each shard of the internal topics
(a *resource*, named ``topic-partition`` as Kafka names a partition) has one owner at a time through a
lease with an epoch kept there. The database is the only arbiter: the PostgreSQL engine checks the
writer's epoch in the transaction of every write (groupd/storage/postgresql/fencing.py).

- ``assignment.py``: which live node should own which resource (pure);
- ``lease.py``: the decisions of one node from one view of the database, and its own serving deadline
  (pure, a manual clock in tests);
- ``store.py``: the SQL of nodes and leases;
- ``member.py``: the loop that heartbeats, renews, acquires and hands over;
- ``peers.py``, ``peer_login.py``: requests to other nodes on the inter-broker listener (TLS, SASL login).
"""
