"""Connections: framing, in-order pipelining, limits, TLS and SASL around the dispatch."""
