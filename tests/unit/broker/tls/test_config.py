"""TLS settings: Kafka's keys resolved per listener, Kafka's refusals, contexts that work (a
server and a client context handshake through memory BIOs, no socket)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.tls.config import client_context, server_context, tls_settings
from broker.tls.listener import ANONYMOUS, principal_of
from broker.tls.principal import parse_rules
from storage.errors import ConfigError
from tests.integration.tls_certs import Identity, Pki


def broker_properties(pki: Pki, **extra: str) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker.keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca), **extra}


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str = "localhost"
              ) -> ssl.SSLObject:
    """Run a TLS handshake in memory; the server's SSLObject (raises ssl.SSLError)."""
    buffers = [ssl.MemoryBIO() for _ in range(4)]
    server_side = server.wrap_bio(buffers[0], buffers[1], server_side=True)
    client_side = client.wrap_bio(buffers[2], buffers[3], server_hostname=host)
    done = {"server": False, "client": False}
    for _ in range(10):
        for name, side, outgoing, incoming in (("client", client_side, buffers[3], buffers[0]),
                                               ("server", server_side, buffers[1], buffers[2])):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            incoming.write(outgoing.read())
        if all(done.values()):
            client_side.write(b"ping")  # TLS 1.3: the server checks the client cert here
            buffers[0].write(buffers[3].read())
            assert server_side.read() == b"ping"
            return server_side
    raise AssertionError("the handshake did not finish")


def client_of(pki: Pki, identity: Identity | None, ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca or pki.ca))
    if identity is not None:
        context.load_cert_chain(identity.certificate, identity.key)
    return context


@pytest.mark.parametrize(("mode", "with_certificate", "principal"), [
    ("required", True, "User:CN=alice,OU=eng,O=Samsa"),
    ("requested", True, "User:CN=alice,OU=eng,O=Samsa"),
    ("requested", False, ANONYMOUS),
    ("none", True, ANONYMOUS),
])
def test_client_auth_and_the_principal(pki: Pki, mode: str, with_certificate: bool,
                                       principal: str) -> None:
    settings = tls_settings("SSL", "SSL", broker_properties(pki, **{"ssl.client.auth": mode}))
    identity = pki.client("alice") if with_certificate else None
    server_side = handshake(server_context(settings), client_of(pki, identity))
    assert principal_of(server_side, settings.principal_mapper) == principal


def test_required_client_auth_refuses_no_certificate_and_an_untrusted_one(pki: Pki) -> None:
    settings = tls_settings("SSL", "SSL", broker_properties(pki, **{"ssl.client.auth": "required"}))
    for identity in (None, pki.untrusted_client):
        with pytest.raises(ssl.SSLError):
            handshake(server_context(settings), client_of(pki, identity))


