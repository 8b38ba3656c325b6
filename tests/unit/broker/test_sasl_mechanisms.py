"""The SASL mechanism servers against clients written here from the RFCs (4616, 5802, 7677)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.sasl.errors import SaslAuthenticationError
from broker.sasl.plain import PlainServer
from broker.sasl.scram import ScramServer, sasl_name, username
from replication.metadata.scram import ScramCredential, client_key, server_key, stored_key

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def credential(mechanism: str, password: str, salt: bytes, iterations: int = 4096) -> ScramCredential:
    hash_name = HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    return ScramCredential(salt, stored_key(hash_name, client_key(hash_name, salted)),
                           server_key(hash_name, salted), iterations)


class ScramClient:
    """RFC 5802 section 3, client side."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self.hash_name = HASHES[mechanism]
        self.user, self.password = user, password
        self.nonce = nonce or secrets.token_urlsafe(18)
        self.bare = f"n={sasl_name(user)},r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes, *, nonce: str | None = None) -> bytes:
        fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(), salt, iterations)
        key = client_key(self.hash_name, salted)
        without_proof = f"c=biws,r={nonce or fields['r']}"
        auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.digest(stored_key(self.hash_name, key), auth_message, self.hash_name)
        proof = bytes(a ^ b for a, b in zip(key, signature, strict=True))
        self.server_signature = hmac.digest(server_key(self.hash_name, salted), auth_message,
                                            self.hash_name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def lookup_for(users: dict[str, ScramCredential], mechanism: str):  # type: ignore[no-untyped-def]
    return lambda user, kind: users.get(user) if kind == TYPES[mechanism] else None


# -- PLAIN ------------------------------------------------------------------------------------

def test_plain_accepts_the_right_password() -> None:
    server = PlainServer({"alice": "alice-secret"})
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"


def test_plain_accepts_an_authzid_equal_to_the_user() -> None:
    server = PlainServer({"alice": "alice-secret"})
    server.evaluate(b"alice\0alice\0alice-secret")
    assert server.authorization_id == "alice"


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0x", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
    (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
])
def test_plain_failures_carry_kafkas_messages(token: bytes, message: str) -> None:
    server = PlainServer({"alice": "alice-secret"})
    with pytest.raises(SaslAuthenticationError) as raised:
        server.evaluate(token)
    assert raised.value.message == message and raised.value.public
    assert not server.complete


@given(st.binary(max_size=300))
def test_plain_garbage_raises_only_the_authentication_error(token: bytes) -> None:
    server = PlainServer({"alice": "alice-secret"})
    try:
        server.evaluate(token)
    except SaslAuthenticationError:
        return
    assert token.split(b"\0")[1:] == [b"alice", b"alice-secret"]


# -- SCRAM ------------------------------------------------------------------------------------

def test_rfc7677_test_vector() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    users = {"user": credential("SCRAM-SHA-256", "pencil", salt)}
    server = ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256"),
                         server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["alice", "we,ird=name"])
def test_scram_client_and_server_agree(mechanism: str, user: str) -> None:
    users = {user: credential(mechanism, "secret", b"salty", 4096)}
    server = ScramServer(mechanism, lookup_for(users, mechanism))
    client = ScramClient(mechanism, user, "secret")
    server_first = server.evaluate(client.first())
    server_final = server.evaluate(client.final(server_first))
    assert server_final == b"v=" + base64.b64encode(client.server_signature)
    assert server.complete and server.authorization_id == user


def _failure(server: ScramServer, client: ScramClient, **final: str) -> SaslAuthenticationError:
    with pytest.raises(SaslAuthenticationError) as raised:
        server.evaluate(client.final(server.evaluate(client.first()), **final))
    assert not server.complete
    return raised.value


def test_scram_wrong_password_and_unknown_user_fail_alike() -> None:
    users = {"alice": credential("SCRAM-SHA-256", "secret", b"salt")}
    wrong = _failure(ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256")),
                     ScramClient("SCRAM-SHA-256", "alice", "guess"))
    unknown = _failure(ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256")),
                       ScramClient("SCRAM-SHA-256", "mallory", "guess"))
    assert wrong.message == unknown.message == "Invalid client credentials"
    assert not wrong.public and not unknown.public


def test_scram_unknown_user_gets_a_stable_salt() -> None:
    lookup = lookup_for({}, "SCRAM-SHA-256")
    answers = [ScramServer("SCRAM-SHA-256", lookup).evaluate(b"n,,n=ghost,r=abc").split(b",")[1:]
               for _ in range(2)]
    assert answers[0] == answers[1]  # salt and iterations: nothing tells it from a real user


def test_scram_credential_of_the_other_mechanism_does_not_count() -> None:
    users = {"alice": credential("SCRAM-SHA-256", "secret", b"salt")}
    error = _failure(ScramServer("SCRAM-SHA-512", lookup_for(users, "SCRAM-SHA-256")),
                     ScramClient("SCRAM-SHA-512", "alice", "secret"))
    assert error.message == "Invalid client credentials"


def test_scram_tampered_nonce_fails() -> None:
    users = {"alice": credential("SCRAM-SHA-256", "secret", b"salt")}
    client = ScramClient("SCRAM-SHA-256", "alice", "secret", nonce="clientnonce")
    error = _failure(ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256")), client,
                     nonce="clientnonceXforged")
    assert error.message == "Invalid client nonce in the final client message."


def test_scram_authzid_other_than_the_user_is_refused_publicly() -> None:
    users = {"alice": credential("SCRAM-SHA-256", "secret", b"salt")}
    server = ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256"))
    with pytest.raises(SaslAuthenticationError) as raised:
        server.evaluate(b"n,a=bob,n=alice,r=abc")
    assert raised.value.public
    assert "authorization id that is different from username" in raised.value.message


def test_scram_extensions_are_accepted_and_tokenauth_refused() -> None:
    users = {"alice": credential("SCRAM-SHA-256", "secret", b"salt")}
    server = ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256"))
    assert server.evaluate(b"n,,n=alice,r=abc,foo=bar").startswith(b"r=abc")
    with pytest.raises(SaslAuthenticationError):
        ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256")).evaluate(
            b"n,,n=alice,r=abc,tokenauth=true")


def test_scram_a_failed_server_stays_failed() -> None:
    users = {"alice": credential("SCRAM-SHA-256", "secret", b"salt")}
    server = ScramServer("SCRAM-SHA-256", lookup_for(users, "SCRAM-SHA-256"))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"garbage")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(ScramClient("SCRAM-SHA-256", "alice", "secret").first())


def test_saslname_escapes_round_trip() -> None:
    assert sasl_name("a=b,c") == "a=3Db=2Cc"
    assert username("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(SaslAuthenticationError):
        username("a=4Fb")


_USERS = {"alice": credential("SCRAM-SHA-256", "secret", b"salt")}


@settings(max_examples=300)
@given(st.binary(max_size=200), st.binary(max_size=200))
def test_scram_garbage_raises_only_the_authentication_error(first: bytes, final: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lookup_for(_USERS, "SCRAM-SHA-256"))
    try:
        server.evaluate(first)
        server.evaluate(final)
    except SaslAuthenticationError:
        return
    pytest.fail("garbage authenticated")


@settings(max_examples=200)
@given(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=127), max_size=80))
def test_scram_textual_garbage_after_a_good_first_message(final: str) -> None:
    server = ScramServer("SCRAM-SHA-256", lookup_for(_USERS, "SCRAM-SHA-256"))
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(final.encode())
