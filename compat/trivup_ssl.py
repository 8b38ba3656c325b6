"""The certificates librdkafka's SSL tests expect, made with the ``openssl`` CLI as trivup's
``SslApp`` lays them out, and the ``SSL_*`` environment its ``LibrdkafkaTestApp`` exports.

librdkafka's CI runs its suite against a trivup cluster started with ``--ssl``: trivup makes two
CAs (an unused one, then the one everything is signed with; ``all_cas.pem`` holds both, the
unused one first, to test multi-CA PEM files), a key store per broker, and one client identity
in every encoding the tests load (``0097_ssl_verify``: PEM and DER private and public keys, a
password-protected PKCS#12 holding the key, its certificate and both CAs). Subjects are
``/C=NN/ST=ST/L=L/O=O/CN=<name>`` and the password of every protected file is ``12345678``.
With ``intermediate``, the client certificate is signed by an intermediate CA (signed by the
CA), its chain written after it, as ``--ssl-intermediate-ca`` does.

For Samsa the broker's key store is PEM (``ssl.keystore.type=PEM``: the key encrypted with the
key password, then the certificate), for ``localhost`` and ``127.0.0.1``; the trust store is
the CA's PEM. ``Pki.environment()`` is what trivup exports (``SSL_ca_pem``, ``SSL_pub_der``,
``SSL_pkcs``, ``SSL_client_auth``, ...), ``Pki.client_conf()`` the ``ssl.*`` lines trivup writes
into ``test.conf``, ``Pki.broker_settings()`` the broker's ``ssl.*`` keys.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "12345678"
DAYS = "30"
CA_NAME = "SslApp"
UNUSED_CA_NAME = "SslApp_unused"
CLIENT_NAME = "librdkafka"


def _subject(name: str) -> str:
    return f"/C=NN/ST=ST/L=L/O=O/CN={name}"


def _openssl(directory: Path, *arguments: str) -> None:
    completed = subprocess.run(["openssl", *arguments], cwd=directory, capture_output=True,
                               text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"openssl {arguments[0]} failed: {completed.stderr.strip()}")


@dataclass(frozen=True)
class Ca:
    name: str
    key: Path  # encrypted with PASSWORD
    pem: Path
    der: Path
    serial: Path

    def environment(self, prefix: str) -> dict[str, str]:
        return {f"{prefix}_key": str(self.key), f"{prefix}_pem": str(self.pem),
                f"{prefix}_der": str(self.der), f"{prefix}_srl": str(self.serial),
                f"{prefix}_password": PASSWORD}


@dataclass(frozen=True)
class Pair:
    """A key (PEM and DER) and its certificate (PEM and DER)."""

    priv_pem: Path
    priv_der: Path
    pub_pem: Path
    pub_der: Path
    request: Path

    def environment(self, prefix: str) -> dict[str, str]:
        return {f"{prefix}priv_pem": str(self.priv_pem), f"{prefix}priv_der": str(self.priv_der),
                f"{prefix}pub_pem": str(self.pub_pem), f"{prefix}pub_der": str(self.pub_der)}


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Ca
    unused_ca: Ca
    all_cas_pem: Path
    client: Pair
    pkcs12: Path
    intermediate: Pair | None
    broker_keystore: Path
    client_auth: str

    def environment(self) -> dict[str, str]:
        """trivup's ``SSL_*`` variables for the test runner."""
        found = {**self.ca.environment("SSL_ca"), **self.unused_ca.environment("SSL_unused_ca"),
                 "SSL_all_cas_pem": str(self.all_cas_pem), "SSL_client_auth": self.client_auth,
                 **self.client.environment("SSL_"), "SSL_pkcs": str(self.pkcs12),
                 "SSL_req": str(self.client.request), "SSL_password": PASSWORD}
        if self.intermediate is not None:
            found |= self.intermediate.environment("SSL_intermediate_")
            found["SSL_intermediate_req"] = str(self.intermediate.request)
        return found

    def client_conf(self) -> str:
        """The ``test.conf`` lines trivup writes for an SSL client (no bootstrap)."""
        return (f"security.protocol=SSL\nssl.ca.location={self.ca.pem}\n"
                f"ssl.certificate.location={self.client.pub_pem}\n"
                f"ssl.key.location={self.client.priv_pem}\nssl.key.password={PASSWORD}\n")

    def broker_settings(self) -> dict[str, str]:
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.broker_keystore),
                "ssl.key.password": PASSWORD, "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca.pem), "ssl.client.auth": self.client_auth}


