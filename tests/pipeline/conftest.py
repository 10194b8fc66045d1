"""A fixture store written by the real coordinator core, driven through scripted scenarios with a manual
clock: every record is one the coordinator produced, appended at the time it produced it."""

from __future__ import annotations

import pytest

from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.records import encode_key, encode_value
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.local import LocalEngine
from groupd.storage.log import Log
from tests.unit.coordinator.harness import Core

T0 = 1_700_000_000_000
STORM_GENERATIONS = 10


class Recorder(Core):
    """The unit tests' manual-clock driver, also appending each durable Result to its offsets partition."""

    def __init__(self, log_dirs, **cfg):
        super().__init__(**cfg)
        self.log_dirs = log_dirs
        self.logs: dict[int, Log] = {}

    def appended(self, r):
        if r.records:
            by_partition: dict[int, list] = {}
            for key, value in r.records:
                by_partition.setdefault(partition_for(key.group, 50), []).append((encode_key(key), encode_value(value)))
            for p, records in by_partition.items():
                lg = self.logs.get(p) or self.logs.setdefault(p, Log.open(self.log_dirs / f"{OFFSETS_TOPIC}-{p}"))
                lg.append_records(records, self.now)

    def close(self):
        for lg in self.logs.values():
            lg.flush()
            lg.close()


def one_generation(core: Recorder, group: str, members: list[str], newcomer: bool) -> None:
    """Everyone (re)joins, the leader syncs the assignment, the group is Stable again."""
    tokens = {}
    if newcomer:
        mid, tok = core.new_member(group=group)
        members.append(mid)
        tokens[mid] = tok
    for m in members:
        if m not in tokens:
            tokens[m] = core.join(member_id=m, group=group)
    core.finish_join(group)
    answers = {m: core.answers[t] for m, t in tokens.items()}
    leader = next(iter(answers.values())).leader
    generation = answers[leader].generation_id
    for m in members:
        if m != leader:
            core.sync(m, generation, group=group)
    core.sync(leader, generation, {m: m.encode() for m in members}, group=group)
    assert core.group(group).state == "Stable"


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    log_dirs = tmp_path_factory.mktemp("pipeline-store")
    core = Recorder(log_dirs, initial_rebalance_delay_ms=0)
    core.now = T0
    # "storm": a new member every 5 s, ten generations inside a minute
    members: list[str] = []
    for i in range(STORM_GENERATIONS):
        core.advance(T0 + i * 5_000)
        one_generation(core, "storm", members, newcomer=True)
    # "steady" keeps up with orders-0; "lagging" is stuck at 40 while the log end is 100
    for i in range(10):
        core.advance(T0 + 60_000 + i * 10_000)
        core.commit(("orders", 0, 10 * (i + 1)), group="steady")
        core.commit(("orders", 0, 40), group="lagging")
    core.close()
    data = Log.open(log_dirs / "orders-0")
    for _ in range(10):
        data.append_records([(None, b"x" * 10)] * 10, T0)
    data.flush()
    data.close()
    return {"log_dirs": str(log_dirs), "now_ms": T0 + 60_000 + 9 * 10_000 + 1_000}


@pytest.fixture(scope="session")
def spark():
    from groupd.pipeline.__main__ import session

    s = session("local[2]")
    yield s
    s.stop()


# ---------------------------------------------------------------------------------------------- incident
# One scripted incident over five minutes (INCIDENT_END - T0), every group record written by the real
# coordinator core and every log end recorded by the broker's LogEndRecorder. Topics: orders (2
# partitions, 10 records/s each) and payments (1 partition, 5 records/s).
INCIDENT_END = T0 + 300_000
TICK_MS = 10_000
RATES = {("orders", 0): 10, ("orders", 1): 10, ("payments", 0): 5}
DELETED_AT = T0 + 120_000
RESTART_AT = T0 + 100_000


def log_end_at(topic: str, partition: int, t_ms: int) -> int:
    """The scripted log end: a steady produce rate from T0 on."""
    return RATES[(topic, partition)] * max(0, t_ms - T0) // 1000


