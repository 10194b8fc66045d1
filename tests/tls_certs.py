"""A throwaway CA, a broker certificate for 127.0.0.1 and a client certificate, made with the
``openssl`` command into a temporary directory (tests of SSL and SASL_SSL listeners)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CLIENT_SUBJECT = "/C=US/O=Example Corp/OU=Eng/CN=client-one"
CLIENT_PRINCIPAL = "User:CN=client-one,OU=Eng,O=Example Corp,C=US"  # as Kafka's principal builder names it


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path  # the CA's certificate
    server_keystore: Path  # the broker's key and certificate chain in one PEM file
    server_cert: Path
    server_key: Path
    server_key_encrypted: Path  # PKCS#8, password KEY_PASSWORD
    client_cert: Path
    client_key: Path


KEY_PASSWORD = "key-secret"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(directory: Path) -> Certs:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=groupd test CA",
        cwd=d,
    )
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject in (("server", "/CN=localhost"), ("client", CLIENT_SUBJECT)):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
            cwd=d,
        )
    _openssl(
        "pkcs8",
        "-topk8",
        "-in",
        "server.key",
        "-out",
        "server-encrypted.key",
        "-passout",
        f"pass:{KEY_PASSWORD}",
        cwd=d,
    )
    (d / "server-keystore.pem").write_text(
        (d / "server.key").read_text() + (d / "server.pem").read_text() + (d / "ca.pem").read_text()
    )
    return Certs(
        d,
        d / "ca.pem",
        d / "server-keystore.pem",
        d / "server.pem",
        d / "server.key",
        d / "server-encrypted.key",
        d / "client.pem",
        d / "client.key",
    )
