"""``listeners``, ``listener.security.protocol.map`` and ``advertised.listeners`` as Kafka reads them,
and each listener's SASL settings (``sasl.enabled.mechanisms``, per-listener JAAS users).

Pure: strings in, ``Listener`` values out; anything groupd cannot serve raises ``ListenerError`` with
a message naming the key, so start-up stops before a socket is bound.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from groupd.broker.security.jaas import PLAIN_MODULE, SCRAM_MODULE, JaasError, parse_jaas

if TYPE_CHECKING:  # tls.py imports this module's errors
    from groupd.broker.security.tls import TlsSettings

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
NOT_SERVED = {"GSSAPI": "Kerberos", "OAUTHBEARER": "OAuth bearer tokens"}
PREFIX = "listener.name."
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


class ListenerError(ValueError):
    """A listener setting groupd refuses to start with."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str  # normalised: upper case, as Kafka's ListenerName.normalised
    host: str  # "" for Kafka's wildcard
    port: int


class Secured:
    """What a security protocol asks for, for anything that has one (a listener, the inter-broker link)."""

    __slots__ = ()
    protocol: str

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Listener(Secured):
    """One listening socket and what it asks of its clients."""

    name: str
    protocol: str
    host: str
    port: int
    advertised: tuple[str, int] | None  # None: not in advertised.listeners, so Metadata lists no broker
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    ssl: TlsSettings | None = None  # on SSL and SASL_SSL listeners

    @property
    def prefix(self) -> str:
        """Kafka's per-listener config prefix, ``listener.name.<lower-case name>.``."""
        return f"{PREFIX}{self.name.lower()}."


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """``NAME://host:port,...`` (Kafka's listener URI list); syntax only, names resolved later."""
    out = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        m = _ENDPOINT.match(entry)
        if m is None:
            raise ValueError(f"Unable to parse {entry} to a broker endpoint (expected NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092)")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} of {entry} is not between 0 and 65535")
        out.append(Endpoint(m.group(1).upper(), m.group(2), port))
    if not out:
        raise ValueError("no listener given")
    return tuple(out)


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...``; a map given replaces Kafka's default one entirely."""
    out: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, proto = entry.partition(":")
        proto = proto.strip().upper()
        if not sep or not name.strip():
            raise ValueError(f"expected NAME:PROTOCOL, got {entry!r}")
        if proto not in PROTOCOLS:
            raise ValueError(f"unknown security protocol {proto} (known: {', '.join(PROTOCOLS)})")
        out[name.strip().upper()] = proto
    return out


