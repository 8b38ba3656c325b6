"""Certificate subjects as RFC 2253 names: the expected strings are what Java's
``X500Principal.getName()`` prints for the same certificates (checked with JDK 17)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from broker.tls.x500 import CertificateError, subject_distinguished_name
from tests.integration.tls_certs import Pki

TRICKY_SUBJECT = ("/C=US/ST=CA/L=Palo Alto/O=Acme, Inc./OU=eng+OU=ops/CN= #client=1 <x>;\"q\"\\\\ "
                  "/emailAddress=a@b.c/DC=example/UID=u1/serialNumber=42")
JAVA_NAME = ("2.5.4.5=#13023432,UID=u1,DC=example,1.2.840.113549.1.9.1=#16056140622e63,"
             "CN=\\ \\#client\\=1 \\<x\\>\\;\\\"q\\\"\\\\\\ ,OU=eng+OU=ops,O=Acme\\, Inc.,"
             "L=Palo Alto,ST=CA,C=US")


def _der(path: Path) -> bytes:
    return subprocess.run(["openssl", "x509", "-in", str(path), "-outform", "DER"],
                          check=True, capture_output=True).stdout


def test_escapes_keywords_oids_and_multi_valued_names_as_java(pki: Pki, tmp_path: Path) -> None:
    key, certificate = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out",
                    str(certificate), "-days", "1", "-subj", TRICKY_SUBJECT, "-multivalue-rdn"],
                   check=True, capture_output=True)
    assert subject_distinguished_name(_der(certificate)) == JAVA_NAME


def test_client_certificates(pki: Pki) -> None:
    assert subject_distinguished_name(_der(pki.client("alice").certificate)) == (
        "CN=alice,OU=eng,O=Samsa")
    assert subject_distinguished_name(_der(pki.broker.certificate)) == "CN=localhost,O=Samsa"


@pytest.mark.parametrize("der", [b"", b"\x30", b"\x30\x05\x02\x01", b"\x02\x01\x00",
                                 b"\x30\x03\x30\x01\x00"])
def test_garbage_is_a_certificate_error(der: bytes) -> None:
    with pytest.raises(CertificateError):
        subject_distinguished_name(der)
