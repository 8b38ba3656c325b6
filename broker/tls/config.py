"""TLS settings of a listener, and the ``ssl.SSLContext`` built from them.

Kafka's keys and defaults (``SslConfigs``, ``BrokerSecurityConfigs``), each resolved per
listener: ``listener.name.<listener>.ssl.<key>`` over ``ssl.<key>`` (listener name lower-cased,
as Kafka's ``ListenerName.configPrefix``). Semantics follow ``DefaultSslEngineFactory``:

- Key store: ``ssl.keystore.type`` PEM, either ``ssl.keystore.location`` (one file with the
  private key and the certificate chain) or ``ssl.keystore.key`` + ``ssl.keystore.certificate
  .chain`` (PEM text inline); ``ssl.key.password`` decrypts an encrypted key;
  ``ssl.keystore.password`` is refused with PEM, as Kafka refuses it. Kafka's default type is
  JKS: JKS and PKCS12 stores are refused (Python's ``ssl`` reads PEM only) with a hint to convert.
- Trust store: ``ssl.truststore.type`` PEM, ``ssl.truststore.location`` (a file of CA
  certificates) or ``ssl.truststore.certificates`` (inline); none = the system's CAs (Java: the
  JVM's cacerts).
- ``ssl.client.auth`` none | requested | required (a server's request for a client
  certificate, naming the trust store's CAs as Kafka's does: ``broker.tls.ca_names``). On a
  SASL_SSL listener only the listener-prefixed key counts (Kafka's rule; the
  broker-wide one is ignored there with a warning).
- ``ssl.enabled.protocols`` (default TLSv1.2,TLSv1.3) sets the lowest and highest version;
  ``ssl.protocol`` (default TLSv1.3) must name a protocol Samsa knows.
- ``ssl.cipher.suites`` (default: the library's): IANA names (Java's) from the table below or
  OpenSSL names, applied to TLS 1.2 and below; TLS 1.3's suites cannot be narrowed by Python's
  ``ssl`` and stay enabled (a warning says so when the list names none of them).
- ``ssl.endpoint.identification.algorithm`` (default https): the broker as a client (inter-
  broker, controller) checks the other node's certificate names its host; empty disables it.
- ``ssl.principal.mapping.rules`` (default DEFAULT): ``broker.tls.principal``.

A PEM given inline may be on one line (as in a properties file): it is re-wrapped as Kafka's
lenient PEM reader accepts it. Inline keys reach OpenSSL through a private temporary file that
is removed as soon as it is read. Any bad value raises ``ConfigError(key, value, reason)``
(passwords and inline keys shown as ``[hidden]``); contexts are built at start-up, so a store
that cannot be read stops the broker there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.tls.ca_names import name_trusted_authorities
from broker.tls.principal import MappingRuleError, PrincipalMapper, parse_rules
from storage.errors import ConfigError

__all__ = [
    "SSL_KEYS",
    "TlsSettings",
    "client_context",
    "server_context",
    "tls_settings",
]

logger = logging.getLogger("samsa.broker.tls")

HIDDEN = "[hidden]"
LISTENER_PREFIX = "listener.name."
PEM = "PEM"
# Kafka's SSL keys (the broker's); value None = no default. Keys Samsa accepts but cannot act
# on are in IGNORED_KEYS.
SSL_KEYS: dict[str, str | None] = {
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": "",
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": None,
    "ssl.keystore.password": None,
    "ssl.key.password": None,
    "ssl.keystore.key": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": None,
    "ssl.truststore.password": None,
    "ssl.truststore.certificates": None,
    "ssl.client.auth": "none",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.endpoint.identification.algorithm": "https",
}
IGNORED_KEYS = frozenset({  # Java's JSSE plumbing: no meaning for OpenSSL
    "ssl.provider", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation", "ssl.allow.dn.changes", "ssl.allow.san.changes",
})
SECRET_KEYS = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
                         "ssl.truststore.password"})
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}
PROTOCOL_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
SSL_PROTOCOLS = frozenset({"TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"})
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                          "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256"})
# Java's (IANA) names of the TLS 1.2 suites worth configuring -> OpenSSL's names.
IANA_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def is_ssl_key(key: str) -> bool:
    """A Kafka SSL key, bare or listener-prefixed (``listener.name.<l>.ssl.*``)."""
    if key.startswith(LISTENER_PREFIX):
        key = key[len(LISTENER_PREFIX):].partition(".")[2]
    return key in SSL_KEYS or key in IGNORED_KEYS


@dataclass(frozen=True, slots=True)
class Store:
    """A key store or trust store: a file or inline PEM text (never both)."""

    key: str  # the key that supplied it, for error messages
    location: str | None = None
    pem: str | None = None


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """One listener's TLS settings, validated (values, no context)."""

    listener_name: str
    keystore: Store | None
    key_password: str | None
    truststore: Store | None
    client_auth: str
    minimum_version: ssl.TLSVersion
    maximum_version: ssl.TLSVersion
    ciphers: str  # OpenSSL cipher string for TLS <= 1.2; "" = the library's default
    endpoint_identification: bool
    principal_mapper: PrincipalMapper


