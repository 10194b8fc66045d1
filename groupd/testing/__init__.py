"""groupd for other projects' tests: ``Broker`` (a real broker on a free loopback port, in this process or
a child) and a pytest plugin (groupd/testing/plugin.py, registered as ``pytest11``: the fixtures
``groupd_broker``, ``groupd_fresh_broker`` and ``groupd_names``). docs/testing-your-app.md shows how."""

from groupd.testing.broker import Broker

__all__ = ["Broker"]
