"""SCRAM credentials in the metadata log: the image part and the controller's plan.

Records: ``UserScramCredentialRecord`` (name, mechanism, salt, stored key, server key,
iterations) sets a user's credential for one mechanism; ``RemoveUserScramCredentialRecord``
(name, mechanism) removes it. Mechanism numbers are Kafka's ``ScramMechanism`` types:
1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 is UNKNOWN).

``ScramCredentials`` (owned by the ``MetadataImage``, so by the broker's event loop) holds
the credentials by (user, mechanism) as the records left them; the salted password never
reaches the log, only the keys derived from it (RFC 5802: StoredKey = H(HMAC(SaltedPassword,
"Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")).

``plan_alter_credentials`` is Kafka's ``ScramControlManager.alterCredentials``: the records to
write and a result per user, with Kafka's errors and messages — a user named twice in one
request (deletions and upsertions together) -> DUPLICATE_RESOURCE; an empty name or fewer than
4096 / more than 16384 iterations -> UNACCEPTABLE_CREDENTIAL; an unknown mechanism ->
UNSUPPORTED_SASL_MECHANISM; deleting what does not exist -> RESOURCE_NOT_FOUND.
``describe_credentials`` is Kafka's ``ScramImage.describe``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from protocol.codec import Message
from protocol.errors import (
    DuplicateResourceError,
    KafkaError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from protocol.messages.metadata.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from protocol.messages.metadata.user_scram_credential_record import UserScramCredentialRecord

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISM_HASHES",
    "MECHANISM_NAMES",
    "MIN_ITERATIONS",
    "AlterResult",
    "Deletion",
    "DescribeResult",
    "ScramCredential",
    "ScramCredentials",
    "Upsertion",
    "client_key",
    "describe_credentials",
    "plan_alter_credentials",
    "server_key",
    "stored_key",
]

logger = logging.getLogger("samsa.replication.metadata")

MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_HASHES = {1: "sha256", 2: "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations (both mechanisms)
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS


def client_key(hash_name: str, salted_password: bytes) -> bytes:
    return hmac.digest(salted_password, b"Client Key", hash_name)


def stored_key(hash_name: str, key: bytes) -> bytes:
    return hashlib.new(hash_name, key).digest()


def server_key(hash_name: str, salted_password: bytes) -> bytes:
    return hmac.digest(salted_password, b"Server Key", hash_name)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(slots=True)
class ScramCredentials:
    by_user: dict[str, dict[int, ScramCredential]] = field(default_factory=dict)

    def get(self, user: str, mechanism: int) -> ScramCredential | None:
        return self.by_user.get(user, {}).get(mechanism)

    def apply(self, record: Message) -> None:
        if isinstance(record, UserScramCredentialRecord):
            self.by_user.setdefault(record.name, {})[record.mechanism] = ScramCredential(
                bytes(record.salt), bytes(record.stored_key), bytes(record.server_key),
                record.iterations)
        elif isinstance(record, RemoveUserScramCredentialRecord):
            mechanisms = self.by_user.get(record.name, {})
            if mechanisms.pop(record.mechanism, None) is None:
                logger.warning("RemoveUserScramCredentialRecord for a missing credential "
                               "(%s, mechanism %d) ignored", record.name, record.mechanism)
            if not mechanisms:
                self.by_user.pop(record.name, None)


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class AlterResult:
    user: str
    error: KafkaError | None = None


def plan_alter_credentials(
    credentials: ScramCredentials, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
) -> tuple[list[Message], list[AlterResult]]:
    """The records of one AlterUserScramCredentials request (one atomic batch) and its results:
    deletions first, then upsertions, then the failed users."""
    errors: dict[str, KafkaError] = {}
    to_delete: dict[str, Deletion] = {}
    to_upsert: dict[str, Upsertion] = {}
    for deletion in deletions:
        if _duplicate(deletion.name, errors, to_delete, to_upsert):
            continue
        error = _validate_deletion(credentials, deletion)
        if error is not None:
            errors[deletion.name] = error
        else:
            to_delete[deletion.name] = deletion
    for upsertion in upsertions:
        if _duplicate(upsertion.name, errors, to_delete, to_upsert):
            continue
        error = _validate_upsertion(upsertion)
        if error is not None:
            errors[upsertion.name] = error
        else:
            to_upsert[upsertion.name] = upsertion
    records: list[Message] = [RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism)
                              for d in to_delete.values()]
    records += [_credential_record(u) for u in to_upsert.values()]
    results = [AlterResult(name) for name in (*to_delete, *to_upsert)]
    results += [AlterResult(name, error) for name, error in errors.items()]
    return records, results


def _duplicate(
    name: str, errors: dict[str, KafkaError], *pending: dict[str, Deletion] | dict[str, Upsertion]
) -> bool:
    """Kafka's rule: a user already failed is skipped; a user named again fails as a duplicate."""
    if name in errors:
        return True
    if any(table.pop(name, None) is not None for table in pending):
        errors[name] = DuplicateResourceError(
            "A user credential cannot be altered twice in the same request")
        return True
    return False


