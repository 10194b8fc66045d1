"""Random member lifecycles against the core with simulated clients: the partitions live clients believe
they own never overlap, the group converges to Stable with every partition owned once, and replaying the
records rebuilds the same group."""

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.coordinator.consumer.group import GROUP_STABLE

from .driver import Driver

MEMBERS = ["m0", "m1", "m2", "m3"]
ops = st.lists(
    st.tuples(
        st.sampled_from(["join", "hb", "hb", "hb", "leave", "crash", "grow", "static_leave", "switch"]),
        st.sampled_from(MEMBERS),
    ),
    min_size=1,
    max_size=40,
)


class Client:
    """What a consumer does with its heartbeats: it owns what it was last told, and says so."""

    def __init__(self, member_id, topics, instance_id=None):
        self.member_id = member_id
        self.epoch = 0
        self.owned: set = set()
        self.topics = topics
        self.instance_id = instance_id

    def owned_list(self):
        by = {}
        for t, p in self.owned:
            by.setdefault(t, []).append(p)
        return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by.items()))

    def take(self, out):
        r = out.response
        assert r.error == 0, r
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = {(t, p) for t, ps in r.assignment for p in ps}


def check_disjoint(clients):
    seen = {}
    for c in clients.values():
        for tp in c.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {c.member_id}"
            seen[tp] = c.member_id


@settings(max_examples=120, deadline=None)
@given(ops, st.booleans())
def test_live_clients_never_share_a_partition(steps, static):
    d = Driver()
    d.topic("T", 5)
    d.topic("U", 3)
    clients: dict[str, Client] = {}
    gen = 0
    for op, name in steps:
        c = clients.get(name)
        if op == "join" and c is None:
            gen += 1
            topics = ("T", "U") if gen % 2 else ("T",)
            c = Client(f"{name}-{gen}", topics, instance_id=name if static else None)
            out = d.hb(c.member_id, 0, subscribed_topic_names=topics, rebalance_timeout_ms=60_000, owned=(),
                       instance_id=c.instance_id)
            if out.response.error != 0:  # an instance id still held by a member that did not leave
                continue
            c.take(out)
            clients[name] = c
        elif op == "hb" and c is not None:
            c.take(d.hb(c.member_id, c.epoch, owned=c.owned_list(), instance_id=c.instance_id))
        elif op == "switch" and c is not None:
            c.topics = ("U",) if c.topics != ("U",) else ("T", "U")
            c.take(d.hb(c.member_id, c.epoch, subscribed_topic_names=c.topics, owned=c.owned_list(),
                        instance_id=c.instance_id))
        elif op == "leave" and c is not None:
            d.hb(c.member_id, -1, instance_id=c.instance_id)
            del clients[name]
        elif op == "static_leave" and c is not None and static:
            d.hb(c.member_id, -2, instance_id=c.instance_id)
            del clients[name]
        elif op == "crash" and c is not None:
            del clients[name]  # it stops; the session timeout removes it below
        elif op == "grow":
            d.topic("T", d.topics["T"].partitions + 1)
        d.advance(1000)
        check_disjoint(clients)
    # every crashed member's session expires (45 s); the rest heartbeat until nothing changes
    for _ in range(20):
        d.advance(5000)
        for c in clients.values():
            c.take(d.hb(c.member_id, c.epoch, owned=c.owned_list(), instance_id=c.instance_id))
            check_disjoint(clients)
    for _ in range(3):
        for c in clients.values():
            c.take(d.hb(c.member_id, c.epoch, owned=c.owned_list(), instance_id=c.instance_id))
    check_disjoint(clients)
    if "g" in d.groups:
        g = d.group()
        if clients:
            assert g.state() == GROUP_STABLE
            wanted = set()
            for c in clients.values():
                for name in c.topics:
                    wanted |= {(d.topics[name].topic_id, p) for p in range(d.topics[name].partitions)}
            owned = set().union(*(c.owned for c in clients.values()))
            assert owned == wanted
        again = d.replayed()["g"]
        assert (again.epoch, again.assignment_epoch, again.targets) == (g.epoch, g.assignment_epoch, g.targets)
        assert {m: (x.epoch, x.state, x.assigned) for m, x in again.members.items()} == {
            m: (x.epoch, x.state, x.assigned) for m, x in g.members.items()
        }
