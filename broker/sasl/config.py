"""The security of each listener: its protocol and, for SASL listeners, mechanisms and users.

Kafka's keys, resolved per listener as Kafka's ``ListenerName.configPrefix`` does (the listener
name and the mechanism lower-cased in the prefix):

- ``listener.security.protocol.map`` maps each listener name to PLAINTEXT, SSL, SASL_PLAINTEXT
  or SASL_SSL (Kafka's default maps each protocol to itself); a listener name missing from it
  is an error. SSL and SASL_SSL listeners get their TLS settings and server context from
  ``broker.tls.config`` (the ``ssl.*`` keys, listener-prefixed or not).
- ``listener.name.<listener>.sasl.enabled.mechanisms`` > ``sasl.enabled.mechanisms`` (default
  GSSAPI, Kafka's): each one must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 on a SASL listener.
- ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` > ``sasl.jaas.config`` (Samsa also
  reads the unprefixed key, which Kafka's broker ignores): PLAIN needs a ``PlainLoginModule``
  whose ``user_<name>="<password>"`` options are the users; SCRAM users live in the metadata
  log (AlterUserScramCredentials), so a SCRAM JAAS entry is optional but must be a
  ``ScramLoginModule``.
- ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms`` >
  ``connections.max.reauth.ms`` (default 0: sessions never expire, KIP-368).

Bad values raise ``ConfigError(key, value, reason)``; a JAAS value is shown as ``[hidden]``.
The result is immutable, built once at start-up.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.tls.config import TlsSettings, is_ssl_key, server_context, tls_settings
from protocol.jaas import JaasError, LoginModule, parse_jaas_config
from storage.errors import ConfigError

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "LISTENER_PREFIX",
    "PLAIN",
    "SCRAM_MECHANISMS",
    "SUPPORTED_MECHANISMS",
    "ListenerSecurity",
    "is_security_key",
    "listener_security",
    "parse_protocol_map",
]

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
LISTENER_PREFIX = "listener.name."
JAAS_KEY = "sasl.jaas.config"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
HIDDEN = "[hidden]"


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's security: ``mechanisms`` is empty for PLAINTEXT and SSL; ``tls`` and
    ``ssl_context`` (the server context its connections use) are set for SSL and SASL_SSL."""

    listener_name: str
    security_protocol: str
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    reauth_ms: Mapping[str, int] = field(default_factory=dict)  # by mechanism; 0 = never
    max_receive_size: int = 524288
    tls: TlsSettings | None = None
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False, repr=False)

    @property
    def is_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def is_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")


def is_security_key(key: str) -> bool:
    """Keys read here but kept out of ``BROKER_KEYS`` (and so out of DescribeConfigs): the
    per-listener ones, the JAAS configs and the ``ssl.*`` keys, which hold passwords."""
    return key.startswith(LISTENER_PREFIX) or key == JAAS_KEY or is_ssl_key(key)


def parse_protocol_map(key: str, raw: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(key, raw, f"{item!r} is not LISTENER_NAME:SECURITY_PROTOCOL "
                                        f"(one of {', '.join(sorted(SECURITY_PROTOCOLS))})")
        if name in mapping:
            raise ConfigError(key, raw, f"listener name {name} is mapped twice")
        mapping[name] = protocol
    return mapping


def listener_security(
    listener_name: str, protocol: str, properties: Mapping[str, str], defaults: Mapping[str, str]
) -> ListenerSecurity:
    """Resolve the security settings of one listener (``protocol`` from the protocol map)."""
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        tls = tls_settings(listener_name, protocol, properties)
    if protocol in ("PLAINTEXT", "SSL"):
        return ListenerSecurity(listener_name, protocol, tls=tls,
                                ssl_context=None if tls is None else server_context(tls))
    lookup = _Lookup(listener_name, properties, defaults)
    mechanisms = _mechanisms(lookup)
    plain_users: dict[str, str] = {}
    reauth_ms: dict[str, int] = {}
    for mechanism in mechanisms:
        module = _jaas(lookup, mechanism)
        if mechanism == PLAIN:
            plain_users = _plain_users(lookup, module)
        reauth_ms[mechanism] = _reauth_ms(lookup, mechanism)
    key, raw = lookup.get("sasl.server.max.receive.size")
    return ListenerSecurity(listener_name, protocol, mechanisms, plain_users, reauth_ms,
                            _int(key, raw or "524288", 1), tls,
                            None if tls is None else server_context(tls))


@dataclass(frozen=True, slots=True)
class _Lookup:
    listener_name: str
    properties: Mapping[str, str]
    defaults: Mapping[str, str]

    def get(self, key: str, mechanism: str = "") -> tuple[str, str | None]:
        """(the key that supplied the value, the value): the most specific one set."""
        prefix = LISTENER_PREFIX + self.listener_name.lower() + "."
        candidates = [prefix + mechanism.lower() + "." + key] if mechanism else []
        candidates += [prefix + key, key]
        for candidate in candidates:
            if candidate in self.properties:
                return candidate, self.properties[candidate]
        return key, self.defaults.get(key)


def _mechanisms(lookup: _Lookup) -> tuple[str, ...]:
    key, raw = lookup.get("sasl.enabled.mechanisms")
    raw = raw or ""
    mechanisms = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if not mechanisms:
        raise ConfigError(key, raw, f"listener {lookup.listener_name} uses SASL: at "
                                    "least one SASL mechanism must be enabled")
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(key, raw, f"SASL mechanism {mechanism} is not supported by Samsa "
                                        f"(supported: {', '.join(SUPPORTED_MECHANISMS)})")
    return mechanisms


def _jaas(lookup: _Lookup, mechanism: str) -> LoginModule | None:
    key, raw = lookup.get(JAAS_KEY, mechanism)
    if raw is None:
        if mechanism == PLAIN:
            raise ConfigError(
                f"{LISTENER_PREFIX}{lookup.listener_name.lower()}.plain.{JAAS_KEY}", "(unset)",
                f"SASL/PLAIN on listener {lookup.listener_name} needs a PlainLoginModule JAAS "
                "configuration with its users (user_<name>=\"<password>\")")
        return None
    try:
        modules = parse_jaas_config(raw)
    except JaasError as error:
        raise ConfigError(key, HIDDEN, f"not a JAAS configuration: {error}") from None
    if len(modules) != 1:
        raise ConfigError(key, HIDDEN, f"must contain exactly one login module, not {len(modules)}")
    expected = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    if modules[0].class_name != expected:
        raise ConfigError(key, HIDDEN, f"the login module for {mechanism} must be {expected}, "
                                       f"not {modules[0].class_name}")
    return modules[0]


def _plain_users(lookup: _Lookup, module: LoginModule | None) -> dict[str, str]:
    assert module is not None
    users = {name[len("user_"):]: password for name, password in module.options.items()
             if name.startswith("user_") and len(name) > len("user_")}
    if not users:
        key, _ = lookup.get(JAAS_KEY, PLAIN)
        raise ConfigError(key, HIDDEN, "the PlainLoginModule defines no user_<name> option: "
                                       "nobody could authenticate")
    return users


def _reauth_ms(lookup: _Lookup, mechanism: str) -> int:
    key, raw = lookup.get("connections.max.reauth.ms", mechanism)
    return _int(key, raw or "0", 0)


def _int(key: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(key, raw, "not an integer") from None
    if value < minimum or value > 2**63 - 1:
        raise ConfigError(key, raw, f"must be at least {minimum}")
    return value
