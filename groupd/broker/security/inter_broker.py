"""How a cluster node reaches its peers, resolved from Kafka's keys as KafkaConfig resolves them: the
listener (``inter.broker.listener.name``, or the one named after ``security.inter.broker.protocol``), its
security protocol, and what the node presents there (the listener's TLS settings, the SASL mechanism
``sasl.mechanism.inter.broker.protocol`` with the username and password of the listener's JAAS config).

Pure: strings and resolved listeners in, ``InterBroker`` out; a setting Kafka refuses raises
``ListenerError`` in Kafka's words, so a node stops before it binds a socket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from groupd.broker.security.jaas import JaasError, parse_jaas
from groupd.broker.security.listeners import (
    MECHANISMS,
    PREFIX,
    PROTOCOLS,
    Listener,
    ListenerError,
    Secured,
    split_prefixed,
)

if TYPE_CHECKING:
    from groupd.broker.security.tls import TlsSettings

LISTENER_KEY = "inter.broker.listener.name"
PROTOCOL_KEY = "security.inter.broker.protocol"
MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"
HOSTNAME_KEY = "ssl.endpoint.identification.algorithm"


@dataclass(frozen=True, slots=True)
class InterBroker(Secured):
    """The listener peers are reached on and how this node logs in there."""

    listener: str  # upper case, as Kafka's ListenerName.normalised
    protocol: str
    mechanism: str | None = None  # SASL_* only
    username: str | None = None
    password: str | None = None
    ssl: TlsSettings | None = None  # SSL and SASL_SSL: the listener's truststore checks the peer, its key is ours
    check_hostname: bool = True  # ssl.endpoint.identification.algorithm=https (Kafka's default)


def resolve(
    raw: Mapping[str, str],
    listeners: tuple[Listener, ...],
    protocol_map: Mapping[str, str],
    setting: Callable[[str], str | None],
) -> InterBroker:
    """KafkaConfig's rules: ``inter.broker.listener.name`` and ``security.inter.broker.protocol`` may not
    both be set; a name must be in ``listener.security.protocol.map``; without one the listener is named
    after the protocol (default PLAINTEXT); it must be an advertised listener; over SASL the mechanism must
    be enabled on it. ``raw`` is what was given (to tell a default from a setting), ``setting(key)`` a
    global key's value or its default."""
    name = raw.get(LISTENER_KEY)
    if name is not None and name.strip():
        if PROTOCOL_KEY in raw:
            raise ListenerError(f"Only one of {LISTENER_KEY} and {PROTOCOL_KEY} should be set.")
        listener_name = name.strip().upper()
        if listener_name not in protocol_map:
            raise ListenerError(
                f"Listener with name {listener_name} defined in {LISTENER_KEY} not found in "
                "listener.security.protocol.map."
            )
        protocol = protocol_map[listener_name]
    else:
        protocol = (setting(PROTOCOL_KEY) or "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ListenerError(f"Invalid value {protocol} for configuration {PROTOCOL_KEY}: unknown security protocol")
        listener_name = protocol
    advertised = [spec.name for spec in listeners if spec.advertised is not None]
    spec = next((s for s in listeners if s.name == listener_name and s.advertised is not None), None)
    if spec is None:
        raise ListenerError(
            f"{LISTENER_KEY} must be a listener name defined in advertised.listeners. The valid options based on "
            f"currently configured listeners are {','.join(advertised)}"
        )
    own = split_prefixed(raw).get(listener_name, {})

    def lookup(key: str) -> str | None:
        return own[key] if key in own else setting(key)

    check_hostname = (lookup(HOSTNAME_KEY) or "").strip().lower() == "https"
    if not spec.sasl:
        return InterBroker(listener_name, protocol, ssl=spec.ssl, check_hostname=check_hostname)
    mechanism = (setting(MECHANISM_KEY) or "GSSAPI").strip().upper()
    if mechanism not in spec.mechanisms:
        raise ListenerError(
            f"{MECHANISM_KEY} must be included in sasl.enabled.mechanisms when SASL is used for inter-broker "
            f"communication ({mechanism}; listener {listener_name} enables {','.join(spec.mechanisms)})"
        )
    if mechanism not in MECHANISMS:  # not reached while sasl.enabled.mechanisms refuses the same ones
        raise ListenerError(f"{MECHANISM_KEY}={mechanism} is not served (groupd serves {', '.join(MECHANISMS)})")
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = own.get(key)
    where = f"{PREFIX}{listener_name.lower()}.{key}"
    if not text:
        raise ListenerError(
            f"{where} is not set: the node logs in to its peers with its username and password "
            '(... required username="<name>" password="<password>";)'
        )
    try:
        options = parse_jaas(text).options
    except JaasError as exc:
        raise ListenerError(f"{where}: {exc}") from None
    if "username" not in options or "password" not in options:
        raise ListenerError(
            f"{where} names no username and password: the node logs in to its peers with them (inter-broker SASL)"
        )
    return InterBroker(
        listener_name,
        protocol,
        mechanism,
        options["username"],
        options["password"],
        spec.ssl,
        check_hostname,
    )
