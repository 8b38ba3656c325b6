"""The client's SASL settings and its SCRAM client against the broker's SCRAM server."""

from __future__ import annotations

import pytest

from broker.sasl.errors import SaslAuthenticationError
from broker.sasl.scram import ScramServer
from protocol.errors import SaslAuthenticationFailedError
from samsa._sasl import SaslCredentials, _ScramClient, sasl_credentials
from samsa.config import parse_config
from samsa.errors import ConfigError
from tests.unit.broker.test_sasl_mechanisms import credential

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="carol" password="carol-secret";')


def test_plaintext_has_no_credentials() -> None:
    assert sasl_credentials(parse_config("producer", {})) is None


def test_librdkafka_names_and_java_jaas_give_the_same_credentials() -> None:
    base = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256"}
    by_names = parse_config("admin", {**base, "sasl.username": "carol", "sasl.password": "carol-secret"})
    by_jaas = parse_config("admin", {**base, "sasl.jaas.config": JAAS})
    expected = SaslCredentials("SCRAM-SHA-256", "carol", "carol-secret")
    assert sasl_credentials(by_names) == sasl_credentials(by_jaas) == expected
    assert "carol-secret" not in repr(expected)


@pytest.mark.parametrize(("settings", "key"), [
    ({"sasl.username": "a"}, "sasl.mechanism"),  # the default, GSSAPI
    ({"sasl.mechanism": "PLAIN"}, "sasl.username"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "garbage"}, "sasl.jaas.config"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "a.B required password=x;"}, "sasl.jaas.config"),
])
def test_bad_sasl_settings_fail_at_configuration(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config("producer", {"security.protocol": "SASL_PLAINTEXT", **settings})
    assert key in str(raised.value)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_broker_server(mechanism: str) -> None:
    kind = 1 if mechanism == "SCRAM-SHA-256" else 2
    stored = credential(mechanism, "pw", b"salt", 4096)
    server = ScramServer(mechanism, lambda user, k: stored if (user, k) == ("u,=", kind) else None)
    client = _ScramClient(SaslCredentials(mechanism, "u,=", "pw"))
    client.verify(server.evaluate(client.client_final(server.evaluate(client.client_first()))))
    assert server.authorization_id == "u,="


def test_scram_client_rejects_a_forged_server_signature() -> None:
    stored = credential("SCRAM-SHA-256", "pw", b"salt", 4096)
    server = ScramServer("SCRAM-SHA-256", lambda user, kind: stored)
    client = _ScramClient(SaslCredentials("SCRAM-SHA-256", "u", "pw"))
    server.evaluate(client.client_final(server.evaluate(client.client_first())))
    with pytest.raises(SaslAuthenticationFailedError):
        client.verify(b"v=AAAA")


def test_scram_client_with_a_wrong_password_fails_at_the_server() -> None:
    stored = credential("SCRAM-SHA-256", "pw", b"salt", 4096)
    server = ScramServer("SCRAM-SHA-256", lambda user, kind: stored)
    client = _ScramClient(SaslCredentials("SCRAM-SHA-256", "u", "nope"))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(client.client_final(server.evaluate(client.client_first())))
