"""Kafka's internal topics, named once: the logs of the group, transaction and share coordinators.

Everything that names them (the stores' directories, Metadata, the refusal to produce to them, the
pipeline reading the offsets store) imports them from here.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
TXN_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_STATE_TOPIC, SHARE_STATE_TOPIC})
