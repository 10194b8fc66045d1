"""Broker metrics hooks. The connection layer calls these on every request; kept cheap."""

from __future__ import annotations

import time
from typing import Any


class Metrics:
    """Hooks for request and byte accounting (the Prometheus exporter fills these in)."""

    def request_started(self, api_key: int) -> float:
        return time.perf_counter()

    def request_finished(self, api_key: int, started: float, response: Any) -> None:
        pass

    def bytes_in(self, n: int) -> None:
        pass

    def bytes_out(self, n: int) -> None:
        pass
