"""``python -m pipeline <job> --log-dirs ./data --out ./pipeline-out [--master local[2]]``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

JOBS = ("history", "storms", "status", "positions", "lag", "lag-over-time", "summary", "report")


def session(master: str):
    import os
    import sys

    from pyspark.sql import SparkSession

    from pipeline import jobs

    builder = SparkSession.builder.master(master).appName("groupd-pipeline")
    if master.startswith("local"):
        # local runs: the workers use this interpreter (with groupd importable) and Spark binds loopback only
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    spark = (
        builder
        .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC").getOrCreate()
    )
    jobs.register(spark)
    return spark


def run(job: str, log_dirs: str, out: Path, master: str = "local[2]", storm_min: int = 5, storm_window: int = 60) -> Path:
    from pipeline import jobs, report

    spark = session(master)
    out.mkdir(parents=True, exist_ok=True)
    c = jobs.commits(spark, log_dirs)
    g = jobs.groups(spark, log_dirs)
    ends = jobs.log_ends(spark, log_dirs)
    history = jobs.rebalance_history(g)
    results = {
        "history": lambda: history,
        "storms": lambda: jobs.storms(history, storm_min, storm_window),
        "status": lambda: jobs.consumer_status(c, ends),
        "positions": lambda: jobs.positions(c),
        "lag": lambda: jobs.lag(c, ends),
        "lag-over-time": lambda: jobs.lag_over_time(c, ends),
        "summary": lambda: jobs.summary(history, jobs.storms(history, storm_min, storm_window), jobs.lag(c, ends)),
    }
    if job == "report":
        frames = {k: results[k]().toPandas() for k in ("history", "storms", "lag", "status", "summary")}
        path = out / "report.html"
        path.write_text(report.render(frames["history"], frames["storms"], frames["lag"], frames["status"], frames["summary"]))
        return path
    df = results[job]().toPandas()
    path = out / f"{job}.json"
    path.write_text(json.dumps(json.loads(df.to_json(orient="records", date_format="iso")), indent=1))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline")
    parser.add_argument("job", choices=JOBS)
    parser.add_argument("--log-dirs", default="./data")
    parser.add_argument("--out", default="./pipeline-out")
    parser.add_argument("--master", default="local[2]", help="any Spark master, e.g. spark://host:7077")
    parser.add_argument("--storm-min", type=int, default=5)
    parser.add_argument("--storm-window-seconds", type=int, default=60)
    args = parser.parse_args()
    path = run(args.job, args.log_dirs, Path(args.out), args.master, args.storm_min, args.storm_window_seconds)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
