"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs them, and the
credentials it checks against: salt, stored key, server key and iterations, never a password.

Pure: ``ScramServer`` is fed the client's messages; ``ScramCredentials`` answers Describe- and
AlterUserScramCredentials from what it holds and says what to persist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from groupd.broker.security.errors import AuthenticationFailed, InvalidCredentials
from groupd.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    type: int  # the int8 of Describe/AlterUserScramCredentials
    hash: str
    min_iterations: int = 4096


SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
BY_NAME = {m.name: m for m in (SHA_256, SHA_512)}
BY_TYPE = {m.type: m for m in (SHA_256, SHA_512)}
MAX_ITERATIONS = 16384  # Kafka's controller refuses more


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash, password.encode(), salt, iterations)


def credential(mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """What is kept of a salted password (as Kafka's controller turns an upsertion into a record)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(mechanism.hash, client_key).digest()
    return ScramCredential(salt, stored_key, _hmac(mechanism, salted, b"Server Key"), iterations)


def _nonce() -> str:
    """130 random bits in base 36, as Kafka's ScramFormatter.secureRandomString."""
    n, digits = secrets.randbits(130), "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE})){_EXTENSIONS},p=(?P<proof>{_BASE64})"
)


def username(saslname: str) -> str:
    """RFC 5802's escaping back: =2C is a comma, =3D an equals sign, and no other = may stand."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


class ScramServer:
    """One client's SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str, str], ScramCredential | None],
        nonce: Callable[[], str] = _nonce,
    ) -> None:
        self.mechanism = mechanism
        self.name = mechanism.name
        self.lookup = lookup
        self.nonce = nonce
        self.complete = False
        self.authorization_id: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._step = 0

    def evaluate(self, token: bytes) -> bytes:
        self._step += 1
        if self._step == 1:
            return self._first(token.decode("utf-8", "replace"))
        if self._step == 2:
            return self._final(token.decode("utf-8", "replace"))
        raise AuthenticationFailed(
            f"Unexpected challenge in Sasl server state {'COMPLETE' if self.complete else 'FAILED'}"
        )

    def _first(self, message: str) -> bytes:
        m = CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise InvalidCredentials(f"Invalid SCRAM client first message format: {message}")
        try:
            user = username(m.group("saslname"))
        except ValueError:
            raise InvalidCredentials("Authentication failed: Credentials could not be obtained") from None
        extensions = dict(e.split("=", 1) for e in m.group("extensions").split(",")[1:])
        if extensions.get("tokenauth", "").lower() == "true":  # a delegation token: none are issued here
            raise InvalidCredentials(f"Token Authentication failed: Invalid tokenId : {user}")
        cred = self.lookup(user, self.name)
        if cred is None:
            raise InvalidCredentials("Authentication failed: Invalid user credentials")
        authzid = m.group("authzid") or ""
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if cred.iterations < self.mechanism.min_iterations:
            raise InvalidCredentials(
                f"Iterations {cred.iterations} is less than the minimum {self.mechanism.min_iterations} for {self.name}"
            )
        self._credential, self.authorization_id = cred, user
        self._client_first_bare = m.group("bare")
        salt = base64.b64encode(cred.salt).decode()
        self._server_first = f"r={m.group('nonce')}{self.nonce()},s={salt},i={cred.iterations}"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        m = CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise InvalidCredentials(f"Invalid SCRAM client final message format: {message}")
        server_nonce = self._server_first[2 : self._server_first.index(",")]
        if not m.group("nonce").endswith(server_nonce):
            raise InvalidCredentials("Invalid client nonce in the final client message.")
        cred = self._credential
        assert cred is not None  # _first set it: a failed first step ends the exchange before a second
        auth_message = f"{self._client_first_bare},{self._server_first},{m.group('without_proof')}".encode()
        signature = _hmac(self.mechanism, cred.stored_key, auth_message)
        proof = base64.b64decode(m.group("proof"))
        if len(proof) != len(signature):
            raise InvalidCredentials("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(signature, proof, strict=True))
        if not hmac.compare_digest(hashlib.new(self.mechanism.hash, client_key).digest(), cred.stored_key):
            raise InvalidCredentials("Invalid client credentials")
        verifier = base64.b64encode(_hmac(self.mechanism, cred.server_key, auth_message)).decode()
        self._credential = None
        self.complete = True
        return f"v={verifier}".encode()


class ScramClient:
    """This node's side of a SCRAM exchange with a cluster peer (inter-broker SASL), as Kafka's
    ScramSaslClient: ``first`` -> the server's first message -> ``final`` -> the server's final message ->
    ``verify``, which checks the server's signature (the peer knew the credential, not only the name)."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str, nonce: Callable[[], str] = _nonce) -> None:
        self.mechanism = mechanism
        self.password = password
        self._nonce = nonce()
        self._client_first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        message = server_first.decode("utf-8", "replace")
        fields = dict(part.split("=", 1) for part in message.split(",") if "=" in part)
        if "e" in fields:
            raise AuthenticationFailed(f"the peer refused the SCRAM exchange: {fields['e']}")
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "")
        if not nonce.startswith(self._nonce) or nonce == self._nonce or salt is None or not iterations.isdigit():
            raise AuthenticationFailed(f"Invalid SCRAM server first message: {message}")
        if int(iterations) < self.mechanism.min_iterations:
            raise AuthenticationFailed(f"Requested iterations {iterations} is less than the minimum")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(salt), int(iterations))
        without_proof = f"c=biws,r={nonce}"  # biws: base64 of "n,,", no channel binding
        auth_message = f"{self._client_first_bare},{message},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        stored_key = hashlib.new(self.mechanism.hash, client_key).digest()
        signature = _hmac(self.mechanism, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.mechanism, _hmac(self.mechanism, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        message = server_final.decode("utf-8", "replace")
        if message.startswith("e="):
            raise AuthenticationFailed(f"the peer refused the SCRAM exchange: {message[2:]}")
        if not message.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(message[2:].split(",")[0]), self._server_signature
        ):
            raise AuthenticationFailed("Invalid server signature in the SCRAM server final message")


# ---------------------------------------------------------------- the credentials themselves

DESCRIBE_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True, slots=True)
class Result:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


class ScramCredentials:
    """Every user's SCRAM credentials, by (user, mechanism name)."""

    def __init__(self, items: dict[tuple[str, str], ScramCredential] | None = None) -> None:
        self.items: dict[tuple[str, str], ScramCredential] = dict(items or {})

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.items.get((user, mechanism))

    def describe(self, users: Iterable[str] | None) -> list[tuple[Result, list[tuple[int, int]]]]:
        """Kafka's ScramImage.describe: all users when none are named; (mechanism type, iterations) each."""
        wanted: dict[str, bool] = {}
        if not users:
            for user, _ in sorted(self.items):
                wanted[user] = False
        else:
            for user in users:
                wanted[user] = user in wanted
        out: list[tuple[Result, list[tuple[int, int]]]] = []
        for user, twice in wanted.items():
            if twice:
                out.append((Result(user, ErrorCode.duplicate_resource, DESCRIBE_DUPLICATE + user), []))
                continue
            infos = [
                (m.type, c.iterations) for m in (SHA_256, SHA_512) if (c := self.items.get((user, m.name))) is not None
            ]
            if infos:
                out.append((Result(user), infos))
            else:
                out.append((Result(user, ErrorCode.resource_not_found, DESCRIBE_MISSING + user), []))
        return out

    def alter(
        self, deletions: Iterable[tuple[str, int]], upsertions: Iterable[tuple[str, int, int, bytes, bytes]]
    ) -> tuple[list[Result], bool]:
        """Kafka's ScramControlManager.alterCredentials: a user named twice in one request is refused,
        each entry is checked, the accepted ones applied together. Returns the results (deletions,
        then upsertions, then refusals, as Kafka lists them) and whether anything changed."""
        errors: dict[str, Result] = {}
        to_delete: dict[str, tuple[str, int]] = {}
        to_upsert: dict[str, tuple[str, int, int, bytes, bytes]] = {}
        for name, mech in deletions:
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None:
                errors[name] = Result(name, ErrorCode.duplicate_resource, ALTERED_TWICE)
                continue
            refusal = self._check_name(name, mech)
            if refusal is None and (name, BY_TYPE[mech].name) not in self.items:
                refusal = Result(
                    name, ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
                )
            if refusal is not None:
                errors[name] = refusal
            else:
                to_delete[name] = (name, mech)
        for upsert in upsertions:
            name, mech, iterations = upsert[0], upsert[1], upsert[2]
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None or to_upsert.pop(name, None) is not None:
                errors[name] = Result(name, ErrorCode.duplicate_resource, ALTERED_TWICE)
                continue
            refusal = self._check_name(name, mech)
            if refusal is None and iterations < BY_TYPE[mech].min_iterations:
                refusal = Result(name, ErrorCode.unacceptable_credential, "Too few iterations")
            elif refusal is None and iterations > MAX_ITERATIONS:
                refusal = Result(name, ErrorCode.unacceptable_credential, "Too many iterations")
            if refusal is not None:
                errors[name] = refusal
            else:
                to_upsert[name] = upsert
        for name, mech in to_delete.values():
            del self.items[name, BY_TYPE[mech].name]
        for name, mech, iterations, salt, salted in to_upsert.values():
            m = BY_TYPE[mech]
            self.items[name, m.name] = credential(m, salt, salted, iterations)
        results = [Result(name) for name in to_delete] + [Result(name) for name in to_upsert] + list(errors.values())
        return results, bool(to_delete or to_upsert)

    @staticmethod
    def _check_name(name: str, mech: int) -> Result | None:
        if not name:
            return Result(name, ErrorCode.unacceptable_credential, "Username must not be empty")
        if mech not in BY_TYPE:
            return Result(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        return None

    # persistence: plain values, so a file can hold them (base64 for the bytes)
    def to_json(self) -> dict:
        return {
            "version": 1,
            "credentials": [
                {
                    "user": user,
                    "mechanism": mech,
                    "iterations": c.iterations,
                    "salt": _b64(c.salt),
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                }
                for (user, mech), c in sorted(self.items.items())
            ],
        }

    @classmethod
    def from_json(cls, doc: dict) -> ScramCredentials:
        if doc.get("version") != 1:
            raise ValueError(f"unknown SCRAM credentials file version {doc.get('version')!r}")
        items = {}
        for row in doc["credentials"]:
            if row["mechanism"] not in BY_NAME:
                raise ValueError(f"unknown SCRAM mechanism {row['mechanism']!r}")
            items[row["user"], row["mechanism"]] = ScramCredential(
                base64.b64decode(row["salt"]),
                base64.b64decode(row["stored_key"]),
                base64.b64decode(row["server_key"]),
                int(row["iterations"]),
            )
        return cls(items)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
