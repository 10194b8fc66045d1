"""With an authorizer, the handler of every API that groupd/broker/security/api_checks.py records as
checked asks ``broker.access``: a handler that forgot its check fails here. Without one, the hot paths
ask it nothing."""

from __future__ import annotations

from groupd.broker.app import Broker
from groupd.broker.security.access import Access
from groupd.broker.security.acl import AclBinding
from groupd.broker.security.api_checks import API_CHECKS, UNCHECKED
from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE, ApiKey
from groupd.storage.batch import build_batch
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_acls import AUTHORIZED_CONFIG
from tests.wire.test_authorization import every_api_once
from tests.wire.test_data_plane import fetch_body, produce_body
from tests.wire.test_groups import commit_body, join_body, join_with_id, start_broker, sync_body

# the questions a handler can ask the access door (security/access.py)
QUESTIONS = (
    "allowed", "cluster", "may_create_topic", "asked_operations", "cluster_operations", "names",
    "refused_names", "refused", "any_of_type", "operations",
)  # fmt: skip


def record_questions(monkeypatch) -> set[int]:
    """The api keys of the requests that ask the access door anything, from now on."""
    asked: set[int] = set()

    def recording(name):
        question = getattr(Access, name)

        def ask(self, ctx, *args, **kwargs):
            asked.add(ctx.header.api_key)
            return question(self, ctx, *args, **kwargs)

        return ask

    for name in QUESTIONS:
        monkeypatch.setattr(Access, name, recording(name))
    return asked


async def test_without_an_authorizer_the_hot_paths_ask_nothing(tmp_path, monkeypatch):
    """No authorizer: Produce, Fetch, OffsetCommit, JoinGroup, SyncGroup and Heartbeat read one attribute
    of the access door and call none of its questions (bench/acl_bytecodes.py counts 0 bytecodes there)."""
    asked = record_questions(monkeypatch)
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": 0})
    try:
        b.create_topic("t", 1, {})
        c = await WireClient.connect(b.port)
        await c.call(ApiKey.PRODUCE, 9, produce_body("t", 0, build_batch([(b"k", b"v")], timestamp_ms=1000)))
        await c.call(ApiKey.FETCH, 11, fetch_body("t", 0, 0))
        await c.call(ApiKey.OFFSET_COMMIT, 8, commit_body("g", "t", 0, 1, ""))
        member = await join_with_id(c)
        joined = await c.call(ApiKey.JOIN_GROUP, 5, join_body(5, member_id=member))
        await c.call(ApiKey.SYNC_GROUP, 3, sync_body(3, member, joined.generation_id, ((member, b""),)))
        beat = {"group_id": "g", "generation_id": joined.generation_id, "member_id": member, "group_instance_id": None}
        assert (await c.call(ApiKey.HEARTBEAT, 4, beat)).error_code == 0
        await c.close()
    finally:
        await b.stop()
    assert asked == set()


async def test_each_checked_api_asks_the_authorizer(tmp_path, monkeypatch):
    """Every version of every API, odd values, from User:ANONYMOUS with an authorizer and no ACL: each API
    the record calls checked asks the access door at least once (a handler that forgot its check fails)."""
    asked = record_questions(monkeypatch)
    b = Broker(broker_config(tmp_path, **{"authorizer.class.name": AUTHORIZED_CONFIG["authorizer.class.name"]}))
    await b.start()
    try:
        b.create_topic("fz", 2, {})
        await every_api_once(b)
        # what odd values do not reach: a config resource of a known type, a cluster asked for its operations,
        # a topic named well enough (the sweep's odd values shift whenever an API is added), a transaction to
        # list (made with ANONYMOUS allowed its id)
        b.access.create([AclBinding.of_wire(5, "tx", 3, "User:ANONYMOUS", "*", 4, 3)])  # WRITE on txn id "tx"
        client = await WireClient.connect(b.port)
        await client.call(22, 4, {"transactional_id": "tx", "transaction_timeout": 60000, "producer_id": -1,
                                  "producer_epoch": -1})  # fmt: skip
        described = codec.nested(codec.request_class(32, 4), "DescribeConfigsResource")
        altered = codec.nested(codec.request_class(33, 2), "AlterConfigsResource")
        fz = described(resource_type=2, resource_name="fz", configuration_keys=None)
        await client.call(32, 4, {"resources": (fz,), "include_synonyms": False, "include_documentation": False})
        await client.call(33, 2, {"resources": (altered(resource_type=2, resource_name="fz", configs=()),),
                                  "validate_only": True})  # fmt: skip
        incremental = codec.nested(codec.request_class(44, 1), "AlterConfigsResource")
        await client.call(44, 1, {"resources": (incremental(resource_type=2, resource_name="fz", configs=()),),
                                  "validate_only": True})  # fmt: skip
        await client.call(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
        topic = codec.nested(codec.request_class(75, 0), "TopicRequest")
        await client.call(75, 0, {"topics": (topic(name="fz"),), "response_partition_limit": 10, "cursor": None})
        await client.call(66, 1, {"state_filters": (), "producer_id_filters": (), "duration_filter": -1})
        await client.close()
    finally:
        await b.stop()
    checked = {key for key, need in API_CHECKS.items() if need != UNCHECKED}
    missing = sorted(API_TABLE[key].name for key in checked - asked)
    assert not missing, missing
    assert not asked - checked  # and nothing the record calls unchecked asks
