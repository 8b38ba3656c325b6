"""Certificates for TLS tests, made with the ``openssl`` CLI into a directory: a CA, a broker
certificate for 127.0.0.1/localhost, client certificates, and a second CA nobody trusts.

Each identity is written as Kafka's PEM key store wants it (``<name>.keystore.pem``: the PKCS#8
private key, then the certificate chain) and as separate ``<name>.key`` / ``<name>.crt`` files
for librdkafka and kafka-python. EC P-256 keys: quick to make.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Identity", "Pki", "make_pki"]

DAYS = "2"


@dataclass(frozen=True)
class Identity:
    key: Path
    certificate: Path
    keystore: Path  # key + certificate chain, Kafka's PEM key store layout

    def properties(self) -> dict[str, str]:
        """``ssl.keystore.*`` for Kafka's clients and Samsa's broker."""
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore)}


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Path  # the trusted CA's certificate (the trust store)
    broker: Identity
    clients: dict[str, Identity]  # by common name, signed by the trusted CA
    untrusted_client: Identity  # signed by another CA
    untrusted_ca: Path

    def client(self, name: str) -> Identity:
        return self.clients[name]


def _openssl(*arguments: str, cwd: Path) -> None:
    subprocess.run(["openssl", *arguments], cwd=cwd, check=True, capture_output=True)


def _key(directory: Path, name: str) -> Path:
    path = directory / f"{name}.key"
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(path), cwd=directory)
    return path


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    key = _key(directory, name)
    certificate = directory / f"{name}.crt"
    _openssl("req", "-x509", "-new", "-key", str(key), "-days", DAYS, "-subj", f"/CN={name}",
             "-out", str(certificate), cwd=directory)
    return key, certificate


def _signed(directory: Path, name: str, subject: str, ca: tuple[Path, Path], *,
            san: str | None = None) -> Identity:
    key = _key(directory, name)
    request, certificate = directory / f"{name}.csr", directory / f"{name}.crt"
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(request), cwd=directory)
    extensions = directory / f"{name}.ext"
    lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment",
             "extendedKeyUsage=serverAuth,clientAuth"]
    if san:
        lines.append(f"subjectAltName={san}")
    extensions.write_text("\n".join(lines) + "\n")
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca[1]), "-CAkey", str(ca[0]),
             "-CAcreateserial", "-days", DAYS, "-extfile", str(extensions),
             "-out", str(certificate), cwd=directory)
    keystore = directory / f"{name}.keystore.pem"
    keystore.write_text(key.read_text() + certificate.read_text() + ca[1].read_text())
    return Identity(key, certificate, keystore)


def make_pki(directory: Path, clients: dict[str, str] | None = None) -> Pki:
    """A CA, the broker's identity, ``clients`` (name -> subject, default alice and bob in
    OU=eng,O=Samsa) and an untrusted client (same subject as alice, another CA)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    other_ca = _ca(directory, "other-ca")
    subjects = clients or {"alice": "/O=Samsa/OU=eng/CN=alice", "bob": "/O=Samsa/OU=ops/CN=bob"}
    return Pki(
        directory=directory, ca=ca[1],
        broker=_signed(directory, "broker", "/O=Samsa/CN=localhost", ca,
                       san="IP:127.0.0.1,DNS:localhost"),
        clients={name: _signed(directory, name, subject, ca) for name, subject in subjects.items()},
        untrusted_client=_signed(directory, "mallory", "/O=Samsa/OU=eng/CN=alice", other_ca),
        untrusted_ca=other_ca[1],
    )