@dataclass(frozen=True, slots=True)
class _Lookup:
    listener_name: str
    properties: Mapping[str, str]

    def get(self, key: str) -> tuple[str, str | None]:
        """(the key that supplied the value, the value or Kafka's default)."""
        prefixed = f"{LISTENER_PREFIX}{self.listener_name.lower()}.{key}"
        if prefixed in self.properties:
            return prefixed, self.properties[prefixed].strip()
        if key in self.properties:
            return key, self.properties[key].strip()
        return key, SSL_KEYS[key]

    def is_prefixed(self, key: str) -> bool:
        return f"{LISTENER_PREFIX}{self.listener_name.lower()}.{key}" in self.properties


def tls_settings(listener_name: str, protocol: str, properties: Mapping[str, str], *,
                 server: bool = True) -> TlsSettings:
    """Resolve and check the TLS settings of ``listener_name`` (an SSL or SASL_SSL listener).
    ``server`` False: for this broker as a client of that listener (no key store needed)."""
    lookup = _Lookup(listener_name, properties)
    for key in IGNORED_KEYS:
        if key in properties or lookup.is_prefixed(key):
            logger.warning("%s is not used by Samsa (OpenSSL has no such setting)", key)
    keystore, key_password = _keystore(lookup)
    if keystore is None and server:
        key, _ = lookup.get("ssl.keystore.location")
        raise ConfigError(key, "(unset)", f"listener {listener_name} is {protocol}: it needs a "
                          "key store (ssl.keystore.location, or ssl.keystore.key and "
                          "ssl.keystore.certificate.chain)")
    minimum, maximum = _versions(lookup)
    return TlsSettings(
        listener_name=listener_name, keystore=keystore, key_password=key_password,
        truststore=_truststore(lookup), client_auth=_client_auth(lookup, protocol),
        minimum_version=minimum, maximum_version=maximum, ciphers=_ciphers(lookup),
        endpoint_identification=_endpoint_identification(lookup),
        principal_mapper=_principal_mapper(lookup),
    )


# -- contexts ---------------------------------------------------------------------------------


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context a TLS listener accepts connections with."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, settings, ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = CLIENT_AUTH[settings.client_auth]
    if settings.client_auth != "none" and settings.truststore is not None:
        # As Kafka's (JSSE's) certificate requests do: clients choose their certificate by it.
        name_trusted_authorities(context, location=settings.truststore.location,
                                 pem=settings.truststore.pem)
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context this broker connects to another node's TLS listener with (inter-broker,
    controller): the other node's certificate is always verified; its host name is checked
    when ``ssl.endpoint.identification.algorithm`` is https."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = settings.endpoint_identification
    _common(context, settings, ssl.Purpose.SERVER_AUTH)
    return context