def split_prefixed(raw: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``listener.name.<listener>.<key>`` settings as {listener (upper case): {key: value}}."""
    out: dict[str, dict[str, str]] = {}
    for key, value in raw.items():
        if key.startswith(PREFIX):
            listener, sep, rest = key[len(PREFIX):].partition(".")
            if sep and rest:
                out.setdefault(listener.upper(), {})[rest] = value
    return out


def resolve(
    endpoints: tuple[Endpoint, ...],
    advertised: tuple[Endpoint, ...] | None,
    protocol_map: Mapping[str, str],
    prefixed: Mapping[str, Mapping[str, str]],
    setting: Callable[[str], Any],
    tls: Callable[[str, str, Callable[[str], Any], Callable[[str], bool]], TlsSettings] | None = None,
) -> tuple[Listener, ...]:
    """Every listener with its protocol, advertised address and SASL/TLS settings; ``setting(key)``
    gives a global key's value, overridden per listener by ``listener.name.<listener>.<key>``;
    ``tls(listener name, protocol, lookup, set by the listener itself?)`` builds an SSL listener's settings."""
    spec = ",".join(f"{e.name}://{e.host}:{e.port}" for e in endpoints)
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ListenerError(f"Each listener must have a different name, listeners: {spec}")
    ports = [e.port for e in endpoints if e.port != 0]
    if len(set(ports)) != len(ports):
        raise ListenerError(f"Each listener must have a different port, listeners: {spec}")
    for e in endpoints:
        if e.name not in protocol_map:
            raise ListenerError(f"No security protocol defined for listener {e.name} (listener.security.protocol.map)")
    ads: dict[str, tuple[str, int]] = {}
    if advertised is not None:
        for a in advertised:
            if a.name not in names:
                raise ListenerError(
                    "advertised.listeners listener names must be equal to or a subset of the ones defined in "
                    f"listeners. Found {','.join(x.name for x in advertised)}. The valid options based on the current "
                    f"configuration are {','.join(names)}"
                )
            if a.host == "0.0.0.0":
                raise ListenerError(
                    "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."
                )
            ads[a.name] = (a.host, a.port)
    for name in prefixed:
        if name not in names:
            raise ListenerError(
                f"{PREFIX}{name.lower()}.* settings name a listener that listeners does not have ({','.join(names)})"
            )
    out = []
    for e in endpoints:
        host = e.host or "127.0.0.1"
        protocol = protocol_map[e.name]
        own = prefixed.get(e.name, {})

        def lookup(key: str, own: Mapping[str, str] = own) -> Any:
            return own[key] if key in own else setting(key)

        if advertised is None:
            ad: tuple[str, int] | None = (host, e.port)
        else:
            ad = ads.get(e.name)
            if ad is not None and not ad[0]:
                ad = (host, ad[1])
        mechanisms: tuple[str, ...] = ()
        users: dict[str, str] = {}
        if protocol.startswith("SASL_"):
            mechanisms, users = _sasl(e.name, lookup)
        ssl = None
        if protocol in ("SSL", "SASL_SSL"):
            if tls is None:
                raise ListenerError(f"listener {e.name}: {protocol} is not supported")
            ssl = tls(e.name, protocol, lookup, own.__contains__)
        out.append(Listener(e.name, protocol, host, e.port, ad, mechanisms, users, ssl))
    return tuple(out)


def _sasl(name: str, lookup: Callable[[str], Any]) -> tuple[tuple[str, ...], dict[str, str]]:
    prefix = f"{PREFIX}{name.lower()}."
    raw = lookup("sasl.enabled.mechanisms") or ""
    mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in raw.split(",") if m.strip()))
    if not mechanisms:
        raise ListenerError(f"listener {name}: No SASL mechanisms are enabled (sasl.enabled.mechanisms)")
    for m in mechanisms:
        if m in NOT_SERVED:
            raise ListenerError(
                f"listener {name}: sasl.enabled.mechanisms includes {m} ({NOT_SERVED[m]}), which groupd does not "
                f"serve; set sasl.enabled.mechanisms (or {prefix}sasl.enabled.mechanisms) to some of "
                f"{', '.join(MECHANISMS)}"
            )
        if m not in MECHANISMS:
            raise ListenerError(
                f"listener {name}: unknown SASL mechanism {m} in sasl.enabled.mechanisms (groupd serves "
                f"{', '.join(MECHANISMS)})"
            )
    users: dict[str, str] = {}
    for m in mechanisms:
        key = f"{m.lower()}.sasl.jaas.config"
        text = lookup(key)
        if not text:
            if m == PLAIN:
                raise ListenerError(
                    f"listener {name} enables PLAIN but {prefix}{key} is not set: give it "
                    f'{PLAIN_MODULE} required user_<name>="<password>" ...; (groupd reads no JAAS file)'
                )
            continue  # SCRAM's users live in the credential store, its login module has nothing to say
        try:
            module = parse_jaas(text)
        except JaasError as exc:
            raise ListenerError(f"{prefix}{key}: {exc}") from None
        expected = PLAIN_MODULE if m == PLAIN else SCRAM_MODULE
        if module.name != expected:
            raise ListenerError(
                f"{prefix}{key}: login module {module.name} is not served for {m} (expected {expected})"
            )
        if m == PLAIN:
            users = module.users()
    return mechanisms, users
