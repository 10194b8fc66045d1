"""What did the groups do? Each job is a function over DataFrames read by the "groupd" data source.

What the store can tell: the coordinator writes a GroupMetadata record when a generation's sync
completes (and a member-less one when a group empties), so each generation appears with the time it
became current (``state_timestamp``); the time it ended is when the next one was written. Offsets
appear as OffsetCommit records with their commit timestamps. Compaction keeps only the newest record
per key in closed segments: history older than the active segment is lost unless the broker keeps
uncompacted segments (``offsets.retain.uncompacted.hours``).
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from groupd.clock import wall_ms
from groupd.pipeline import datasource, store


def register(spark: SparkSession) -> None:
    spark.dataSource.register(datasource.GroupdDataSource)


def commits(spark: SparkSession, log_dirs: str) -> DataFrame:
    return spark.read.format("groupd").option("records", "commits").load(log_dirs)


def groups(spark: SparkSession, log_dirs: str) -> DataFrame:
    return spark.read.format("groupd").option("records", "groups").load(log_dirs)


def log_ends(spark: SparkSession, log_dirs: str) -> DataFrame:
    """Today's log start and end offsets of every data partition, read from its segments."""
    rows = store.log_ends(log_dirs)
    return spark.createDataFrame(rows, "topic string, partition int, log_start_offset long, log_end_offset long")


def log_end_history(spark: SparkSession, log_dirs: str) -> DataFrame:
    """The log ends the broker recorded over time (groupd/broker/ops/log_end_history.py); empty when it recorded
    none."""
    return spark.read.format("groupd").option("records", "log_ends").load(log_dirs)


def _newest_first(*keys: str) -> WindowSpec:
    return Window.partitionBy(*keys).orderBy(F.desc("store_partition"), F.desc("record_offset"))


def removed_groups(group_records: DataFrame, commit_records: DataFrame) -> DataFrame:
    """Groups whose every key's newest record is a tombstone: deleted (DeleteGroups writes a tombstone for
    the group and each of its offsets) or expired (offsets retention, then the empty group). One row per
    group: when its last tombstone was written and whether the group record itself was tombstoned."""
    g = (
        group_records.withColumn("_n", F.row_number().over(_newest_first("group")))
        .where("_n = 1")
        .select("group", "is_tombstone", "record_timestamp", F.lit(True).alias("is_group_record"))
    )
    c = (
        commit_records.withColumn("_n", F.row_number().over(_newest_first("group", "topic", "partition")))
        .where("_n = 1")
        .select("group", "is_tombstone", "record_timestamp", F.lit(False).alias("is_group_record"))
    )
    return (
        g.unionByName(c)
        .groupBy("group")
        .agg(
            F.max(F.when(~F.col("is_tombstone"), 1).otherwise(0)).alias("_live"),
            F.max(F.when(F.col("is_tombstone"), F.col("record_timestamp"))).alias("removed_ms"),
            F.max(F.when(F.col("is_tombstone") & F.col("is_group_record"), 1).otherwise(0)).alias("_group_tombstone"),
        )
        .where("_live = 0")
        .select(
            "group",
            "removed_ms",
            F.timestamp_millis("removed_ms").alias("removed_at"),
            F.when(F.col("_group_tombstone") == 1, "deleted").otherwise("offsets expired or deleted").alias("how"),
        )
    )


def live(df: DataFrame, removed: DataFrame) -> DataFrame:
    """``df`` without the rows of removed groups."""
    return df.join(removed.select("group"), "group", "left_anti")


