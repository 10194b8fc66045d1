"""groupd for other projects' tests: ``Broker`` (a real broker on a free loopback port, in this process or
a child) and a pytest plugin (groupd/testing/plugin.py, registered as ``pytest11``: the fixtures
``groupd_broker``, ``groupd_fresh_broker`` and ``groupd_names``). docs/testing-your-app.md shows how.

``Broker`` loads on first use: pytest imports this package for its plugin in every run of a project
that installed groupd, and the broker's modules take a second to import."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groupd.testing.broker import Broker

__all__ = ["Broker"]


def __getattr__(name: str) -> object:
    if name == "Broker":
        from groupd.testing.broker import Broker

        return Broker
    raise AttributeError(f"module 'groupd.testing' has no attribute {name!r}")
