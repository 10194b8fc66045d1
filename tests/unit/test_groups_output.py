"""groupd-groups' member and state tables for consumer-protocol groups, from ConsumerGroupDescribe's
answer (groupd/cli/consumer_describe.py's dicts), laid out as Kafka 4's kafka-consumer-groups.sh lays them out
(DescribeConsumerGroupTest): epochs and target assignments with --verbose, ``-`` for a classic group, and
UPGRADED when classic members sit in a consumer group."""

from types import SimpleNamespace as NS

from groupd.cli.consumer_describe import as_description
from groupd.cli.groups_cli import _assigned
from groupd.cli.groups_output import format_members, format_state


def _tp(topic, *ps):
    return NS(topic_id=None, topic_name=topic, partitions=ps)


def _member(mid, epoch, current, target, member_type=1):
    return NS(
        member_id=mid,
        instance_id=None,
        client_id="c-" + mid,
        client_host="/127.0.0.1",
        member_epoch=epoch,
        member_type=member_type,
        assignment=NS(topic_partitions=current),
        target_assignment=NS(topic_partitions=target),
    )


def _group(*members, state="Reconciling"):
    return as_description(
        NS(
            error_code=0,
            group_id="g",
            group_state=state,
            group_epoch=5,
            assignment_epoch=5,
            assignor_name="uniform",
            members=list(members),
        )
    )


def _table(text):
    return [line.split() for line in text.splitlines() if line.strip()]


def test_members_verbose_shows_each_members_epoch_and_target():
    d = _group(_member("a", 4, [_tp("t", 0, 1)], [_tp("t", 0)]), _member("b", 5, [], [_tp("t", 1)]))
    header, a, b = _table(format_members("g", d["members"], True, _assigned, d["assignment_epoch"]))
    assert header == [
        "GROUP",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "CURRENT-EPOCH",
        "CURRENT-ASSIGNMENT",
        "TARGET-EPOCH",
        "TARGET-ASSIGNMENT",
    ]
    assert a == ["g", "a", "/127.0.0.1", "c-a", "2", "4", "t:0,1", "5", "t:0"]  # revoking t:1 still
    assert b == ["g", "b", "/127.0.0.1", "c-b", "0", "5", "-", "5", "t:1"]  # waiting for t:1 to be released
    header, a, _ = _table(format_members("g", d["members"], False, _assigned, d["assignment_epoch"]))
    assert header[-1] == "#PARTITIONS" and a == ["g", "a", "/127.0.0.1", "c-a", "2"]


def test_upgraded_column_when_classic_members_are_in_a_consumer_group():
    d = _group(
        _member("a", 5, [_tp("t", 0)], [_tp("t", 0)], member_type=0), _member("b", 5, [_tp("t", 1)], [_tp("t", 1)])
    )
    header, a, b = _table(format_members("g", d["members"], True, _assigned, 5))
    assert header[-1] == "UPGRADED" and a[-1] == "false" and b[-1] == "true"


def test_a_classic_groups_epochs_are_dashes():
    classic = [
        {
            "member_id": "m",
            "client_id": "c",
            "client_host": "/h",
            "member_assignment": {"assigned_partitions": [{"topic": "t", "partitions": [0]}]},
        }
    ]
    _, row = _table(format_members("g", classic, True, _assigned, None))
    assert row[-4:] == ["-", "t:0", "-", "-"]
    _, row = _table(
        format_state("g", {"group_state": "Stable", "protocol_data": "range", "members": classic}, "h:1  (1)", True)
    )
    assert row[-3:] == ["-", "-", "1"]


def test_state_verbose_shows_the_group_and_target_assignment_epochs():
    d = _group(_member("a", 5, [_tp("t", 0)], [_tp("t", 0)]), state="Stable")
    header, row = _table(format_state("g", d, "h:9092  (1)", True))
    assert header[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert row == ["g", "h:9092", "(1)", "uniform", "Stable", "5", "5", "1"]
