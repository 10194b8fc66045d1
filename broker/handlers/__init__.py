"""Handler modules; importing this package registers every API handler with broker.dispatch."""

from broker.handlers import admin, cluster, data, groups, offsets, topics  # noqa: F401
