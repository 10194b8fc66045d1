"""Pipeline run time on a generated store: G groups, N offset-commit records spread over the 50 offsets
partitions (the issue's scale is 10,000 groups and 5,000,000 records: ``--records 5000000``), six data
partitions of topic ``events`` and the log ends a broker would have recorded every 10 s.

Without ``--report`` it times reading the commits and the lag and positions jobs; with ``--report`` the
whole report job (``python -m groupd.pipeline report``: every read, job and chart, and the HTML written)."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.local import LocalEngine
from groupd.storage.log import Log, LogConfig

T0 = 1_700_000_000_000


def generate(log_dirs: Path, groups: int, records: int, per_batch: int = 100) -> float:
    started = time.perf_counter()
    logs: dict[int, Log] = {}
    pending: dict[int, list] = {}
    for i in range(records):
        group = f"group-{i % groups}"
        p = partition_for(group, 50)
        key = encode_key(OffsetCommitKey(group, "events", (i // groups) % 6))
        value = encode_value(OffsetCommitValue(i // groups, "", T0 + i))
        batch = pending.setdefault(p, [])
        batch.append((key, value))
        if len(batch) == per_batch:
            lg = logs.get(p) or logs.setdefault(
                p, Log.open(log_dirs / f"{OFFSETS_TOPIC}-{p}", LogConfig(segment_bytes=1 << 30))
            )
            lg.append_records(batch, T0 + i)
            pending[p] = []
    for p, batch in pending.items():
        if batch:
            lg = logs.get(p) or logs.setdefault(
                p, Log.open(log_dirs / f"{OFFSETS_TOPIC}-{p}", LogConfig(segment_bytes=1 << 30))
            )
            lg.append_records(batch, T0 + records)
    for lg in logs.values():
        lg.flush()
        lg.close()
    return time.perf_counter() - started


DATA_PARTITIONS = 6
HEADROOM = 100  # records past the highest committed offset, so the groups have lag


def data_and_history(log_dirs: Path, groups: int, records: int) -> None:
    """The ``events`` partitions at their final log end, and the log-end history leading there."""
    from groupd.broker.ops.log_end_history import LogEndRecorder

    end = records // groups + HEADROOM
    for p in range(DATA_PARTITIONS):
        lg = Log.open(log_dirs / f"events-{p}")
        for start in range(0, end, 500):
            lg.append_records([(None, b"e")] * min(500, end - start), T0 + records)
        lg.flush()
        lg.close()
    clock = {"t": T0}
    span = records  # one commit record per ms in generate()
    recorder = LogEndRecorder(
        LocalEngine(log_dirs),
        10_000,
        -1,
        lambda: [("events", p, 0, end * (clock["t"] - T0) // span) for p in range(DATA_PARTITIONS)],
    )
    for t in range(T0, T0 + span + 1, 10_000):
        clock["t"] = t
        recorder.tick(t)
    recorder.log.flush()
    recorder.log.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--report", action="store_true", help="time the whole report job instead")
    args = parser.parse_args()
    from groupd.pipeline import jobs
    from groupd.pipeline.__main__ import run, session

    with tempfile.TemporaryDirectory() as tmp:
        gen_s = generate(Path(tmp), args.groups, args.records)
        data_and_history(Path(tmp), args.groups, args.records)
        out = {"groups": args.groups, "records": args.records, "generate_s": round(gen_s, 1)}
        if args.report:
            started = time.perf_counter()
            path = run(
                "report",
                tmp,
                Path(tmp) / "out",
                args.master,
                now_ms=T0 + args.records + 60_000,
                say=lambda line: print("  " + line, flush=True),
            )
            out["report_s"] = round(time.perf_counter() - started, 1)
            out["report_bytes"] = path.stat().st_size
            print(json.dumps(out, indent=1))
            return
        spark = session(args.master)
        started = time.perf_counter()
        commits = jobs.commits(spark, tmp)
        n = commits.count()
        out["read_s"] = round(time.perf_counter() - started, 1)
        out["rows"] = n
        started = time.perf_counter()
        ends = jobs.log_ends(spark, tmp)
        out["lag_rows"] = jobs.lag(commits, ends).count()
        out["positions_rows"] = jobs.positions(commits).count()
        out["jobs_s"] = round(time.perf_counter() - started, 1)
        out["rows_per_s"] = round(n / max(out["read_s"], 1e-9))
        spark.stop()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
