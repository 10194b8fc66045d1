"""groupd: start the broker. ``python server.py --config server.properties --override key=value``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from broker.app import Broker
from broker.config import Config, ConfigError, load_config
from broker.ops.logoutput import setup_logging


async def serve(config: Config) -> None:
    broker = Broker(config)
    await broker.start()
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    logging.getLogger("groupd").info("signal received, shutting down")
    await broker.stop()


def tune_gc() -> None:
    """Fewer cyclic-GC passes: a coordinator holds many long-lived objects (groups, members, offsets)
    and allocates a few short-lived ones per request, so with the default threshold of 700 a full pass
    over everything held ran every few thousand requests and its cost grew with the number of groups.
    Reference counting frees almost all request garbage; the collector only has cycles left to find."""
    gc.collect()
    gc.freeze()  # what start-up created (modules, schemas, codecs) is never scanned again
    gc.set_threshold(50_000, 50, 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="groupd", description="A Kafka-protocol broker with a faithful group coordinator")
    parser.add_argument("--config", help="a Kafka-style server.properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="set one config key")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    try:
        config = load_config(args.config, args.override)
    except ConfigError as exc:
        print(f"groupd: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(config)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        logging.getLogger("groupd").warning("uvloop not available, using the default event loop")
    tune_gc()
    try:
        asyncio.run(serve(config))
    except OSError as exc:
        print(f"groupd: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