def rebalance_history(group_records: DataFrame) -> DataFrame:
    """One row per generation (classic) or group epoch (consumer protocol): when it became current and
    ended, its members, who joined/left, a likely cause, and static members that restarted inside it.

    Cause, from the difference with the previous generation: more members -> "join"; fewer ->
    "leave or session expiry"; same count, different ids -> "member replaced"; same members ->
    "rejoin (metadata change)"; the first generation seen -> "group formed"; no members -> "emptied".
    A generation rewritten with a new member id (a static member's restart, which Kafka answers
    without a rebalance) is listed in ``static_restarts`` with when and which instance. A deleted group
    created again under the same id starts a new incarnation: its first generation is "group formed".
    """
    order = Window.partitionBy("group").orderBy("store_partition", "record_offset")
    recs = (
        group_records.withColumn(
            "incarnation",
            F.sum(F.col("is_tombstone").cast("int")).over(order.rowsBetween(Window.unboundedPreceding, 0)),
        )
        .where(~F.col("is_tombstone"))
        .select(
            "group",
            "incarnation",
            "generation",
            "group_type",
            "protocol",
            "leader",
            "member_count",
            "members",
            F.coalesce(F.col("state_timestamp"), F.col("record_timestamp")).alias("start_ms"),
            "record_timestamp",
            F.transform("members", lambda m: m["member_id"]).alias("member_ids"),
            "record_offset",
            "store_partition",
        )
    )
    within = Window.partitionBy("group", "incarnation", "generation").orderBy("store_partition", "record_offset")
    prev_in_gen = F.lag("member_ids").over(within)
    recs = recs.withColumn("_n", F.row_number().over(within)).withColumn(
        "_restarted",
        F.when(
            prev_in_gen.isNotNull(),
            F.transform(
                F.filter("members", lambda m: ~F.array_contains(prev_in_gen, m["member_id"])),
                lambda m: F.coalesce(m["group_instance_id"], m["member_id"]),
            ),
        ),
    )
    restarts = (
        recs.where((F.col("_n") > 1) & (F.size("_restarted") > 0))
        .groupBy("group", "incarnation", "generation")
        .agg(
            F.sort_array(
                F.collect_list(
                    F.struct(F.col("record_timestamp").alias("at_ms"), F.col("_restarted").alias("instances"))
                )
            ).alias("static_restarts")
        )
    )
    gens = recs.where("_n = 1").drop("_n", "_restarted")
    w = Window.partitionBy("group", "incarnation").orderBy("store_partition", "record_offset")
    prev_ids = F.lag("member_ids").over(w)
    prev_count = F.lag("member_count").over(w)
    out = (
        gens.join(restarts, ["group", "incarnation", "generation"], "left")
        .withColumn(
            "static_restarts",
            F.coalesce("static_restarts", F.array().cast("array<struct<at_ms:bigint,instances:array<string>>>")),
        )
        .withColumn("end_ms", F.lead("start_ms").over(w))
        .withColumn("duration_ms", F.col("end_ms") - F.col("start_ms"))
        .withColumn("rebalance_ms", F.col("start_ms") - F.lag("start_ms").over(w))
        .withColumn(
            "joined", F.when(prev_ids.isNull(), F.col("member_ids")).otherwise(F.array_except("member_ids", prev_ids))
        )
        .withColumn(
            "left",
            F.when(prev_ids.isNull(), F.array().cast("array<string>")).otherwise(
                F.array_except(prev_ids, "member_ids")
            ),
        )
        .withColumn(
            "likely_cause",
            F.when(F.col("member_count") == 0, "emptied")
            .when(prev_count.isNull(), "group formed")
            .when(F.col("member_count") > prev_count, "join")
            .when(F.col("member_count") < prev_count, "leave or session expiry")
            .when(F.size(F.array_except("member_ids", prev_ids)) > 0, "member replaced")
            .otherwise("rejoin (metadata change)"),
        )
        .withColumn("start", F.timestamp_millis("start_ms"))
        .withColumn("end", F.timestamp_millis("end_ms"))
    )
    return out.select(
        "group",
        "group_type",
        "incarnation",
        "generation",
        "start",
        "end",
        "start_ms",
        "end_ms",
        "duration_ms",
        "rebalance_ms",
        "member_count",
        "joined",
        "left",
        "likely_cause",
        "static_restarts",
        "protocol",
        "leader",
    )


def storm_intervals(history: DataFrame, min_rebalances: int = 5, window_seconds: int = 60) -> DataFrame:
    """Each storm as one interval: overlapping windows of ``window_seconds`` holding >= ``min_rebalances``
    new generations merge into one (start of the first, start of the last generation inside), with the
    peak count seen in one window."""
    w = Window.partitionBy("group").orderBy("start_ms").rangeBetween(0, window_seconds * 1000 - 1)
    hits = (
        history.withColumn("in_window", F.count("*").over(w))
        .withColumn("window_end_ms", F.max("start_ms").over(w))
        .where(F.col("in_window") >= min_rebalances)
    )
    order = Window.partitionBy("group").orderBy("start_ms")
    reach = F.max("window_end_ms").over(order.rowsBetween(Window.unboundedPreceding, -1))
    islands = hits.withColumn("_new", F.when(reach.isNull() | (F.col("start_ms") > reach), 1).otherwise(0)).withColumn(
        "_island", F.sum("_new").over(order.rowsBetween(Window.unboundedPreceding, 0))
    )
    return (
        islands.groupBy("group", "_island")
        .agg(
            F.min("start_ms").alias("storm_start_ms"),
            F.max("window_end_ms").alias("storm_end_ms"),
            F.max("in_window").alias("peak_in_window"),
        )
        .drop("_island")
        .withColumn("window_seconds", F.lit(window_seconds))
    )


