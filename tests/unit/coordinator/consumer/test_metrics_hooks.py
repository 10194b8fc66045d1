"""What the coordinator tells metrics about consumer-protocol groups (groupd/coordinator/observe.py), on a manual
clock: Kafka's consumer-group-rebalance sensor records each group epoch bump a heartbeat makes (a member
joins, a subscription or the subscribed topics change: GroupMetadataManager.consumerGroupHeartbeat), and
not the bump of a member's removal (consumerGroupFenceMember: a leave, a session timeout)."""

from types import SimpleNamespace

from groupd.coordinator import shard
from groupd.coordinator.consumer.group import consumer_groups
from groupd.coordinator.observe import GroupObserver

from .driver import Driver


class Counted:
    def __init__(self) -> None:
        self.rebalances = 0
        self.transitions: list[tuple] = []

    def consumer_group_rebalance(self) -> None:
        self.rebalances += 1

    def group_state_changed(self, group, old, new) -> None:
        self.transitions.append((group, old, new))

    def group_removed(self, group) -> None:
        pass


def observed():
    state = shard.ShardState(0)
    d = Driver(groups=consumer_groups(state))
    state.topics = d.topics
    metrics = Counted()
    observer = GroupObserver(metrics)
    fake_shard = SimpleNamespace(state=state, phase_started={})

    def op(fn, *args, **kw):
        before = observer.before(state, "g")
        out = fn(*args, **kw)
        observer.after(fake_shard, "g", before)
        return out

    return d, metrics, op


def test_rebalances_are_the_epoch_bumps_of_heartbeats():
    d, metrics, op = observed()
    d.topic("T", 4)
    d.topic("U", 1)
    op(d.join, "m1")  # a new group: epoch 1 -> 2
    assert metrics.rebalances == 1
    op(d.join, "m2")  # 2 -> 3
    assert metrics.rebalances == 2
    op(d.hb, "m1", 2)  # no change to the group epoch (m1 reconciles)
    assert metrics.rebalances == 2
    op(d.hb, "m2", 3, subscribed_topic_names=("T", "U"))  # a subscription change
    assert metrics.rebalances == 3
    op(d.hb, "m2", -1)  # a leave bumps the epoch without a rebalance in Kafka's sensor
    assert metrics.rebalances == 3 and d.group().epoch == 5
    assert metrics.transitions == [], "consumer groups are not in the classic state transitions"


def test_a_session_timeout_is_not_counted():
    d, metrics, op = observed()
    d.topic("T", 2)
    op(d.join, "m1")
    op(d.join, "m2")
    epoch = d.group().epoch
    op(d.advance, 45_001)  # both sessions end: members removed, epochs bumped
    assert d.group().epoch > epoch and metrics.rebalances == 2