def make_pki(directory: Path, *, client_auth: str = "required",
             intermediate: bool = False) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    unused_ca = _ca(directory, UNUSED_CA_NAME)
    ca = _ca(directory, CA_NAME)
    all_cas = directory / "all_cas.pem"
    all_cas.write_text(unused_ca.pem.read_text() + ca.pem.read_text())
    chain = _intermediate(directory, ca) if intermediate else None
    client = _pair(directory, CLIENT_NAME, issuer=(chain.pub_pem, chain.priv_pem, None)
                   if chain else (ca.pem, ca.key, PASSWORD), serial=ca.serial)
    pkcs12 = _pkcs12(directory, client, [*([chain.pub_pem] if chain else []), unused_ca.pem,
                                         ca.pem])
    if chain is not None:  # the leaf, then the intermediate: the chain a client sends
        client.pub_pem.write_text(client.pub_pem.read_text() + chain.pub_pem.read_text())
    return Pki(directory, ca, unused_ca, all_cas, client, pkcs12, chain,
               _broker_keystore(directory, ca), client_auth)


def _ca(directory: Path, name: str) -> Ca:
    ca = Ca(name, directory / f"ca_{name}.key", directory / f"ca_{name}.pem",
            directory / f"ca_{name}.der", directory / f"ca_{name}.srl")
    _openssl(directory, "req", "-new", "-x509", "-newkey", "rsa:2048", "-keyout", str(ca.key),
             "-out", str(ca.pem), "-days", DAYS, "-passout", f"pass:{PASSWORD}",
             "-subj", _subject(name))
    _openssl(directory, "x509", "-in", str(ca.pem), "-outform", "der", "-out", str(ca.der))
    ca.serial.write_text("01\n")
    return ca


def _pair(directory: Path, name: str, *, issuer: tuple[Path, Path, str | None], serial: Path,
          extensions: str | None = None) -> Pair:
    """An RSA key (PEM unencrypted, as trivup's ``genpkey`` writes it; DER) and a certificate
    for ``name`` signed by ``issuer`` (certificate, key, the key's password or None)."""
    pair = Pair(directory / f"{name}-priv.pem", directory / f"{name}-priv.der",
                directory / f"{name}-pub.pem", directory / f"{name}-pub.der",
                directory / f"{name}.req")
    _openssl(directory, "genpkey", "-algorithm", "RSA", "-out", str(pair.priv_pem))
    _openssl(directory, "req", "-new", "-key", str(pair.priv_pem), "-out", str(pair.request),
             "-subj", _subject(name))
    certificate, key, password = issuer
    signing = ["x509", "-req", "-in", str(pair.request), "-CA", str(certificate),
               "-CAkey", str(key), "-CAserial", str(serial), "-days", DAYS,
               "-out", str(pair.pub_pem)]
    if password is not None:
        signing += ["-passin", f"pass:{password}"]
    if extensions is not None:
        extension_file = directory / f"{name}.ext"
        extension_file.write_text(extensions)
        signing += ["-extfile", str(extension_file)]
    _openssl(directory, *signing)
    _openssl(directory, "x509", "-in", str(pair.pub_pem), "-outform", "der",
             "-out", str(pair.pub_der))
    _openssl(directory, "rsa", "-in", str(pair.priv_pem), "-outform", "der",
             "-out", str(pair.priv_der))
    return pair


def _intermediate(directory: Path, ca: Ca) -> Pair:
    return _pair(directory, f"{CLIENT_NAME}-intermediate", issuer=(ca.pem, ca.key, PASSWORD),
                 serial=ca.serial, extensions="basicConstraints=CA:TRUE,pathlen:0\n")


def _pkcs12(directory: Path, client: Pair, extra_certificates: list[Path]) -> Path:
    """The client's key, certificate and ``extra_certificates`` in one PKCS#12 file."""
    path = directory / f"{CLIENT_NAME}.pfx"
    # One -certfile (OpenSSL 3 keeps only the last of several): the certificates concatenated.
    extra = directory / f"{CLIENT_NAME}.pfx-certificates.pem"
    extra.write_text("".join(certificate.read_text() for certificate in extra_certificates))
    _openssl(directory, "pkcs12", "-export", "-out", str(path), "-inkey", str(client.priv_pem),
             "-in", str(client.pub_pem), "-certfile", str(extra), "-passout", f"pass:{PASSWORD}")
    return path


def _broker_keystore(directory: Path, ca: Ca) -> Path:
    """The broker's PEM key store: its key (PKCS#8, encrypted with PASSWORD), certificate and
    the CA, the certificate naming localhost and 127.0.0.1 (librdkafka checks the host)."""
    broker = _pair(directory, "broker", issuer=(ca.pem, ca.key, PASSWORD), serial=ca.serial,
                   extensions="subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    encrypted = directory / "broker-priv.enc.pem"
    _openssl(directory, "pkcs8", "-topk8", "-in", str(broker.priv_pem), "-out", str(encrypted),
             "-v2", "aes-256-cbc", "-passout", f"pass:{PASSWORD}")
    keystore = directory / "broker.keystore.pem"
    keystore.write_text(encrypted.read_text() + broker.pub_pem.read_text() + ca.pem.read_text())
    return keystore
