"""Listener security config and the JAAS parser: what is accepted, and the start-up errors."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import BrokerConfig, ConfigError, Listener, endpoint_for
from protocol.jaas import JaasError, LoginModule, parse_jaas_config

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice \\"quoted\\" secret";')
BOTH = "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"


def test_jaas_parses_modules_flags_and_options() -> None:
    modules = parse_jaas_config(PLAIN_JAAS + " other.Module optional a=b;")
    assert modules == [
        LoginModule("org.apache.kafka.common.security.plain.PlainLoginModule", "required",
                    {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                     "user_alice": 'alice "quoted" secret'}),
        LoginModule("other.Module", "optional", {"a": "b"}),
    ]


@pytest.mark.parametrize("text", [
    "", "Module", "Module required", "Module required a=b", "Module nope a=b;",
    "Module required a=;", "Module required a b;", "Module required =b;", '"Module" required;',
    "Module required a=\"unterminated;", "Module required a=b; ;", "Module required a=b;!",
])
def test_jaas_garbage_is_an_error(text: str) -> None:
    with pytest.raises(JaasError):
        parse_jaas_config(text)


@given(st.text(max_size=60))
def test_jaas_random_text_raises_only_jaas_error(text: str) -> None:
    with contextlib.suppress(JaasError):
        parse_jaas_config(text)


def sasl_config(**extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties({
        "listeners": BOTH, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS, **extra})


def test_sasl_listener_with_plain_users() -> None:
    config = sasl_config()
    assert [listener.security_protocol for listener in config.listeners] == [
        "PLAINTEXT", "SASL_PLAINTEXT"]
    security = config.listener_security["SASL_PLAINTEXT"]
    assert security.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert security.plain_users == {"admin": "admin-secret", "alice": 'alice "quoted" secret'}
    assert security.reauth_ms == {"PLAIN": 0, "SCRAM-SHA-512": 0}
    assert not config.listener_security["PLAINTEXT"].is_sasl


def test_custom_listener_names_through_the_protocol_map() -> None:
    config = BrokerConfig.from_properties({
        "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.external.scram-sha-256.connections.max.reauth.ms": "60000",
        "advertised.listeners": "EXTERNAL://kafka.example:19093,INTERNAL://10.0.0.1:9092",
    })
    assert config.listener_security["EXTERNAL"].reauth_ms == {"SCRAM-SHA-256": 60000}
    assert config.advertised_listeners[0] == Listener("EXTERNAL", "kafka.example", 19093,
                                                      "SASL_PLAINTEXT")
    assert endpoint_for(config.advertised_listeners, "INTERNAL") == (
        Listener("INTERNAL", "10.0.0.1", 9092, "PLAINTEXT"),)
    assert endpoint_for(config.advertised_listeners, "OTHER")[0].name == "EXTERNAL"


def test_unprefixed_jaas_and_reauth_apply_to_every_sasl_listener() -> None:
    config = BrokerConfig.from_properties({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "connections.max.reauth.ms": "1000"})
    assert config.listener_security["SASL_PLAINTEXT"].reauth_ms == {"PLAIN": 1000}


@pytest.mark.parametrize(("properties", "key", "reason"), [
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}, "sasl.enabled.mechanisms", "GSSAPI"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "OAUTHBEARER"},
     "sasl.enabled.mechanisms", "OAUTHBEARER is not supported"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config", "PlainLoginModule"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": "garbage"}, "sasl.jaas.config", "not a JAAS configuration"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
     "sasl.jaas.config", "must be org.apache.kafka.common.security.plain.PlainLoginModule"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
     "sasl.jaas.config", "no user_<name>"),
    ({"listeners": "SSL://127.0.0.1:9093"}, "ssl.keystore.location", "needs a key store"),
    ({"listeners": "SASL_SSL://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/keystore.pem",
      "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                          "user_a=\"b\";"},
     "ssl.keystore.location", "cannot be used"),
    ({"listeners": "FOO://127.0.0.1:9093"}, "listener.security.protocol.map", "listener FOO"),
    ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://a:2"}, "listeners", "used twice"),
    ({"listeners": "PLAINTEXT://a:1", "advertised.listeners": "OTHER://b:1"},
     "advertised.listeners", "not one of the listeners"),
    ({"listener.security.protocol.map": "PLAINTEXT:NOPE"}, "listener.security.protocol.map",
     "is not LISTENER_NAME:SECURITY_PROTOCOL"),
])
def test_bad_security_config_names_the_key(properties: dict[str, str], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_properties(properties)
    assert raised.value.key == key and reason in str(raised.value)


def test_jaas_passwords_never_appear_in_errors() -> None:
    bad = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="s3cret"'
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_properties({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
                                      "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": bad})
    assert "s3cret" not in str(raised.value)


def test_a_sasl_default_is_no_error_without_a_sasl_listener() -> None:
    config = BrokerConfig.from_properties({})
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