def test_mapping_rules_give_the_short_name(pki: Pki) -> None:
    properties = broker_properties(pki, **{
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=eng,.*$/$1/U,DEFAULT"})
    settings = tls_settings("SSL", "SSL", properties)
    server_side = handshake(server_context(settings), client_of(pki, pki.client("alice")))
    assert principal_of(server_side, settings.principal_mapper) == "User:ALICE"
    server_side = handshake(server_context(settings), client_of(pki, pki.client("bob")))
    assert principal_of(server_side, settings.principal_mapper) == "User:CN=bob,OU=ops,O=Samsa"


def test_listener_prefix_wins_and_sasl_ssl_needs_it_for_client_auth(pki: Pki) -> None:
    properties = broker_properties(pki, **{"ssl.client.auth": "required",
                                           "listener.name.internal.ssl.client.auth": "requested"})
    assert tls_settings("INTERNAL", "SSL", properties).client_auth == "requested"
    assert tls_settings("EXTERNAL", "SSL", properties).client_auth == "required"
    assert tls_settings("EXTERNAL", "SASL_SSL", properties).client_auth == "none"
    assert tls_settings("INTERNAL", "SASL_SSL", properties).client_auth == "requested"


def test_inline_pem_on_one_line_as_in_a_properties_file(pki: Pki) -> None:
    text = pki.broker.keystore.read_text()
    key = text[:text.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")]
    chain = text[len(key):]
    properties = {"ssl.keystore.type": "PEM", "ssl.keystore.key": key.replace("\n", " "),
                  "ssl.keystore.certificate.chain": chain.replace("\n", " "),
                  "ssl.truststore.type": "PEM",
                  "ssl.truststore.certificates": pki.ca.read_text().replace("\n", " ")}
    settings = tls_settings("SSL", "SSL", properties)
    handshake(server_context(settings), client_of(pki, None))
    broker_as_client = client_context(tls_settings("SSL", "SSL", properties, server=False))
    handshake(server_context(settings), broker_as_client)


def test_endpoint_identification_checks_the_host_name(pki: Pki) -> None:
    settings = tls_settings("SSL", "SSL", broker_properties(pki))
    handshake(server_context(settings), client_context(settings), host="127.0.0.1")  # a SAN
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(server_context(settings), client_context(settings), host="elsewhere")
    relaxed = tls_settings("SSL", "SSL", broker_properties(
        pki, **{"ssl.endpoint.identification.algorithm": ""}))
    handshake(server_context(settings), client_context(relaxed), host="elsewhere")


def test_enabled_protocols_and_cipher_suites(pki: Pki) -> None:
    settings = tls_settings("SSL", "SSL", broker_properties(pki, **{
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}))
    assert settings.minimum_version == settings.maximum_version == ssl.TLSVersion.TLSv1_2
    server_side = handshake(server_context(settings), client_of(pki, None))
    assert server_side.version() == "TLSv1.2"
    assert server_side.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


@pytest.mark.parametrize(("extra", "key", "reason"), [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "only PEM"),
    ({"ssl.keystore.type": "PKCS12"}, "ssl.keystore.type", "only PEM"),
    ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type", "only PEM"),
    ({"ssl.keystore.password": "secret"}, "ssl.keystore.password",
     "cannot be specified with PEM format"),
    ({"ssl.truststore.password": "secret"}, "ssl.truststore.password",
     "cannot be specified for PEM format"),
    ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----x-----END PRIVATE KEY-----"},
     "ssl.keystore.certificate.chain", "certificate chain is not specified"),
    ({"ssl.client.auth": "always"}, "ssl.client.auth", "required, requested, none"),
    ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols", "must list protocols"),
    ({"ssl.protocol": "SSL"}, "ssl.protocol", "must be one of"),
    ({"ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "ssl.cipher.suites", "unknown cipher suite"),
    ({"ssl.endpoint.identification.algorithm": "ldaps"},
     "ssl.endpoint.identification.algorithm", "https or empty"),
    ({"ssl.principal.mapping.rules": "RULE:x/y"}, "ssl.principal.mapping.rules", "Invalid rule"),
    ({"listener.name.ssl.ssl.keystore.location": "/nonexistent.pem"},
     "listener.name.ssl.ssl.keystore.location", "cannot be used"),
])
def test_bad_settings_fail_at_start_naming_the_key(pki: Pki, extra: dict[str, str], key: str,
                                                   reason: str) -> None:
    properties = {"listeners": "SSL://127.0.0.1:0", **broker_properties(pki), **extra}
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_properties(properties)
    assert raised.value.key == key
    assert reason in raised.value.reason


def test_secrets_never_appear_in_errors(pki: Pki) -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_properties({"listeners": "SSL://127.0.0.1:0", **broker_properties(
            pki, **{"ssl.keystore.password": "hunter2"})})
    assert "hunter2" not in str(raised.value)


def test_ssl_keys_are_known_and_kept_out_of_the_broker_table(pki: Pki,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig.from_properties({"listeners": "SSL://127.0.0.1:0",
                                           **broker_properties(pki), "ssl.typo": "x"})
    assert config.listener_security["SSL"].is_tls
    warned = [r.getMessage() for r in caplog.records if "isn't a known config" in r.getMessage()]
    assert warned == ["the configuration 'ssl.typo' was supplied but isn't a known config"]


def test_default_rules_object() -> None:
    assert parse_rules(None).name("CN=x") == "CN=x"