def storms(history: DataFrame, min_rebalances: int = 5, window_seconds: int = 60) -> DataFrame:
    """Groups with >= ``min_rebalances`` new generations inside any ``window_seconds`` sliding window."""
    return (
        storm_intervals(history, min_rebalances, window_seconds)
        .groupBy("group")
        .agg(
            F.max("peak_in_window").alias("max_rebalances_in_window"),
            F.min("storm_start_ms").alias("first_storm_start_ms"),
            F.max("storm_end_ms").alias("last_storm_end_ms"),
            F.count("*").alias("storm_count"),
            F.lit(window_seconds).alias("window_seconds"),
        )
    )


def positions(commit_records: DataFrame) -> DataFrame:
    """Committed positions over time per group/partition, since the key's last tombstone (an offset
    deleted, expired or its group deleted starts it afresh; a key whose newest record is a tombstone has none)."""
    order = Window.partitionBy("group", "topic", "partition").orderBy("store_partition", "record_offset")
    since = commit_records.withColumn(
        "_after", F.sum(F.col("is_tombstone").cast("int")).over(order.rowsBetween(0, Window.unboundedFollowing))
    )
    return since.where((F.col("_after") == 0) & ~F.col("is_tombstone")).select(
        "group",
        "topic",
        "partition",
        "offset",
        "commit_timestamp",
        F.timestamp_millis("commit_timestamp").alias("committed_at"),
        "metadata",
        F.col("record_offset").alias("seq"),  # the store's order, for commits made in the same millisecond
    )


def latest_commits(commit_records: DataFrame) -> DataFrame:
    w = _newest_first("group", "topic", "partition")
    return (
        commit_records.withColumn("_n", F.row_number().over(w))
        .where(F.col("_n") == 1)
        .drop("_n")
        .where(~F.col("is_tombstone"))
    )


def lag(commit_records: DataFrame, ends: DataFrame) -> DataFrame:
    """Lag now per group/partition: the partition's log-end offset minus the last committed offset."""
    latest = latest_commits(commit_records)
    return latest.join(ends, ["topic", "partition"], "left").select(
        "group",
        "topic",
        "partition",
        F.col("offset").alias("committed_offset"),
        "log_end_offset",
        F.greatest(F.col("log_end_offset") - F.col("offset"), F.lit(0)).alias("lag"),
        "commit_timestamp",
    )


