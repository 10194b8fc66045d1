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

from clock import wall_ms
from pipeline import datasource, store


def register(spark: SparkSession) -> None:
    spark.dataSource.register(datasource.GroupdDataSource)


def commits(spark: SparkSession, log_dirs: str) -> DataFrame:
    return spark.read.format("groupd").option("records", "commits").load(log_dirs)


def groups(spark: SparkSession, log_dirs: str) -> DataFrame:
    return spark.read.format("groupd").option("records", "groups").load(log_dirs)


def log_ends(spark: SparkSession, log_dirs: str) -> DataFrame:
    rows = store.log_ends(log_dirs)
    return spark.createDataFrame(rows, "topic string, partition int, log_start_offset long, log_end_offset long")


def rebalance_history(group_records: DataFrame) -> DataFrame:
    """One row per generation: when it became current and ended, its members, who joined/left, a likely cause.

    Cause, from the difference with the previous generation: more members -> "join"; fewer ->
    "leave or session expiry"; same count, different ids -> "member replaced"; same members ->
    "rejoin (metadata change)"; the first generation seen -> "group formed"; no members -> "emptied".
    """
    gens = group_records.where(~F.col("is_tombstone")).select(
        "group", "generation", "protocol", "leader", "member_count",
        F.coalesce(F.col("state_timestamp"), F.col("record_timestamp")).alias("start_ms"),
        F.transform("members", lambda m: m["member_id"]).alias("member_ids"),
        "record_offset", "store_partition",
    )
    # a generation can be written twice (a static member's replacement rewrites it): keep its first record
    first = Window.partitionBy("group", "generation").orderBy("store_partition", "record_offset")
    gens = gens.withColumn("_n", F.row_number().over(first)).where(F.col("_n") == 1).drop("_n")
    w = Window.partitionBy("group").orderBy("generation")
    prev_ids = F.lag("member_ids").over(w)
    prev_count = F.lag("member_count").over(w)
    out = (
        gens.withColumn("end_ms", F.lead("start_ms").over(w))
        .withColumn("duration_ms", F.col("end_ms") - F.col("start_ms"))
        .withColumn("joined", F.when(prev_ids.isNull(), F.col("member_ids")).otherwise(F.array_except("member_ids", prev_ids)))
        .withColumn("left", F.when(prev_ids.isNull(), F.array().cast("array<string>")).otherwise(F.array_except(prev_ids, "member_ids")))
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
        "group", "generation", "start", "end", "start_ms", "end_ms", "duration_ms", "member_count", "joined", "left",
        "likely_cause", "protocol", "leader",
    )


def storms(history: DataFrame, min_rebalances: int = 5, window_seconds: int = 60) -> DataFrame:
    """Groups with >= ``min_rebalances`` new generations inside any ``window_seconds`` sliding window."""
    w = Window.partitionBy("group").orderBy("start_ms").rangeBetween(0, window_seconds * 1000 - 1)
    counted = history.withColumn("in_window", F.count("*").over(w)).withColumn("window_end_ms", F.max("start_ms").over(w))
    hits = counted.where(F.col("in_window") >= min_rebalances)
    return hits.groupBy("group").agg(
        F.max("in_window").alias("max_rebalances_in_window"),
        F.min("start_ms").alias("first_storm_start_ms"),
        F.max("window_end_ms").alias("last_storm_end_ms"),
        F.lit(window_seconds).alias("window_seconds"),
    )


def positions(commit_records: DataFrame) -> DataFrame:
    """Committed positions over time per group/partition (tombstones excluded)."""
    return commit_records.where(~F.col("is_tombstone")).select(
        "group", "topic", "partition", "offset", "commit_timestamp", F.timestamp_millis("commit_timestamp").alias("committed_at"), "metadata",
    )


def latest_commits(commit_records: DataFrame) -> DataFrame:
    w = Window.partitionBy("group", "topic", "partition").orderBy(F.desc("store_partition"), F.desc("record_offset"))
    return (
        commit_records.withColumn("_n", F.row_number().over(w)).where(F.col("_n") == 1).drop("_n")
        .where(~F.col("is_tombstone"))
    )