def modern_records(group: str) -> list[tuple[int, list]]:
    """A consumer-protocol (KIP-848) group's records, encoded by the coordinator's codec, with their times:
    m1 joins (epoch 1), m2 joins (epoch 2), m1 leaves (epoch 3); plus an assignment record (type 8) the
    pipeline does not read and a record of a type no reader knows (99): both must be skipped."""
    from groupd.coordinator.consumer import records as cr

    def member(mid: str, instance: str | None, client: str) -> tuple[bytes, bytes]:
        value = cr.MemberMetadata(instance, None, client, "/127.0.0.1", ("orders",), None, 45_000, "uniform")
        return cr.encode_consumer_key(cr.MemberKey(cr.MEMBER_METADATA, group, mid)), cr.encode_consumer_value(value)

    def epoch(n: int) -> tuple[bytes, bytes]:
        return cr.encode_consumer_key(cr.GroupKey(cr.GROUP_METADATA, group)), cr.encode_consumer_value(
            cr.GroupMetadata(n)
        )

    gone = cr.encode_consumer_key(cr.MemberKey(cr.MEMBER_METADATA, group, "m1"))
    assignment = cr.encode_consumer_key(cr.MemberKey(cr.CURRENT_MEMBER_ASSIGNMENT, group, "m1"))
    unknown = b"\x00\x63" + cr.encode_consumer_key(cr.GroupKey(cr.GROUP_METADATA, group))[2:]
    return [
        (T0 + 40_000, [member("m1", None, "c1"), epoch(1)]),
        (T0 + 45_000, [(assignment, b"\x00\x00opaque"), (unknown, b"\x00\x07future")]),
        (T0 + 50_000, [member("m2", "i-9", "c2"), epoch(2)]),
        (T0 + 150_000, [(gone, None), epoch(3)]),
    ]