def _as_of(positions_df: DataFrame, history: DataFrame) -> DataFrame:
    """Commits and log-end samples of each group's partitions on one time line, each row carrying the
    newest log end and committed offset known at its time (``kind`` 0 = log-end sample, 1 = commit)."""
    keys = positions_df.select("group", "topic", "partition").distinct()
    samples = keys.join(history, ["topic", "partition"]).select(
        "group",
        "topic",
        "partition",
        F.col("sampled_ms").alias("t"),
        F.lit(0).alias("kind"),
        F.lit(0).cast("long").alias("seq"),
        F.col("log_end_offset").alias("end"),
        F.lit(None).cast("long").alias("offset"),
    )
    commits_ = positions_df.select(
        "group",
        "topic",
        "partition",
        F.col("commit_timestamp").alias("t"),
        F.lit(1).alias("kind"),
        "seq",
        F.lit(None).cast("long").alias("end"),
        "offset",
    )
    w = (
        Window.partitionBy("group", "topic", "partition")
        .orderBy("t", "kind", "seq")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    return (
        samples.unionByName(commits_)
        .withColumn("end_known", F.last("end", ignorenulls=True).over(w))
        .withColumn("offset_known", F.last("offset", ignorenulls=True).over(w))
    )


def _lags_at(pos: DataFrame, ends: DataFrame, history: DataFrame | None) -> DataFrame:
    """Each position with the log end the broker had recorded by its commit (samples and commits of a
    partition on one time line, the newest sample carried forward), else today's end, and the lag."""
    today = ends.select("topic", "partition", F.col("log_end_offset").alias("today_end"))
    if history is None:
        at = pos.withColumn("end_known", F.lit(None).cast("long"))
    else:
        samples = history.select(
            F.lit(None).cast("string").alias("group"),
            "topic",
            "partition",
            F.lit(None).cast("long").alias("offset"),
            F.col("sampled_ms").alias("commit_timestamp"),
            F.lit(0).alias("kind"),
            F.lit(0).cast("long").alias("seq"),
            F.col("log_end_offset").alias("end"),
        )
        commits_ = pos.select(
            "group",
            "topic",
            "partition",
            "offset",
            "commit_timestamp",
            F.lit(1).alias("kind"),
            "seq",
            F.lit(None).cast("long").alias("end"),
        )
        # by partition, not by group: the samples are not copied once per group reading the partition
        w = (
            Window.partitionBy("topic", "partition")
            .orderBy("commit_timestamp", "kind", "seq")
            .rowsBetween(Window.unboundedPreceding, 0)
        )
        at = (
            samples.unionByName(commits_)
            .withColumn("end_known", F.last("end", ignorenulls=True).over(w))
            .where("kind = 1")
        )
    return at.join(today, ["topic", "partition"], "left").select(
        "group",
        "topic",
        "partition",
        "offset",
        "commit_timestamp",
        F.timestamp_millis("commit_timestamp").alias("committed_at"),
        "seq",
        F.coalesce("end_known", "today_end").alias("log_end_offset"),
        F.when(F.col("end_known").isNotNull(), "recorded").otherwise("today").alias("end_source"),
        F.greatest(F.coalesce("end_known", "today_end") - F.col("offset"), F.lit(0)).alias("lag"),
    )


def lag_over_time(commit_records: DataFrame, ends: DataFrame, history: DataFrame | None = None) -> DataFrame:
    """Lag at each commit: the log end the broker had recorded by then (log-end history) minus the
    committed offset; without a recorded log end before the commit, today's log end (``end_source`` says which)."""
    return _lags_at(positions(commit_records), ends, history)


def topic_lag_timeline(commit_records: DataFrame, history: DataFrame) -> DataFrame:
    """Lag per group and topic over time, at every log-end sample and commit: the sum over the topic's
    partitions of (log end known then - offset committed by then), counting a partition once both exist."""
    at = _as_of(positions(commit_records), history).withColumn(
        "plag",
        F.when(
            F.col("end_known").isNotNull() & F.col("offset_known").isNotNull(),
            F.greatest(F.col("end_known") - F.col("offset_known"), F.lit(0)),
        ).otherwise(0),
    )
    per_partition = Window.partitionBy("group", "topic", "partition").orderBy("t", "kind", "seq")
    at = at.withColumn("delta", F.col("plag") - F.coalesce(F.lag("plag").over(per_partition), F.lit(0)))
    per_topic = (
        Window.partitionBy("group", "topic")
        .orderBy("t", "kind", "partition", "seq")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    at = (
        at.withColumn("lag", F.sum("delta").over(per_topic))
        .withColumn("_committed", F.max(F.col("offset_known").isNotNull().cast("int")).over(per_topic))
        .where("_committed = 1")
    )  # from the group's first commit on the topic
    last_at_t = Window.partitionBy("group", "topic", "t").orderBy(F.desc("kind"), F.desc("partition"), F.desc("seq"))
    return (
        at.withColumn("_n", F.row_number().over(last_at_t))
        .where("_n = 1")
        .select("group", "topic", F.col("t").alias("t_ms"), "lag")
    )


def commit_rate(commit_records: DataFrame, bucket_seconds: int = 60) -> DataFrame:
    """Offset-commit records per group per ``bucket_seconds`` (one record per committed partition)."""
    bucket = F.floor(F.col("commit_timestamp") / (bucket_seconds * 1000)) * (bucket_seconds * 1000)
    return (
        positions(commit_records)
        .groupBy("group", bucket.cast("long").alias("bucket_ms"))
        .agg(F.count("*").alias("commits"))
    )


STATUS_SCHEMA = (
    "group string, topic string, partition int, status string, rule string, commits_in_window int, last_offset long, "
    "lag long"
)


def _secs(ms: int) -> str:
    return f"{ms / 1000:,.0f} s" if ms >= 10_000 else f"{ms / 1000:,.1f} s"


def burrow_verdict(
    offsets: list[int],
    times: list[int],
    lags: list[int],
    now_ms: int,
    current_lag: int | None = None,
) -> tuple[str, str]:
    """Burrow's rules on one window of commits (oldest first; ``lags`` at each commit), and the rule that
    decided, in words; ``current_lag`` defaults to the last commit's. See ``consumer_status``."""
    pairs = list(zip(offsets, offsets[1:], strict=False))
    n = len(offsets)
    now_lag = lags[-1] if current_lag is None else current_lag
    if now_lag == 0:
        return "OK", "no lag now"
    if now_ms - times[-1] > times[-1] - times[0]:
        return "STOP", (
            f"no commit for {_secs(now_ms - times[-1])}, longer than the {_secs(times[-1] - times[0])} "
            f"its last {n} commits spanned; lag {now_lag:,}"
        )
    if 0 in lags:
        return "OK", f"lag was zero at a commit among the last {n}"
    if any(b < a for a, b in pairs):
        a, b = next((a, b) for a, b in pairs if b < a)
        return "REWIND", f"committed offset went backwards, {a:,} to {b:,}"
    if all(b == a for a, b in pairs):
        return "STALL", f"committed offset stuck at {offsets[-1]:,} over {n} commits while lag is {now_lag:,}"
    if all(b >= a for a, b in zip(lags, lags[1:], strict=False)):
        return "WARN", f"lag never decreased over {n} commits ({lags[0]:,} to {lags[-1]:,})"
    return "OK", f"lag decreased within the last {n} commits"


def burrow_status(offsets: list[int], times: list[int], lags: list[int], now_ms: int) -> str:
    return burrow_verdict(offsets, times, lags, now_ms)[0]


def consumer_status(
    commit_records: DataFrame,
    ends: DataFrame,
    window: int = 10,
    now_ms: int | None = None,
    history: DataFrame | None = None,
) -> DataFrame:
    """Burrow's evaluation (its current evaluator) per group/partition over the last ``window`` commits:

    1. OK when the current lag is zero;
    2. STOP when the time since the last commit exceeds the span of the window (commits stopped) — checked
       before the zero-lag-in-window rule, as Burrow does, because the window may be old;
    3. OK when the lag was zero at any commit of the window;
    4. REWIND when a committed offset went backwards inside the window;
    5. STALL when the offset never moved inside the window (lag is non-zero here);
    6. WARN when the lag never decreased across the window;
    7. OK otherwise.
    Lag at a commit is measured against the log end the broker recorded by then (``history``, from
    groupd/broker/ops/log_end_history.py); before the first recorded log end, against today's. The current lag is
    today's log end minus the last commit. Partitions whose offsets were deleted, and deleted groups, have
    no positions and so no status. Burrow's "recent broker offsets show zero lag" grace for STOP is not applied.
    """

    now = now_ms if now_ms is not None else wall_ms()
    newest = Window.partitionBy("group", "topic", "partition").orderBy(F.desc("commit_timestamp"), F.desc("seq"))
    last = (
        positions(commit_records).withColumn("_n", F.row_number().over(newest)).where(F.col("_n") <= window).drop("_n")
    )
    windows = (
        _lags_at(last, ends, history)
        .groupBy("group", "topic", "partition")
        .agg(F.sort_array(F.collect_list(F.struct("commit_timestamp", "seq", "offset", "lag"))).alias("commits"))
    )
    today = ends.select("topic", "partition", F.col("log_end_offset").alias("today_end"))
    joined = windows.join(today, ["topic", "partition"], "left")
    columns = [c.split()[0] for c in STATUS_SCHEMA.split(", ")]

    def evaluate(batches):
        # one pass over plain lists per batch of partitions (no pandas frame per partition)
        for pdf in batches:
            rows = []
            for group, topic, partition, commits, end in zip(
                pdf["group"], pdf["topic"], pdf["partition"], pdf["commits"], pdf["today_end"], strict=True
            ):
                offsets = [int(c["offset"]) for c in commits]
                times = [int(c["commit_timestamp"]) for c in commits]
                lags = [0 if c["lag"] is None or pd.isna(c["lag"]) else int(c["lag"]) for c in commits]
                current = lags[-1] if pd.isna(end) else max(int(end) - offsets[-1], 0)
                status, rule = burrow_verdict(offsets, times, lags, now, current)
                rows.append((group, topic, int(partition), status, rule, len(offsets), offsets[-1], current))
            yield pd.DataFrame(rows, columns=columns)

    return joined.select("group", "topic", "partition", "commits", "today_end").mapInPandas(evaluate, STATUS_SCHEMA)


SEVERITY = {"STOP": 4, "STALL": 4, "REWIND": 4, "WARN": 2, "OK": 0}


def overview(
    history: DataFrame, storm_df: DataFrame, lag_df: DataFrame, status: DataFrame, commit_records: DataFrame
) -> DataFrame:
    """Groups at a glance, one row per live group: kind, state, worst Burrow status with its rule, lag now,
    new generations, last storm, last commit; ordered with the ones needing attention first."""
    last_gen = Window.partitionBy("group").orderBy(F.desc("incarnation"), F.desc("generation"))
    gens = history.withColumn("_n", F.row_number().over(last_gen))
    current = gens.where("_n = 1").select(
        "group",
        "group_type",
        F.col("generation").alias("generation_now"),
        F.col("member_count").alias("members_now"),
        F.col("start_ms").alias("last_rebalance_ms"),
    )
    counts = history.groupBy("group").agg(
        F.count("*").alias("generations"),
        F.sum(F.size("static_restarts")).alias("static_restarts"),
    )
    severity = F.create_map(*[x for k, v in SEVERITY.items() for x in (F.lit(k), F.lit(v))])
    worst = Window.partitionBy("group").orderBy(F.desc("_sev"), F.desc("lag"), "topic", "partition")
    st = status.withColumn("_sev", severity[F.col("status")]).withColumn("_n", F.row_number().over(worst))
    bad = status.where("status != 'OK'").groupBy("group").agg(F.count("*").alias("partitions_not_ok"))
    worst_row = st.where("_n = 1").select(
        "group",
        F.col("status").alias("burrow"),
        F.concat_ws(
            "", F.col("topic"), F.lit("-"), F.col("partition").cast("string"), F.lit(": "), F.col("rule")
        ).alias("burrow_rule"),
        "_sev",
    )
    lag_now = lag_df.groupBy("group").agg(F.sum("lag").alias("lag_now"), F.countDistinct("topic").alias("topics"))
    last_commit = positions(commit_records).groupBy("group").agg(F.max("commit_timestamp").alias("last_commit_ms"))
    last_storm = storm_df.groupBy("group").agg(
        F.max("storm_end_ms").alias("last_storm_ms"), F.max("peak_in_window").alias("storm_peak")
    )
    names = history.select("group").union(lag_df.select("group")).distinct()
    out = (
        names.join(current, "group", "left")
        .join(counts, "group", "left")
        .join(worst_row, "group", "left")
        .join(bad, "group", "left")
        .join(lag_now, "group", "left")
        .join(last_storm, "group", "left")
        .join(last_commit, "group", "left")
        .withColumn("group_type", F.coalesce("group_type", F.lit("offsets only")))
        .withColumn(
            "state",
            F.when(F.col("generation_now").isNull(), "no members")
            .when(F.col("members_now") > 0, "Stable")
            .otherwise("Empty"),
        )
        .fillna({"generations": 0, "static_restarts": 0, "partitions_not_ok": 0, "_sev": 0})
    )
    return out.orderBy(
        F.desc("_sev"), F.desc(F.col("last_storm_ms").isNotNull()), F.desc_nulls_last("lag_now"), "group"
    ).drop("_sev")


def summary(history: DataFrame, storm_df: DataFrame, lag_df: DataFrame) -> DataFrame:
    per_group = history.groupBy("group").agg(
        F.count("*").alias("generations"),
        F.max("generation").alias("last_generation"),
        F.max("member_count").alias("max_members"),
    )
    lag_per_group = lag_df.groupBy("group").agg(F.sum("lag").alias("total_lag"))
    storming = storm_df.select("group", F.lit(True).alias("storm"))
    return (
        per_group.join(lag_per_group, "group", "full")
        .join(storming, "group", "left")
        .fillna({"storm": False, "total_lag": 0})
        .orderBy("group")
    )