def lag(commit_records: DataFrame, ends: DataFrame) -> DataFrame:
    """Lag now per group/partition: the partition's log-end offset minus the last committed offset."""
    latest = latest_commits(commit_records)
    return latest.join(ends, ["topic", "partition"], "left").select(
        "group", "topic", "partition", F.col("offset").alias("committed_offset"), "log_end_offset",
        F.greatest(F.col("log_end_offset") - F.col("offset"), F.lit(0)).alias("lag"), "commit_timestamp",
    )


def lag_over_time(commit_records: DataFrame, ends: DataFrame) -> DataFrame:
    """Lag at each commit, against today's log end (the store keeps no history of the log end)."""
    return positions(commit_records).join(ends, ["topic", "partition"], "left").withColumn(
        "lag", F.greatest(F.col("log_end_offset") - F.col("offset"), F.lit(0))
    )


STATUS_SCHEMA = "group string, topic string, partition int, status string, commits_in_window int, last_offset long, lag long"


def burrow_status(offsets: list[int], times: list[int], lags: list[int], now_ms: int) -> str:
    """Burrow's rules on one window of commits (oldest first); see ``consumer_status``."""
    pairs = list(zip(offsets, offsets[1:], strict=False))
    if lags[-1] == 0:
        return "OK"
    if now_ms - times[-1] > times[-1] - times[0]:
        return "STOP"
    if 0 in lags:
        return "OK"
    if any(b < a for a, b in pairs):
        return "REWIND"
    if all(b == a for a, b in pairs):
        return "STALL"
    if all(b >= a for a, b in zip(lags, lags[1:], strict=False)):
        return "WARN"
    return "OK"


def consumer_status(commit_records: DataFrame, ends: DataFrame, window: int = 10, now_ms: int | None = None) -> DataFrame:
    """Burrow's evaluation (its current evaluator) per group/partition over the last ``window`` commits:

    1. OK when the current lag is zero;
    2. STOP when the time since the last commit exceeds the span of the window (commits stopped) — checked
       before the zero-lag-in-window rule, as Burrow does, because the window may be old;
    3. OK when the lag was zero at any commit of the window;
    4. REWIND when a committed offset went backwards inside the window;
    5. STALL when the offset never moved inside the window (lag is non-zero here);
    6. WARN when the lag never decreased across the window;
    7. OK otherwise.
    Lag at a commit is computed against the partition's current log end (the store keeps no older one), so
    WARN can only show once per-commit log ends exist; Burrow's "recent broker offsets show zero lag" grace
    for STOP has no data here either and is not applied.
    """

    now = now_ms if now_ms is not None else wall_ms()
    joined = positions(commit_records).join(ends.select("topic", "partition", "log_end_offset"), ["topic", "partition"], "left")

    def evaluate(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values("commit_timestamp").tail(window)
        offsets = pdf["offset"].tolist()
        times = pdf["commit_timestamp"].tolist()
        end = pdf["log_end_offset"].iloc[-1]
        end = offsets[-1] if pd.isna(end) else int(end)
        lags = [max(end - o, 0) for o in offsets]
        status = burrow_status(offsets, times, lags, now)
        first = pdf.iloc[0]
        return pd.DataFrame([{
            "group": first["group"], "topic": first["topic"], "partition": int(first["partition"]), "status": status,
            "commits_in_window": len(offsets), "last_offset": int(offsets[-1]), "lag": int(lags[-1]),
        }])

    return joined.groupBy("group", "topic", "partition").applyInPandas(evaluate, STATUS_SCHEMA)


def summary(history: DataFrame, storm_df: DataFrame, lag_df: DataFrame) -> DataFrame:
    per_group = history.groupBy("group").agg(
        F.count("*").alias("generations"), F.max("generation").alias("last_generation"),
        F.max("member_count").alias("max_members"),
    )
    lag_per_group = lag_df.groupBy("group").agg(F.sum("lag").alias("total_lag"))
    storming = storm_df.select("group", F.lit(True).alias("storm"))
    return (
        per_group.join(lag_per_group, "group", "full").join(storming, "group", "left")
        .fillna({"storm": False, "total_lag": 0}).orderBy("group")
    )
