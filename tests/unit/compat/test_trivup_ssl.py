"""trivup's SSL layout for librdkafka's 0097: every file the SSL_* variables name exists and is
what the name says (checked with the openssl CLI), and the client's certificate verifies against
the CA the broker trusts (directly or through the intermediate)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from compat import librdkafka_suite
from compat.trivup_ssl import PASSWORD, make_pki

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def openssl(*arguments: str) -> str:
    return subprocess.run(["openssl", *arguments], check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.parametrize("intermediate", [False, True])
def test_the_environment_names_files_as_trivup_does(tmp_path: Path, intermediate: bool) -> None:
    pki = make_pki(tmp_path, client_auth="requested", intermediate=intermediate)
    environment = pki.environment()
    for name in ("SSL_pkcs", "SSL_pub_der", "SSL_pub_pem", "SSL_priv_der", "SSL_priv_pem",
                 "SSL_ca_der", "SSL_ca_pem", "SSL_all_cas_pem", "SSL_unused_ca_pem"):
        assert Path(environment[name]).is_file(), name
    assert environment["SSL_password"] == PASSWORD
    assert environment["SSL_client_auth"] == "requested"
    assert ("SSL_intermediate_pub_pem" in environment) == intermediate
    assert openssl("x509", "-in", environment["SSL_pub_der"], "-inform", "der", "-noout",
                   "-subject").strip().endswith("CN = librdkafka")
    assert openssl("x509", "-in", environment["SSL_ca_pem"], "-noout", "-subject").strip() \
        .endswith("CN = SslApp")
    # the PKCS#12: key, its certificate and both CAs (plus the intermediate), password-protected
    dump = openssl("pkcs12", "-in", environment["SSL_pkcs"], "-passin", f"pass:{PASSWORD}",
                   "-nodes")
    assert dump.count("BEGIN CERTIFICATE") == (4 if intermediate else 3)
    assert "BEGIN PRIVATE KEY" in dump
    chain = ["-untrusted", environment["SSL_intermediate_pub_pem"]] if intermediate else []
    assert "OK" in openssl("verify", "-CAfile", environment["SSL_ca_pem"], *chain,
                           environment["SSL_pub_der"].replace(".der", ".pem"))
    broker = pki.broker_settings()
    assert broker["ssl.client.auth"] == "requested"
    assert "OK" in openssl("verify", "-CAfile", broker["ssl.truststore.location"],
                           "-verify_hostname", "localhost", "-verify_ip", "127.0.0.1",
                           broker["ssl.keystore.location"])
    conf = pki.client_conf()
    assert "security.protocol=SSL\n" in conf and f"ssl.key.password={PASSWORD}\n" in conf


def test_0097_runs_in_the_ssl_pass_only() -> None:
    assert set(librdkafka_suite.SSL_TESTS) == {"0097"}
    assert not set(librdkafka_suite.SSL_TESTS) & set(librdkafka_suite.SASL_TESTS)