def _validate_name_and_mechanism(name: str, mechanism: int) -> KafkaError | None:
    if not name:
        return UnacceptableCredentialError("Username must not be empty")
    if mechanism not in MECHANISM_NAMES:
        return UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
    return None


def _validate_deletion(credentials: ScramCredentials, deletion: Deletion) -> KafkaError | None:
    error = _validate_name_and_mechanism(deletion.name, deletion.mechanism)
    if error is None and credentials.get(deletion.name, deletion.mechanism) is None:
        error = ResourceNotFoundError("Attempt to delete a user credential that does not exist")
    return error


def _validate_upsertion(upsertion: Upsertion) -> KafkaError | None:
    error = _validate_name_and_mechanism(upsertion.name, upsertion.mechanism)
    if error is not None:
        return error
    if upsertion.iterations < MIN_ITERATIONS:
        return UnacceptableCredentialError("Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        return UnacceptableCredentialError("Too many iterations")
    return None


def _credential_record(upsertion: Upsertion) -> UserScramCredentialRecord:
    hash_name = MECHANISM_HASHES[upsertion.mechanism]
    return UserScramCredentialRecord(
        name=upsertion.name,
        mechanism=upsertion.mechanism,
        salt=upsertion.salt,
        stored_key=stored_key(hash_name, client_key(hash_name, upsertion.salted_password)),
        server_key=server_key(hash_name, upsertion.salted_password),
        iterations=upsertion.iterations,
    )


@dataclass(frozen=True, slots=True)
class DescribeResult:
    user: str
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism, iterations)
    error: KafkaError | None = None


def describe_credentials(credentials: ScramCredentials, users: Sequence[str] | None) -> list[DescribeResult]:
    """Every user with credentials when ``users`` is None or empty; else each named user once
    (named twice -> DUPLICATE_RESOURCE; no credential -> RESOURCE_NOT_FOUND)."""
    if not users:
        return [DescribeResult(user, _infos(credentials, user)) for user in sorted(credentials.by_user)]
    counts: dict[str, int] = {}
    for user in users:
        counts[user] = counts.get(user, 0) + 1
    results = []
    for user, count in counts.items():
        if count > 1:
            error: KafkaError = DuplicateResourceError(
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}")
            results.append(DescribeResult(user, error=error))
        elif user not in credentials.by_user:
            error = ResourceNotFoundError(
                f"Attempt to describe a user credential that does not exist: {user}")
            results.append(DescribeResult(user, error=error))
        else:
            results.append(DescribeResult(user, _infos(credentials, user)))
    return results


def _infos(credentials: ScramCredentials, user: str) -> tuple[tuple[int, int], ...]:
    return tuple((mechanism, credential.iterations)
                 for mechanism, credential in sorted(credentials.by_user[user].items()))