def _common(context: ssl.SSLContext, settings: TlsSettings, purpose: ssl.Purpose) -> None:
    context.minimum_version = settings.minimum_version
    context.maximum_version = settings.maximum_version
    if settings.ciphers:
        _apply(context.set_ciphers, "ssl.cipher.suites", settings.ciphers, settings.ciphers)
    if settings.keystore is not None:
        _load_keystore(context, settings.keystore, settings.key_password)
    if settings.truststore is None:
        context.load_default_certs(purpose)  # Java: the JVM's cacerts
    elif settings.truststore.pem is not None:
        store = settings.truststore
        _apply(lambda: context.load_verify_locations(cadata=store.pem), store.key, HIDDEN)
    else:
        store = settings.truststore
        _apply(lambda: context.load_verify_locations(cafile=store.location), store.key,
               store.location or "")


def _load_keystore(context: ssl.SSLContext, store: Store, password: str | None) -> None:
    if store.location is not None:
        location = store.location
        _apply(lambda: context.load_cert_chain(location, password=password), store.key, location)
        return
    assert store.pem is not None
    descriptor, path = tempfile.mkstemp(prefix="samsa-keystore-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:  # mkstemp: mode 0600
            file.write(store.pem)
        _apply(lambda: context.load_cert_chain(path, password=password), store.key, HIDDEN)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _apply(action: Callable[..., object], key: str, shown: str, *arguments: object) -> None:
    try:
        action(*arguments)
    except (ssl.SSLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or str(error)
        raise ConfigError(key, shown, f"cannot be used: {reason}") from None


# -- the keys ---------------------------------------------------------------------------------


def _keystore(lookup: _Lookup) -> tuple[Store | None, str | None]:
    type_key, store_type = lookup.get("ssl.keystore.type")
    location_key, location = lookup.get("ssl.keystore.location")
    password_key, password = lookup.get("ssl.keystore.password")
    key_key, private_key = lookup.get("ssl.keystore.key")
    chain_key, chain = lookup.get("ssl.keystore.certificate.chain")
    _, key_password = lookup.get("ssl.key.password")
    if private_key:
        if store_type != PEM:
            raise ConfigError(type_key, store_type, "SSL private key can be specified only for "
                              f"PEM, but key store type is {store_type}.")
        if not chain:
            raise ConfigError(chain_key, "(unset)", "SSL private key is specified, but "
                              "certificate chain is not specified.")
        if location:
            raise ConfigError(location_key, location, "Both SSL key store location and "
                              "separate private key are specified.")
        if password:
            raise ConfigError(password_key, HIDDEN, "SSL key store password cannot be specified "
                              "with PEM format, only key password may be specified.")
        pem = _normalised_pem(key_key, private_key) + _normalised_pem(chain_key, chain)
        return Store(key_key, pem=pem), key_password or None
    if chain:
        raise ConfigError(key_key, "(unset)", "SSL certificate chain is specified, but private "
                          "key is not specified")
    if not location:
        if password:
            raise ConfigError(password_key, HIDDEN, "SSL key store is not specified, but key "
                              "store password is specified.")
        return None, None
    _check_type(type_key, store_type)
    if password:
        raise ConfigError(password_key, HIDDEN, "SSL key store password cannot be specified "
                          "with PEM format, only key password may be specified")
    return Store(location_key, location=location), key_password or None


def _truststore(lookup: _Lookup) -> Store | None:
    type_key, store_type = lookup.get("ssl.truststore.type")
    location_key, location = lookup.get("ssl.truststore.location")
    password_key, password = lookup.get("ssl.truststore.password")
    certificates_key, certificates = lookup.get("ssl.truststore.certificates")
    if certificates:
        if store_type != PEM:
            raise ConfigError(type_key, store_type, "SSL trust store certs can be specified only "
                              f"for PEM, but trust store type is {store_type}.")
        if location:
            raise ConfigError(location_key, location, "Both SSL trust store location and "
                              "separate trust certificates are specified.")
        if password:
            raise ConfigError(password_key, HIDDEN, "SSL trust store password cannot be "
                              "specified for PEM format.")
        return Store(certificates_key, pem=_normalised_pem(certificates_key, certificates))
    if not location:
        if password:
            raise ConfigError(password_key, HIDDEN, "SSL trust store is not specified, but "
                              "trust store password is specified.")
        return None
    _check_type(type_key, store_type)
    if password:
        raise ConfigError(password_key, HIDDEN, "SSL trust store password cannot be specified "
                          "for PEM format.")
    return Store(location_key, location=location)


def _check_type(key: str, store_type: str | None) -> None:
    if store_type != PEM:
        raise ConfigError(key, store_type or "", f"key/trust store type {store_type} is not "
                          "supported by Samsa, only PEM (convert a store with `keytool "
                          "-importkeystore -deststoretype PKCS12` then `openssl pkcs12 -nodes`)")


def _normalised_pem(key: str, text: str) -> str:
    """PEM blocks re-wrapped at 64 columns (Kafka accepts them on one line)."""
    blocks = _PEM_BLOCK.findall(text)
    if not blocks:
        raise ConfigError(key, HIDDEN, "no PEM block (-----BEGIN ...-----) found")
    out = []
    for label, body in blocks:
        base64 = "".join(body.split())
        lines = [base64[i:i + 64] for i in range(0, len(base64), 64)]
        out.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""]))
    return "".join(out)


