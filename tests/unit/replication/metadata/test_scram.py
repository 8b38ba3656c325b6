"""SCRAM credentials: Kafka's alter rules against a brute-force model, describe, and replay."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from replication.metadata.image import MetadataImage
from replication.metadata.scram import (
    Deletion,
    ScramCredentials,
    Upsertion,
    describe_credentials,
    plan_alter_credentials,
)


def upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> Upsertion:
    return Upsertion(name, mechanism, iterations, b"salt", b"salted-password")


def apply_all(image: MetadataImage, deletions: list[Deletion], upsertions: list[Upsertion]):  # type: ignore[no-untyped-def]
    records, results = plan_alter_credentials(image.scram, deletions, upsertions)
    for record in records:
        image.apply(record)
    return {r.user: (type(r.error) if r.error else None) for r in results}


def test_upsert_derives_kafkas_keys_and_describe_shows_iterations() -> None:
    image = MetadataImage()
    assert apply_all(image, [], [upsert("alice", 2, 8192)]) == {"alice": None}
    credential = image.scram.get("alice", 2)
    assert credential is not None and credential.iterations == 8192
    client_key = hmac.digest(b"salted-password", b"Client Key", "sha512")
    assert credential.stored_key == hashlib.sha512(client_key).digest()
    assert credential.server_key == hmac.digest(b"salted-password", b"Server Key", "sha512")
    [result] = describe_credentials(image.scram, ["alice"])
    assert result.credentials == ((2, 8192),) and result.error is None


def test_kafkas_errors() -> None:
    image = MetadataImage()
    results = apply_all(image, [Deletion("ghost", 1), Deletion("gone", 1)], [
        upsert(""), upsert("few", iterations=4095), upsert("many", iterations=16385),
        upsert("mech", mechanism=3), upsert("dup"), upsert("dup", 2), upsert("gone"),
        upsert("ok", iterations=16384)])
    assert results == {
        "ghost": ResourceNotFoundError, "": UnacceptableCredentialError,
        "few": UnacceptableCredentialError, "many": UnacceptableCredentialError,
        "mech": UnsupportedSaslMechanismError, "dup": DuplicateResourceError, "ok": None,
        "gone": ResourceNotFoundError,  # Kafka: a user that failed already keeps its error
    }
    assert set(image.scram.by_user) == {"ok"}  # the failed users wrote nothing


def test_describe_unknown_duplicate_and_all() -> None:
    image = MetadataImage()
    apply_all(image, [], [upsert("a", 1), upsert("b", 2)])
    apply_all(image, [], [upsert("a", 2)])
    by_user = {r.user: r for r in describe_credentials(image.scram, ["a", "a", "nobody"])}
    assert isinstance(by_user["a"].error, DuplicateResourceError)
    assert isinstance(by_user["nobody"].error, ResourceNotFoundError)
    assert [(r.user, r.credentials) for r in describe_credentials(image.scram, None)] == [
        ("a", ((1, 4096), (2, 4096))), ("b", ((2, 4096),))]


def test_delete_removes_only_that_mechanism() -> None:
    image = MetadataImage()
    apply_all(image, [], [upsert("a", 1)])
    apply_all(image, [], [upsert("a", 2)])
    assert apply_all(image, [Deletion("a", 1)], []) == {"a": None}
    assert image.scram.get("a", 1) is None and image.scram.get("a", 2) is not None
    apply_all(image, [Deletion("a", 2)], [])
    assert image.scram.by_user == {}


NAMES = st.sampled_from(["a", "b", "c", ""])
OPERATIONS = st.lists(st.tuples(st.booleans(), NAMES, st.sampled_from([0, 1, 2]),
                                st.sampled_from([4095, 4096, 16384, 16385])), max_size=6)


@given(st.lists(st.tuples(NAMES, st.sampled_from([1, 2])), max_size=4), OPERATIONS)
def test_alter_matches_a_brute_force_model(existing: list[tuple[str, int]], operations) -> None:  # type: ignore[no-untyped-def]
    credentials = ScramCredentials()
    image = MetadataImage(scram=credentials)
    apply_all(image, [], [upsert(name, mechanism) for name, mechanism in dict(existing).items() if name])
    before = {(user, mechanism) for user, by in credentials.by_user.items() for mechanism in by}
    deletions = [Deletion(n, m) for is_delete, n, m, _ in operations if is_delete]
    upsertions = [upsert(n, m, i) for is_delete, n, m, i in operations if not is_delete]
    results = apply_all(image, deletions, upsertions)
    # The model: count each user's mentions; one mention -> validate it alone.
    mentions: dict[str, int] = {}
    for item in [*deletions, *upsertions]:
        mentions[item.name] = mentions.get(item.name, 0) + 1
    expected_after = set(before)
    for item in [*deletions, *upsertions]:
        outcome = results[item.name]
        if mentions[item.name] > 1:
            assert outcome is not None  # duplicate, or the first mention's own error
            continue
        if not item.name:
            assert outcome is UnacceptableCredentialError
        elif item.mechanism not in (1, 2):
            assert outcome is UnsupportedSaslMechanismError
        elif isinstance(item, Deletion):
            found = (item.name, item.mechanism) in before
            assert outcome is (None if found else ResourceNotFoundError)
            expected_after.discard((item.name, item.mechanism))
        elif not 4096 <= item.iterations <= 16384:
            assert outcome is UnacceptableCredentialError
        else:
            assert outcome is None
            expected_after.add((item.name, item.mechanism))
    after = {(user, mechanism) for user, by in credentials.by_user.items() for mechanism in by}
    assert after == expected_after
