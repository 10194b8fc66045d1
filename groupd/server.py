"""groupd: start the broker. ``groupd --config server.properties --override key=value`` (or ``python -m groupd``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import logging.handlers
import os
import signal
import sys

from groupd import __version__
from groupd.broker.app import Broker
from groupd.broker.config import Config, ConfigError, load_config
from groupd.broker.ops.logoutput import setup_logging
from groupd.storage.errors import StorageError
from groupd.storage.logdirfailure import channel as log_dir_failures

# Kafka's status when its last log directory has failed (LogManager: Exit.halt(1))
LOG_DIR_FAILED_EXIT = 1


async def serve(config: Config) -> None:
    broker = Broker(config)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the start: a stop asked during it waits for its end
        loop.add_signal_handler(sig, done.set)
    await broker.start()
    await done.wait()
    logging.getLogger("groupd").info("signal received, shutting down")
    await broker.stop()


def halt_on_log_dir_failure(what: str, exc: BaseException) -> None:
    """A failed write or sync took the one log directory offline (groupd/storage/logdirfailure.py): halt, as
    Kafka does when no live log directory is left. Nothing is flushed or answered on the way out
    (the disk just refused a write); what was acknowledged is durable and the next start recovers it."""
    logging.getLogger("groupd").critical(
        "%s failed (%s): the log directory is offline; groupd halts with exit status %d for its supervisor "
        "to restart it (start-up recovers everything acknowledged once the disk takes writes again)",
        what, exc, LOG_DIR_FAILED_EXIT,
    )
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(LOG_DIR_FAILED_EXIT)


def tune_gc() -> None:
    """Fewer cyclic-GC passes: a coordinator holds many long-lived objects (groups, members, offsets)
    and allocates a few short-lived ones per request, so with the default threshold of 700 a full pass
    over everything held ran every few thousand requests and its cost grew with the number of groups.
    Reference counting frees almost all request garbage; the collector only has cycles left to find."""
    gc.collect()
    gc.freeze()  # what start-up created (modules, schemas, codecs) is never scanned again
    gc.set_threshold(50_000, 50, 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="groupd", description="A Kafka-protocol broker with a faithful group coordinator"
    )
    parser.add_argument("--config", help="a Kafka-style server.properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="set one config key")
    parser.add_argument("--version", action="version", version=f"groupd {__version__}")
    args = parser.parse_args(argv)
    # Lines logged while the config is read (an unknown key's warning) wait until the configured
    # format is set up, so they come out like every other line.
    early = logging.handlers.BufferingHandler(capacity=1000)
    logging.getLogger().addHandler(early)
    logging.getLogger().setLevel(logging.INFO)
    try:
        config = load_config(args.config, args.override)
    except ConfigError as exc:
        for record in early.buffer:
            print(f"groupd: {record.levelname.lower()}: {record.getMessage()}", file=sys.stderr)
        print(f"groupd: configuration error: {exc}", file=sys.stderr)
        return 2
    finally:
        logging.getLogger().removeHandler(early)
    setup_logging(config)
    for record in early.buffer:
        logging.getLogger(record.name).handle(record)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        logging.getLogger("groupd").warning("uvloop not available, using the default event loop")
    tune_gc()
    log_dir_failures.handler = halt_on_log_dir_failure
    try:
        asyncio.run(serve(config))
    except (OSError, StorageError, ConfigError) as exc:  # a port taken, a full disk, a changed count: one line
        print(f"groupd: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
