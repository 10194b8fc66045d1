"""Listeners and their security: SASL (PLAIN, SCRAM) and TLS, configured with Kafka's keys.

Pure parts (listener parsing, the JAAS syntax, the SASL state machines, SCRAM's arithmetic) take
values and give values; the connection feeds bytes in and writes what comes out.
"""
