"""SSL and SASL_SSL listeners with Kafka's PEM keys (KIP-651), served by the stdlib ``ssl`` module.

``tls_settings`` checks the keys as Kafka's DefaultSslEngineFactory does (same refusals, same words)
and reads the PEM text; ``server_context`` turns them into an ``ssl.SSLContext`` at start-up. JKS and
PKCS12 stores would need a Java keystore reader: they are refused with a message saying so.
``principal`` names a client by its certificate's subject, as Kafka's default principal builder does.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groupd.broker.security.listeners import ListenerError

PEM = "PEM"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    chain: str  # PEM: the certificate chain, this broker's first
    key: str  # PEM: the private key, perhaps encrypted
    key_password: str | None
    trusted: str | None  # PEM certificates clients' certificates must chain to (None: the system's)
    client_auth: str  # none, requested or required


def normalise_pem(text: str) -> str:
    """PEM blocks with their base64 re-wrapped: a value continued over lines in server.properties
    arrives with spaces where its line breaks were, which Kafka accepts and OpenSSL does not."""
    blocks = [(label, re.sub(r"\s+", "", body)) for label, body in _BLOCK.findall(text)]
    out = []
    for label, body in blocks:
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        out.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    return "\n".join(out) + ("\n" if out else "")


def _read(path: str, key: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ListenerError(f"{key}: cannot read {path}: {exc}") from None


def tls_settings(listener: str, protocol: str, lookup: Callable[[str], Any], own: Callable[[str], bool]) -> TlsSettings:
    """The listener's TLS keys, checked; ``own(key)`` tells whether the listener sets ``key`` itself
    (Kafka applies ``ssl.client.auth`` to a SASL_SSL listener only when given with its prefix)."""
    where = f"listener {listener}"
    store_type = (lookup("ssl.keystore.type") or "JKS").upper()
    location, chain, key = (
        lookup("ssl.keystore.location"),
        lookup("ssl.keystore.certificate.chain"),
        lookup("ssl.keystore.key"),
    )
    key_password, store_password = lookup("ssl.key.password") or None, lookup("ssl.keystore.password") or None
    if store_type != PEM and (location or chain or key):
        raise ListenerError(
            f"{where}: ssl.keystore.type {store_type} is not supported: groupd reads PEM key stores only "
            "(set ssl.keystore.type=PEM with ssl.keystore.location, or ssl.keystore.certificate.chain and "
            "ssl.keystore.key)"
        )
    if key:
        if not chain:
            raise ListenerError(f"{where}: SSL private key is specified, but certificate chain is not specified.")
        if location:
            raise ListenerError(f"{where}: Both SSL key store location and separate private key are specified.")
        if store_password:
            raise ListenerError(
                f"{where}: SSL key store password cannot be specified with PEM format, only key password may be "
                "specified."
            )
        chain_pem, key_pem = normalise_pem(chain), normalise_pem(key)
    elif chain:
        raise ListenerError(f"{where}: SSL certificate chain is specified, but private key is not specified")
    elif location:
        if store_password:
            raise ListenerError(
                f"{where}: SSL key store password cannot be specified with PEM format, only key password may be "
                "specified"
            )
        text = _read(location, "ssl.keystore.location")
        chain_pem = normalise_pem("".join(b for b in _blocks(text) if "PRIVATE KEY" not in b))
        key_pem = normalise_pem("".join(b for b in _blocks(text) if "PRIVATE KEY" in b))
    else:
        raise ListenerError(
            f"{where}: {protocol} needs a key store: set ssl.keystore.type=PEM and ssl.keystore.location (or the "
            "inline keys)"
        )
    if "CERTIFICATE" not in chain_pem:
        raise ListenerError(f"{where}: At least one certificate expected, but none found")
    if key_pem.count("PRIVATE KEY-----") != 2:
        raise ListenerError(f"{where}: Expected one private key, but found {key_pem.count('PRIVATE KEY-----') // 2}")
    trust_type = (lookup("ssl.truststore.type") or "JKS").upper()
    trust_location, trust_certs = lookup("ssl.truststore.location"), lookup("ssl.truststore.certificates")
    if lookup("ssl.truststore.password") and trust_type == PEM:
        raise ListenerError(f"{where}: SSL trust store password cannot be specified for PEM format.")
    trusted: str | None = None
    if trust_certs or trust_location:
        if trust_type != PEM:
            raise ListenerError(
                f"{where}: ssl.truststore.type {trust_type} is not supported: groupd reads PEM trust stores only (set "
                "ssl.truststore.type=PEM)"
            )
        if trust_certs and trust_location:
            raise ListenerError(
                f"{where}: Both SSL trust store location and separate trust certificates are specified."
            )
        trusted = normalise_pem(trust_certs or _read(trust_location, "ssl.truststore.location"))
        if "CERTIFICATE" not in trusted:
            raise ListenerError(f"{where}: At least one certificate expected, but none found in the trust store")
    client_auth = "none"
    if protocol == "SSL" or own("ssl.client.auth"):
        client_auth = (lookup("ssl.client.auth") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise ListenerError(f"{where}: ssl.client.auth must be none, requested or required, not {client_auth!r}")
    settings = TlsSettings(chain_pem, key_pem, key_password, trusted, client_auth)
    server_context(settings, where)  # the key, its password and the chain checked now, not at the first client
    return settings


def _blocks(text: str) -> list[str]:
    return [m.group(0) + "\n" for m in _BLOCK.finditer(text)]


def server_context(settings: TlsSettings, where: str = "") -> ssl.SSLContext:
    """An SSLContext serving the settings' certificate, asking clients for theirs as configured."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # Kafka's ssl.enabled.protocols: TLSv1.2,TLSv1.3
    _load_chain(context, settings, where)
    context.verify_mode = CLIENT_AUTH[settings.client_auth]
    if settings.trusted is not None:
        context.load_verify_locations(cadata=settings.trusted)
    elif settings.client_auth != "none":
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(settings: TlsSettings, check_hostname: bool) -> ssl.SSLContext:
    """An SSLContext a cluster node connects to a peer's listener with, as Kafka's inter-broker client uses
    the listener's own settings: the peer's certificate must chain to the truststore (the system's without
    one) and, with ``check_hostname`` (ssl.endpoint.identification.algorithm=https), name the host it is
    reached at; the node's own certificate goes to a peer that asks for one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, settings)
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if settings.trusted is not None:
        context.load_verify_locations(cadata=settings.trusted)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return context


def _load_chain(context: ssl.SSLContext, settings: TlsSettings, where: str = "") -> None:
    """The settings' certificate chain and key into ``context`` (through private files: the ssl module reads
    nothing else)."""
    with tempfile.TemporaryDirectory(prefix="groupd-tls-") as tmp:  # load_cert_chain reads files only
        certfile, keyfile = os.path.join(tmp, "chain.pem"), os.path.join(tmp, "key.pem")
        for path, text in ((certfile, settings.chain), (keyfile, settings.key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        try:
            context.load_cert_chain(certfile, keyfile, password=settings.key_password)
        except ssl.SSLError as exc:
            raise ListenerError(
                f"{where}: Invalid PEM keystore configs: the key does not load with ssl.key.password or does not match "
                f"the certificate ({exc.reason})"
            ) from None


# RFC 2253 keywords Java's X500Principal.getName() writes; other attributes go as OID=#<DER hex>
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16)}  # IA5String


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _der_hex(tag: int, value: str) -> str:
    data = value.encode()
    if len(data) < 128:
        length = bytes([len(data)])
    else:
        size = len(data).to_bytes((len(data).bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(size)]) + size
    return "#" + (bytes([tag]) + length + data).hex()


def principal(peercert: dict | None) -> str:
    """``User:<subject DN>`` for a verified client certificate (RFC 2253 order: most specific first,
    as Kafka's DefaultKafkaPrincipalBuilder writes it), ``User:ANONYMOUS`` without one."""
    if not peercert or not peercert.get("subject"):
        return "User:ANONYMOUS"
    rdns = []
    for rdn in reversed(peercert["subject"]):
        parts = []
        for name, value in rdn:
            if name in _KEYWORDS:
                parts.append(f"{_KEYWORDS[name]}={_escape(value)}")
            elif name in _OIDS:
                oid, tag = _OIDS[name]
                parts.append(f"{oid}={_der_hex(tag, value)}")
            else:
                parts.append(f"{name}={_escape(value)}")
        rdns.append("+".join(parts))
    return "User:" + ",".join(rdns)
