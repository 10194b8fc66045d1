"""Handler modules; importing this package registers every API handler with broker.dispatch."""

from broker.handlers import (  # noqa: F401
    acl_and_logdirs,
    admin,
    cluster,
    consumer_groups,
    data,
    describe,
    groups,
    leader_epochs,
    offsets,
    quotas,
    replicas,
    security,
    topics,
    transactions,
)
