"""groupd: a Kafka-protocol broker whose heart is a faithful Kafka group coordinator.

Everything the product is lives under this one package: ``protocol`` (frames, headers, the API table,
the codec), ``broker`` (connections, routes, handlers, the data plane), ``coordinator`` (the runtime and
the group types), ``storage`` (the segment log), ``pipeline`` (the PySpark report) and ``cli`` (the
operator's commands). ``python -m groupd`` starts the broker.
"""

__version__ = "0.1.0"  # the only place it is written: pyproject.toml reads it, `groupd --version` prints it
