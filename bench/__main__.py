"""Run one scenario against any Kafka broker: ``python -m bench rebalance --target 127.0.0.1:9092``."""

from __future__ import annotations

import argparse
import asyncio
import json

from bench import consumer_scenarios, scenarios


def use_uvloop() -> None:
    """The load generator on uvloop too: the less it costs, the more of the machine the broker gets."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return
    uvloop.install()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "scenario", choices=["rebalance", "commits", "steady", "churn", "scale", "down_conversion", "consumer_protocol"]
    )
    parser.add_argument("--pid", type=int, help="the broker's pid, for RSS (scale) and CPU (steady)")
    parser.add_argument("--target", default="127.0.0.1:9092")
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument(
        "--members", type=int, default=3, help="members a group (rebalance); members in all (consumer_protocol)"
    )
    parser.add_argument("--committers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument(
        "--compression",
        default="none",
        choices=["none", "gzip", "snappy", "lz4"],
        help="down_conversion: the stored batches' codec",
    )
    args = parser.parse_args()
    host, _, port = args.target.rpartition(":")
    use_uvloop()
    if args.scenario == "rebalance":
        result = asyncio.run(
            scenarios.rebalance(host, int(port), args.groups, args.members, max_seconds=args.seconds * 10)
        ).summary()
    elif args.scenario == "commits":
        result = asyncio.run(scenarios.commits(host, int(port), args.committers, max_seconds=args.seconds)).summary()
    elif args.scenario == "churn":
        result = asyncio.run(scenarios.churn(host, int(port), args.groups, max_seconds=args.seconds)).summary()
    elif args.scenario == "down_conversion":
        result = asyncio.run(
            scenarios.down_conversion(
                host, int(port), max_seconds=args.seconds * 12, pid=args.pid, compression=args.compression
            )
        )
    elif args.scenario == "consumer_protocol":
        result = asyncio.run(
            consumer_scenarios.side_by_side(host, int(port), args.members, 10, seconds=args.seconds, pid=args.pid)
        )
    elif args.scenario == "scale":
        result = asyncio.run(scenarios.scale(host, int(port), args.groups, pid=args.pid, hb_seconds=args.seconds))
    else:
        result = asyncio.run(scenarios.steady(host, int(port), args.groups, max_seconds=args.seconds, pid=args.pid))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
