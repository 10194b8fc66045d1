"""A fixture store written by the real coordinator core, driven through scripted scenarios with a manual
clock: every record is one the coordinator produced, appended at the time it produced it."""

from __future__ import annotations

import pytest

from coordinator.partitioning import partition_for
from coordinator.records import encode_key, encode_value
from protocol.topic_names import OFFSETS_TOPIC
from storage.log import Log
from tests.unit.coordinator.harness import Core

T0 = 1_700_000_000_000
STORM_GENERATIONS = 10


class Recorder(Core):
    """The unit tests' manual-clock driver, also appending each durable Result to its offsets partition."""

    def __init__(self, log_dirs, **cfg):
        super().__init__(**cfg)
        self.log_dirs = log_dirs
        self.logs: dict[int, Log] = {}

    def apply(self, r):
        if r.records:
            by_partition: dict[int, list] = {}
            for key, value in r.records:
                by_partition.setdefault(partition_for(key.group, 50), []).append((encode_key(key), encode_value(value)))
            for p, records in by_partition.items():
                lg = self.logs.get(p) or self.logs.setdefault(p, Log.open(self.log_dirs / f"{OFFSETS_TOPIC}-{p}"))
                lg.append_records(records, self.now)
        return super().apply(r)

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
    from pipeline.__main__ import session

    s = session("local[2]")
    yield s
    s.stop()
