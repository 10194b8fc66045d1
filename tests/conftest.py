from __future__ import annotations

import pytest

from groupd.broker.app import Broker
from groupd.broker.config import default_config
from tests.harness import FAST_CONFIG, BrokerProcess, WireClient


def broker_config(tmp_path, **overrides):
    values = {
        **FAST_CONFIG,
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"),
        "metrics.listener": "",
    }
    values.update(overrides)
    return default_config(**values)


@pytest.fixture
async def broker(tmp_path):
    """An in-process broker on a free port (wire tests)."""
    b = Broker(broker_config(tmp_path))
    await b.start()
    yield b
    await b.stop()


@pytest.fixture
async def wire(broker):
    client = await WireClient.connect(broker.port)
    yield client
    await client.close()


@pytest.fixture
def broker_process(tmp_path):
    """``python -m groupd`` as a child process (real clients, restarts)."""
    proc = BrokerProcess(tmp_path / "data")
    proc.start()
    yield proc
    proc.kill()
