"""A TLS listener that asks for client certificates names its trusted CAs, as Kafka's does, and
clients that choose their certificate by that list (librdkafka) leave an untrusted one out."""

from __future__ import annotations

import ssl

import pytest

from broker.tls.ca_names import named_authority_count
from broker.tls.config import server_context, tls_settings
from broker.tls.listener import ANONYMOUS, principal_of
from tests.integration.tls_certs import Pki
from tests.unit.broker.tls.test_config import broker_properties, client_of, handshake


@pytest.mark.parametrize("mode", ["requested", "required"])
def test_a_listener_asking_for_certificates_names_its_trust_store(pki: Pki, mode: str) -> None:
    settings = tls_settings("SSL", "SSL", broker_properties(pki, **{"ssl.client.auth": mode}))
    assert named_authority_count(server_context(settings)) == 1


def test_inline_trusted_certificates_are_named_too(pki: Pki) -> None:
    properties = broker_properties(pki, **{"ssl.client.auth": "requested"})
    del properties["ssl.truststore.location"]
    properties["ssl.truststore.certificates"] = pki.ca.read_text().replace("\n", " ")
    both = pki.ca.read_text() + pki.untrusted_ca.read_text()
    assert named_authority_count(server_context(tls_settings("SSL", "SSL", properties))) == 1
    properties["ssl.truststore.certificates"] = both
    assert named_authority_count(server_context(tls_settings("SSL", "SSL", properties))) == 2


def test_no_names_when_no_certificate_is_asked_for(pki: Pki) -> None:
    settings = tls_settings("SSL", "SSL", broker_properties(pki))
    assert named_authority_count(server_context(settings)) == 0


def test_the_names_change_nothing_for_python_clients(pki: Pki) -> None:
    """Python's ssl client sends its certificate whatever the list says: a trusted one gives
    the principal, an untrusted one still fails the handshake (as with Kafka)."""
    settings = tls_settings("SSL", "SSL", broker_properties(pki, **{"ssl.client.auth":
                                                                    "requested"}))
    server_side = handshake(server_context(settings), client_of(pki, pki.client("alice")))
    assert principal_of(server_side, settings.principal_mapper) != ANONYMOUS
    with pytest.raises(ssl.SSLError):
        handshake(server_context(settings), client_of(pki, pki.untrusted_client))