def write_incident(log_dirs) -> dict:
    from groupd.broker.ops.log_end_history import LogEndRecorder
    from groupd.coordinator import shard

    core = Recorder(log_dirs, initial_rebalance_delay_ms=0)
    core.now = T0
    events: list[tuple[int, int, object]] = []
    seq = iter(range(1_000_000))

    def at(t: int, fn) -> None:
        events.append((t, next(seq), fn))

    # storm: a member joins every 4 s for ten generations, then every session lapses (sessions 10 s)
    storm: list[str] = []
    for i in range(STORM_GENERATIONS):
        at(T0 + 20_000 + i * 4_000, lambda: one_generation(core, "storm", storm, newcomer=True))

    # steady: a simple consumer keeping up with orders, 5 behind, caught up at the end
    for k in range(1, 31):
        t = T0 + k * TICK_MS
        lagged = 0 if k == 30 else 5
        at(
            t,
            lambda t=t, lagged=lagged: core.commit(
                ("orders", 0, log_end_at("orders", 0, t) - lagged),
                ("orders", 1, log_end_at("orders", 1, t) - lagged),
                group="steady",
            ),
        )
    # lagging: stuck at 40 on orders-0 over its last ten commits (STALL)
    for k in range(20, 30):
        at(T0 + k * TICK_MS, lambda: core.commit(("orders", 0, 40), group="lagging"))
    # rewind: payments-0 goes forward, then back by 450 (REWIND)
    for k, offset in enumerate([900, 950, 1000, 1050, 600, 650, 700, 750, 800, 850]):
        at(T0 + (20 + k) * TICK_MS, lambda offset=offset: core.commit(("payments", 0, offset), group="rewind"))
    # stopped: commits orders-1 100 behind for 90 s, then nothing (STOP at the end)
    for k in range(10):
        t = T0 + k * TICK_MS
        at(t, lambda t=t: core.commit(("orders", 1, max(0, log_end_at("orders", 1, t) - 100)), group="stopped"))
    # warn: commits orders-1 at 5/s while it grows at 10/s, so lag never decreases (WARN)
    for k in range(10):
        at(T0 + (20 + k) * TICK_MS, lambda k=k: core.commit(("orders", 1, 1_500 + 50 * k), group="warn"))

    # orders-app: one member, two commits, leaves, the empty group is deleted
    app: dict = {}

    def app_forms():
        app["members"] = []
        one_generation(core, "orders-app", app["members"], newcomer=True)

    def app_commits(offset):
        g = core.group("orders-app")
        resp = core.commit(
            ("orders", 0, offset),
            ("orders", 1, offset),
            group="orders-app",
            generation=g.generation,
            member_id=app["members"][0],
        )
        assert all(p.error == 0 for p in resp.partitions), resp

    at(T0 + 10_000, app_forms)
    at(T0 + 14_000, lambda: app_commits(100))  # inside its 10 s session (a commit also counts as a heartbeat)
    at(T0 + 18_000, lambda: app_commits(200))
    at(T0 + 21_000, lambda: core.leave((app["members"][0], None), group="orders-app"))
    at(DELETED_AT, lambda: core.apply(shard.delete_group(core.state, "orders-app", core.token(), core.now)))

    # static-app: two static members (5-minute sessions); instance i-2 restarts at RESTART_AT
    static: dict = {}

    def static_forms():
        toks = {}
        for inst in ("i-1", "i-2"):
            toks[inst] = core.join(group="static-app", instance=inst, session=400_000, rebalance=60_000)
        core.finish_join("static-app")
        answers = {inst: core.answers[t] for inst, t in toks.items()}
        static["ids"] = {inst: a.member_id for inst, a in answers.items()}
        gen = answers["i-1"].generation_id
        leader = answers["i-1"].leader
        for inst, mid in static["ids"].items():
            if mid != leader:
                core.sync(mid, gen, group="static-app", instance=inst)
        core.sync(
            leader,
            gen,
            {m: m.encode() for m in static["ids"].values()},
            group="static-app",
            instance=next(i for i, m in static["ids"].items() if m == leader),
        )

    def static_restart():
        tok = core.join(group="static-app", instance="i-2", session=400_000, rebalance=60_000)
        assert core.answers[tok].error == 0, core.answers[tok]

    at(T0 + 30_000, static_forms)
    at(RESTART_AT, static_restart)

    for t, _, fn in sorted(events, key=lambda e: (e[0], e[1])):
        core.advance(t)
        fn()
    core.advance(INCIDENT_END)
    core.close()

    # the consumer-protocol group's records, appended to its offsets partition
    from groupd.storage.log import Log as _Log

    p = partition_for("modern-app", 50)
    lg = _Log.open(log_dirs / f"{OFFSETS_TOPIC}-{p}")
    for t, records in modern_records("modern-app"):
        lg.append_records(records, t)
    lg.flush()
    lg.close()

    # data partitions at their final log ends, and the log ends the broker recorded every 10 s
    for topic, partition in RATES:
        data = Log.open(log_dirs / f"{topic}-{partition}")
        remaining = log_end_at(topic, partition, INCIDENT_END)
        while remaining:
            n = min(remaining, 500)
            data.append_records([(None, b"x")] * n, INCIDENT_END)
            remaining -= n
        data.flush()
        data.close()
    clock = {"t": T0}
    recorder = LogEndRecorder(
        LocalEngine(log_dirs), TICK_MS, -1, lambda: [(t, p, 0, log_end_at(t, p, clock["t"])) for t, p in RATES]
    )
    for t in range(T0, INCIDENT_END + 1, TICK_MS):
        clock["t"] = t
        recorder.tick(t)
    recorder.log.flush()
    recorder.log.close()
    return {"log_dirs": str(log_dirs), "now_ms": INCIDENT_END, "static_ids": static["ids"]}


@pytest.fixture(scope="session")
def incident(tmp_path_factory):
    return write_incident(tmp_path_factory.mktemp("pipeline-incident"))
