"""How a SASL exchange fails, shared by the gate (sasl.py) and its mechanisms (PLAIN there, scram.py)."""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """Kafka's SaslAuthenticationException: the client is told this message."""


class InvalidCredentials(Exception):
    """Kafka's SaslException: the client is told only that its credentials were invalid (the reason,
    an unknown user say, stays in the broker's log)."""
