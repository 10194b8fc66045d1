"""``python -m groupd.pipeline <job> --log-dirs ./data --out ./pipeline-out [--master local[2]]``."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from groupd.clock import wall_ms

if TYPE_CHECKING:  # PySpark and pandas are the pipeline extra's, imported by the jobs when they run
    import pandas as pd
    from pyspark.sql import SparkSession

T = TypeVar("T")

JOBS = ("history", "storms", "status", "positions", "lag", "lag-over-time", "summary", "overview", "removed", "report")
LOOPBACK = ("127.0.0.1", "localhost")


def _on_loopback(master: str) -> bool:
    return master.startswith("local") or urlparse(master).hostname in LOOPBACK


def session(master: str, spark_log: Path | None = None) -> SparkSession:
    """A Spark session for any master. The Python workers run this interpreter (groupd importable, unless
    PYSPARK_PYTHON says otherwise); with a local or loopback master the driver binds 127.0.0.1 only; Spark
    logs errors only and draws no progress bars. With ``spark_log`` the JVM's own stderr (its start-up
    notices and any error it logs) goes to that file instead of the terminal."""
    import os
    import sys

    if spark_log is not None:
        spark_log.parent.mkdir(parents=True, exist_ok=True)
        saved = os.dup(2)
        with open(spark_log, "ab") as f:
            os.dup2(f.fileno(), 2)  # the JVM started now inherits it as its stderr
        try:
            return session(master)
        finally:
            os.dup2(saved, 2)
            os.close(saved)

    from pyspark.sql import SparkSession

    from groupd.pipeline import jobs

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName("groupd-pipeline")
    if _on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    spark = (
        builder
        .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jobs.register(spark)
    return spark


class Steps:
    """One line per step on stdout: what it did and how long it took."""

    def __init__(self, say: Callable[[str], None] = print) -> None:
        self.say = say
        self.started = time.perf_counter()

    def __call__(self, what: str | Callable[[T], str], fn: Callable[[], T]) -> T:
        """Run ``fn``; ``what`` says what it did, or is told its result to say it."""
        began = time.perf_counter()
        out = fn()
        text = what(out) if callable(what) else what
        self.say(f"{text} ({time.perf_counter() - began:.1f} s)")
        return out


def report_frames(
    spark: SparkSession,
    log_dirs: str,
    storm_min: int = 5,
    storm_window: int = 60,
    now_ms: int | None = None,
    detail_groups: int = 40,
    steps: Steps | None = None,
) -> dict[str, Any]:
    """Everything the report shows, as pandas frames: small aggregates for every group, and the detailed
    series (generations, lag timeline, commit rate) for the ``detail_groups`` groups needing attention most."""
    from pyspark.sql import functions as F

    from groupd.pipeline import jobs

    steps = steps or Steps(lambda _: None)
    now = now_ms if now_ms is not None else wall_ms()
    c = jobs.commits(spark, log_dirs).cache()
    g = jobs.groups(spark, log_dirs).cache()
    hist = jobs.log_end_history(spark, log_dirs).cache()
    counts = steps(
        lambda n: (
            f"read {log_dirs}: {n['commit_records']:,} offset-commit records, {n['group_records']:,} group records, "
            f"{n['log_end_samples']:,} log-end samples"
        ),
        lambda: {"commit_records": c.count(), "group_records": g.count(), "log_end_samples": hist.count()},
    )
    has_history = counts["log_end_samples"] > 0
    ends = jobs.log_ends(spark, log_dirs)
    removed = steps(lambda r: f"removed groups: {len(r)}", lambda: jobs.removed_groups(g, c).toPandas())
    removed_df = spark.createDataFrame(removed[["group"]]) if len(removed) else jobs.removed_groups(g, c).limit(0)
    c_live = jobs.live(c, removed_df)
    history = jobs.live(jobs.rebalance_history(g), removed_df).cache()
    storms = steps(
        lambda s: f"storms: {len(s)}", lambda: jobs.storm_intervals(history, storm_min, storm_window).toPandas()
    )
    status_df = jobs.consumer_status(c_live, ends, now_ms=now, history=hist if has_history else None).cache()
    status = steps(lambda s: f"Burrow status of {len(s):,} partitions", status_df.toPandas)
    lag_df = jobs.lag(c_live, ends)
    overview = steps(
        lambda o: f"overview of {len(o):,} live groups",
        lambda: jobs.overview(
            history, jobs.storm_intervals(history, storm_min, storm_window), lag_df, status_df, c_live
        ).toPandas(),
    )
    chosen = list(overview["group"][:detail_groups])
    pick = F.col("group").isin(chosen)
    detail = steps(
        lambda d: (
            f"detail of {len(chosen)} groups: {len(d['history']):,} generations, "
            + (f"{len(d['lag_timeline']):,} lag points" if has_history else "no lag history")
        ),
        lambda: {
            "history": history.where(pick).toPandas(),
            "lag_timeline": jobs.topic_lag_timeline(c_live.where(pick), hist).toPandas() if has_history else None,
            "commit_rate": jobs.commit_rate(c_live.where(pick)).toPandas(),
        },
    )
    span = steps(
        "time span of the store",
        lambda: (
            g.select(F.min("record_timestamp").alias("a"), F.max("record_timestamp").alias("b"))
            .union(c.select(F.min("record_timestamp"), F.max("record_timestamp")))
            .agg(F.min("a"), F.max("b"))
            .first()
        ),
    )
    totals = history.agg(F.count("*"), F.countDistinct("group")).first()
    assert span is not None and totals is not None  # an aggregate over no grouping is one row, even of nothing
    meta = {
        "store": str(Path(log_dirs).resolve()),
        "span_ms": (span[0], span[1]),
        "generated_ms": wall_ms(),
        "now_ms": now,
        "counts": {**counts, "generations": totals[0], "groups": len(overview), "removed": len(removed)},
        "has_history": has_history,
        "storm_min": storm_min,
        "storm_window": storm_window,
        "detail_groups": len(chosen),
    }
    for df in (c, g, hist, history, status_df):
        df.unpersist()
    return {"meta": meta, "overview": overview, "removed": removed, "storms": storms, "status": status, **detail}


def run(
    job: str,
    log_dirs: str,
    out: Path,
    master: str = "local[2]",
    storm_min: int = 5,
    storm_window: int = 60,
    now_ms: int | None = None,
    say: Callable[[str], None] | None = None,
    spark_log: Path | None = None,
) -> Path:
    from groupd.pipeline import jobs, report

    steps = Steps(say or (lambda _: None))
    spark = steps(
        f"Spark session on {master}" + (f" (Spark's log: {spark_log})" if spark_log else ""),
        lambda: session(master, spark_log),
    )
    out.mkdir(parents=True, exist_ok=True)
    if job == "report":
        frames = report_frames(spark, log_dirs, storm_min, storm_window, now_ms, steps=steps)
        path = out / "report.html"
        steps(lambda _: f"wrote {path}", lambda: path.write_text(report.render(frames)))
        return path
    c = jobs.commits(spark, log_dirs)
    g = jobs.groups(spark, log_dirs)
    ends = jobs.log_ends(spark, log_dirs)
    hist = jobs.log_end_history(spark, log_dirs)
    removed = jobs.removed_groups(g, c)
    history = jobs.rebalance_history(g)
    results = {
        "history": lambda: history,
        "storms": lambda: jobs.storms(history, storm_min, storm_window),
        "status": lambda: jobs.consumer_status(jobs.live(c, removed), ends, now_ms=now_ms, history=hist),
        "positions": lambda: jobs.positions(c),
        "lag": lambda: jobs.lag(c, ends),
        "lag-over-time": lambda: jobs.lag_over_time(c, ends, hist),
        "summary": lambda: jobs.summary(history, jobs.storms(history, storm_min, storm_window), jobs.lag(c, ends)),
        "removed": lambda: removed,
        "overview": lambda: jobs.overview(
            jobs.live(history, removed),
            jobs.storm_intervals(history, storm_min, storm_window),
            jobs.lag(jobs.live(c, removed), ends),
            jobs.consumer_status(jobs.live(c, removed), ends, now_ms=now_ms, history=hist),
            jobs.live(c, removed),
        ),
    }
    df: pd.DataFrame = steps(f"ran {job}", lambda: results[job]().toPandas())
    path = out / f"{job}.json"
    path.write_text(json.dumps(json.loads(df.to_json(orient="records", date_format="iso")), indent=1))
    steps(lambda _: f"wrote {path}", lambda: None)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m groupd.pipeline")
    parser.add_argument("job", choices=JOBS)
    parser.add_argument("--log-dirs", default="./data")
    parser.add_argument("--out", default="./pipeline-out")
    parser.add_argument("--master", default="local[2]", help="any Spark master, e.g. spark://host:7077")
    parser.add_argument("--storm-min", type=int, default=5)
    parser.add_argument("--storm-window-seconds", type=int, default=60)
    parser.add_argument("--now-ms", type=int, default=None, help="evaluate statuses as of this time (default: now)")
    args = parser.parse_args()
    out = Path(args.out)
    run(
        args.job,
        args.log_dirs,
        out,
        args.master,
        args.storm_min,
        args.storm_window_seconds,
        args.now_ms,
        say=lambda s: print(s, flush=True),
        spark_log=out / "spark.log",
    )


if __name__ == "__main__":
    main()
