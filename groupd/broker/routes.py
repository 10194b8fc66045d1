"""The one routing table: every API of ``protocol/api_table.py`` by name, and the handler that answers it.

Handlers are plain functions in ``broker/handlers/``; nothing registers itself on import. A handler takes
(broker, ctx, request entity) and returns an ``Answer`` (``broker/dispatch.py``): a response now, a
``Later`` that brings one, or None when Kafka sends no response (Produce with acks=0).
``tests/unit/test_api_table.py`` checks that the two tables name the same APIs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groupd.broker.dispatch import Answer, RequestContext
from groupd.broker.handlers import (
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
    share,
    share_groups,
    share_offsets,
    share_state,
    topics,
    transactions,
    txn_markers,
)
from groupd.protocol.api_table import API_BY_NAME

if TYPE_CHECKING:
    from groupd.broker.app import Broker

Handler = Callable[["Broker", RequestContext, Any], Answer]  # the request: the kio entity of its API

ROUTES: dict[str, Handler] = {
    "Produce": data.produce,
    "Fetch": data.fetch,
    "ListOffsets": data.list_offsets,
    "Metadata": cluster.metadata,
    "OffsetCommit": offsets.offset_commit,
    "OffsetFetch": offsets.offset_fetch,
    "FindCoordinator": cluster.find_coordinator,
    "JoinGroup": groups.join_group,
    "Heartbeat": groups.heartbeat,
    "LeaveGroup": groups.leave_group,
    "SyncGroup": groups.sync_group,
    "DescribeGroups": groups.describe_groups,
    "ListGroups": groups.list_groups,
    "SaslHandshake": security.sasl_handshake,
    "ApiVersions": cluster.api_versions,
    "CreateTopics": topics.create_topics,
    "DeleteTopics": topics.delete_topics,
    "DeleteRecords": admin.delete_records,
    "InitProducerId": transactions.init_producer_id,
    "OffsetForLeaderEpoch": leader_epochs.offset_for_leader_epoch,
    "AddPartitionsToTxn": transactions.add_partitions_to_txn,
    "AddOffsetsToTxn": transactions.add_offsets_to_txn,
    "EndTxn": transactions.end_txn,
    "WriteTxnMarkers": txn_markers.write_txn_markers,
    "TxnOffsetCommit": offsets.txn_offset_commit,
    "DescribeAcls": acl_and_logdirs.describe_acls,
    "CreateAcls": acl_and_logdirs.create_acls,
    "DeleteAcls": acl_and_logdirs.delete_acls,
    "DescribeConfigs": admin.describe_configs,
    "AlterConfigs": admin.alter_configs,
    "AlterReplicaLogDirs": replicas.alter_replica_log_dirs,
    "DescribeLogDirs": acl_and_logdirs.describe_log_dirs,
    "SaslAuthenticate": security.sasl_authenticate,
    "CreatePartitions": admin.create_partitions,
    "DeleteGroups": groups.delete_groups,
    "ElectLeaders": replicas.elect_leaders,
    "IncrementalAlterConfigs": admin.incremental_alter_configs,
    "AlterPartitionReassignments": replicas.alter_partition_reassignments,
    "ListPartitionReassignments": acl_and_logdirs.list_partition_reassignments,
    "OffsetDelete": offsets.offset_delete,
    "DescribeClientQuotas": quotas.describe_client_quotas,
    "AlterClientQuotas": quotas.alter_client_quotas,
    "DescribeUserScramCredentials": security.describe_user_scram_credentials,
    "AlterUserScramCredentials": security.alter_user_scram_credentials,
    "DescribeQuorum": describe.describe_quorum,
    "DescribeCluster": cluster.describe_cluster,
    "DescribeProducers": transactions.describe_producers,
    "DescribeTransactions": transactions.describe_transactions,
    "ListTransactions": transactions.list_transactions,
    "ConsumerGroupHeartbeat": consumer_groups.consumer_group_heartbeat,
    "ConsumerGroupDescribe": consumer_groups.consumer_group_describe,
    "ShareGroupHeartbeat": share_groups.share_group_heartbeat,
    "ShareGroupDescribe": share_groups.share_group_describe,
    "DescribeShareGroupOffsets": share_offsets.describe_share_group_offsets,
    "AlterShareGroupOffsets": share_offsets.alter_share_group_offsets,
    "DeleteShareGroupOffsets": share_offsets.delete_share_group_offsets,
    "ListConfigResources": describe.list_config_resources,
    "DescribeTopicPartitions": describe.describe_topic_partitions,
    "ShareFetch": share.share_fetch,
    "ShareAcknowledge": share.share_acknowledge,
    "InitializeShareGroupState": share_state.initialize_share_group_state,
    "ReadShareGroupState": share_state.read_share_group_state,
    "WriteShareGroupState": share_state.write_share_group_state,
    "DeleteShareGroupState": share_state.delete_share_group_state,
    "ReadShareGroupStateSummary": share_state.read_share_group_state_summary,
}

# what the connection looks up on every request: the same table by api key
HANDLERS: dict[int, Handler] = {API_BY_NAME[name].key: handler for name, handler in ROUTES.items()}
