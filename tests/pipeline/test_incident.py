"""The scripted incident (conftest.write_incident): storm, stall, rewind, stop, warn, deletion, static
member restart and a consumer-protocol group, each recovered by the jobs with the numbers the script made."""

import pytest

from groupd.pipeline import jobs
from groupd.pipeline import store as reader
from tests.pipeline.conftest import (
    DELETED_AT,
    INCIDENT_END,
    RESTART_AT,
    STORM_GENERATIONS,
    T0,
    TICK_MS,
    log_end_at,
)

pytestmark = pytest.mark.timeout(900)  # Spark on a shared 2-core machine: minutes, not seconds


def frames(spark, incident):
    d = incident["log_dirs"]
    return jobs.groups(spark, d), jobs.commits(spark, d), jobs.log_ends(spark, d), jobs.log_end_history(spark, d)


def test_log_end_history_is_read_from_the_store(spark, incident):
    hist = jobs.log_end_history(spark, incident["log_dirs"]).toPandas()
    orders0 = hist[(hist.topic == "orders") & (hist.partition == 0)].sort_values("sampled_ms")
    # one sample per tick where the log end moved: all 31 ticks here, since it moves at every one
    assert list(orders0["sampled_ms"]) == list(range(T0, INCIDENT_END + 1, TICK_MS))
    assert list(orders0["log_end_offset"]) == [log_end_at("orders", 0, t) for t in orders0["sampled_ms"]]


def test_deleted_group_is_removed_once_with_when(spark, incident):
    g, c, ends, hist = frames(spark, incident)
    removed = jobs.removed_groups(g, c).toPandas()
    assert list(removed["group"]) == ["orders-app"]
    assert int(removed["removed_ms"][0]) == DELETED_AT and removed["how"][0] == "deleted"
    status = jobs.consumer_status(c, ends, now_ms=INCIDENT_END, history=hist).toPandas()
    assert "orders-app" not in set(status["group"]), "the deleted group's offsets are tombstones: no status"
    lag = jobs.lag(c, ends).toPandas()
    assert "orders-app" not in set(lag["group"])


def test_each_scenario_gets_burrows_status_with_log_end_history(spark, incident):
    g, c, ends, hist = frames(spark, incident)
    status = jobs.consumer_status(c, ends, now_ms=INCIDENT_END, history=hist).toPandas()
    by_group = {r.group: (r.status, r.rule, r.lag) for r in status.itertuples() if r.group != "steady"}
    assert by_group["lagging"][0] == "STALL" and by_group["lagging"][2] == 3_000 - 40
    assert by_group["rewind"][0] == "REWIND" and "1,050 to 600" in by_group["rewind"][1]
    assert by_group["stopped"][0] == "STOP" and "no commit for 210 s" in by_group["stopped"][1]
    # warn commits at 5/s while orders-1 grows at 10/s: lag at its commits 500, 550, ... 950
    assert by_group["warn"][0] == "WARN" and "(500 to 950)" in by_group["warn"][1]
    assert set(status[status.group == "steady"]["status"]) == {"OK"}
    # without the recorded log ends every commit is measured against today's end: WARN cannot show
    blind = jobs.consumer_status(c, ends, now_ms=INCIDENT_END).toPandas()
    assert blind[blind.group == "warn"]["status"].item() == "OK"


def test_lag_over_time_uses_the_recorded_log_ends(spark, incident):
    g, c, ends, hist = frames(spark, incident)
    warn = jobs.lag_over_time(c, ends, hist).where("group = 'warn'").orderBy("commit_timestamp").toPandas()
    assert list(warn["lag"]) == [500 + 50 * k for k in range(10)] and set(warn["end_source"]) == {"recorded"}
    timeline = jobs.topic_lag_timeline(c, hist).toPandas()
    steady = timeline[(timeline.group == "steady") & (timeline.topic == "orders")].set_index("t_ms")["lag"]
    # two partitions, each 5 behind after its commit; at the next sample both have grown by 100 since
    assert steady[T0 + 100_000] == 10 and steady[INCIDENT_END] == 0
    warn_line = timeline[timeline.group == "warn"].set_index("t_ms")["lag"]
    assert warn_line[INCIDENT_END] == 3_000 - 1_950


def test_static_restart_and_storm_and_causes(spark, incident):
    g, *_ = frames(spark, incident)
    history = jobs.rebalance_history(g).toPandas()
    static = history[history.group == "static-app"]
    assert len(static) == 1, "a static member's restart is no rebalance"
    restarts = static["static_restarts"].iloc[0]
    assert [(r["at_ms"], list(r["instances"])) for r in restarts] == [(RESTART_AT, ["i-2"])]
    storm = jobs.storm_intervals(jobs.rebalance_history(g)).toPandas()
    assert list(storm["group"]) == ["storm"]
    # ten generations 4 s apart from T0+20 s, then the eleventh (emptied) when the last session lapses, 10 s on
    last_join = T0 + 20_000 + (STORM_GENERATIONS - 1) * 4_000
    assert (int(storm["storm_start_ms"][0]), int(storm["storm_end_ms"][0])) == (T0 + 20_000, last_join + 10_000)
    assert int(storm["peak_in_window"][0]) == STORM_GENERATIONS + 1
    storm_gens = history[history.group == "storm"].sort_values("generation")
    assert list(storm_gens["rebalance_ms"].dropna().astype(int))[: STORM_GENERATIONS - 1] == [4_000] * (
        STORM_GENERATIONS - 1
    )


def test_consumer_protocol_group_reads_like_a_classic_one(spark, incident):
    g, *_ = frames(spark, incident)
    modern = jobs.rebalance_history(g).where("group = 'modern-app'").orderBy("generation").toPandas()
    assert list(modern["generation"]) == [1, 2, 3] and set(modern["group_type"]) == {"consumer"}
    assert list(modern["member_count"]) == [1, 2, 1]
    assert list(modern["likely_cause"]) == ["group formed", "join", "leave or session expiry"]
    assert [list(x) for x in modern["left"]] == [[], [], ["m1"]]


def test_unknown_record_types_are_skipped_not_fatal(incident):
    rows = [
        r for d in reader.offsets_partitions(incident["log_dirs"]) for r in reader.read_offsets_partition(d, "groups")
    ]
    assert [r[1] for r in rows if r[0] == "modern-app"] == [1, 2, 3]


def test_overview_lists_live_groups_worst_first(spark, incident):
    g, c, ends, hist = frames(spark, incident)
    history = jobs.rebalance_history(g)
    removed = jobs.removed_groups(g, c)
    status = jobs.consumer_status(c, ends, now_ms=INCIDENT_END, history=hist)
    ov = jobs.overview(
        jobs.live(history, removed),
        jobs.storm_intervals(history),
        jobs.lag(c, ends),
        status,
        c,
    ).toPandas()
    assert set(ov["group"]) == {"storm", "steady", "lagging", "rewind", "stopped", "warn", "static-app", "modern-app"}
    assert set(ov["group"][:4]) == {"lagging", "rewind", "stopped"} | {ov["group"][3]} and ov["burrow"][3] == "WARN"
    row = ov.set_index("group").loc["storm"]
    assert (
        row["state"] == "Empty"
        and int(row["generations"]) == STORM_GENERATIONS + 1
        and int(row["storm_peak"]) == STORM_GENERATIONS + 1
    )
    assert ov.set_index("group").loc["static-app", "static_restarts"] == 1