def _client_auth(lookup: _Lookup, protocol: str) -> str:
    key, value = lookup.get("ssl.client.auth")
    if protocol == "SASL_SSL" and not lookup.is_prefixed("ssl.client.auth"):
        if (value or "none").lower() != "none":
            logger.warning("Broker configuration 'ssl.client.auth' is applied only to SSL "
                           "listeners; use listener.name.%s.ssl.client.auth for the SASL_SSL "
                           "listener %s", lookup.listener_name.lower(), lookup.listener_name)
        return "none"
    mode = (value or "none").strip().lower()
    if mode not in CLIENT_AUTH:
        raise ConfigError(key, value or "", "must be one of required, requested, none")
    return mode


def _versions(lookup: _Lookup) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    key, protocol = lookup.get("ssl.protocol")
    if protocol not in SSL_PROTOCOLS:
        raise ConfigError(key, protocol or "", f"must be one of {', '.join(sorted(SSL_PROTOCOLS))}")
    key, raw = lookup.get("ssl.enabled.protocols")
    names = [name.strip() for name in (raw or "").split(",") if name.strip()]
    unknown = [name for name in names if name not in PROTOCOL_VERSIONS]
    if not names or unknown:
        raise ConfigError(key, raw or "", f"must list protocols among {', '.join(PROTOCOL_VERSIONS)}")
    versions = sorted(PROTOCOL_VERSIONS[name] for name in names)
    return versions[0], versions[-1]


def _ciphers(lookup: _Lookup) -> str:
    key, raw = lookup.get("ssl.cipher.suites")
    names = [name.strip() for name in (raw or "").split(",") if name.strip()]
    if names and not TLS13_SUITES & set(names):
        logger.warning("%s: TLS 1.3's cipher suites stay enabled (Python's ssl cannot narrow "
                       "them)", key)
    suites = [IANA_SUITES.get(name, name) for name in names if name not in TLS13_SUITES]
    unknown = [name for name in suites if name.startswith("TLS_")]
    if unknown:
        raise ConfigError(key, raw or "", f"unknown cipher suite(s) {', '.join(unknown)}: use "
                          "OpenSSL's names for suites outside Samsa's table")
    return ":".join(suites)


def _endpoint_identification(lookup: _Lookup) -> bool:
    key, raw = lookup.get("ssl.endpoint.identification.algorithm")
    algorithm = (raw or "").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(key, raw or "", "must be https or empty (no host name check)")
    return algorithm == "https"


def _principal_mapper(lookup: _Lookup) -> PrincipalMapper:
    key, raw = lookup.get("ssl.principal.mapping.rules")
    try:
        return parse_rules(raw)
    except MappingRuleError as error:
        raise ConfigError(key, raw or "", str(error)) from None
