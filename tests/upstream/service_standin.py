"""Stand-in for kafka-python's ``test/service.py``, which its source distribution leaves out.

That module starts brokers for kafka-python's own CI or names one already running. Against groupd
the suite is always pointed at a running broker (``KAFKA_URI``), so only the naming half is needed:
an external service has nothing to start, stop or wait for."""

from __future__ import annotations


class ExternalService:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def dump_logs(self) -> None:
        pass

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        return True


class SpawnedService:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("groupd runs kafka-python's suite against a running broker (KAFKA_URI) only")
