"""Kafka error codes, as kio names them (Kafka's Errors.java)."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
