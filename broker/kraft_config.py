"""KRaft settings: the node's roles, the controller quorum, and which listeners the controller uses.

Kafka's keys and defaults (``KRaftConfigs``, ``QuorumConfig``, ``ReplicationConfigs``) and
Kafka's cross-key rules (``KafkaConfig.validateValues``, as of the KIP-853 listener rules):

- ``process.roles`` absent or empty: Samsa's single node, which is broker and controller in one
  process with a local controller and no quorum (today's behaviour, unchanged). Then
  ``controller.listener.names`` must be empty and nothing else here is checked, except an
  explicitly set ``inter.broker.listener.name``.
- ``process.roles`` set (``broker``, ``controller`` or both): ``node.id`` must be given, and
  ``controller.quorum.voters`` (``id@host:port,...``) or ``controller.quorum.bootstrap.servers``
  must be non-empty. A controller's ``node.id`` is one of the voters and its controller
  listener is in ``listeners``; a broker-only node has a controller listener name that is not
  in ``listeners`` and its ``node.id`` is not a voter; a controller-only node listens on
  controller listeners only.
- The controller listeners are left out of what Metadata advertises (Kafka's
  ``effectiveAdvertisedBrokerListeners``); the controller's advertised endpoint is its entry in
  ``advertised.listeners`` or else its listener (``effectiveAdvertisedControllerListeners``).
- ``listener.security.protocol.map`` left at its default in KRaft mode maps each controller
  listener name to PLAINTEXT, unless a listener or controller listener name is SSL, SASL_SSL or
  SASL_PLAINTEXT (Kafka's ``effectiveListenerSecurityProtocolMap``).

A broken rule raises ``ConfigError(key, value, reason)`` with Kafka's message as the reason.
Everything here is an immutable value built once at start-up by ``BrokerConfig``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from broker.listener import Listener
from replication.replica_selector import RACK_AWARE_REPLICA_SELECTOR, REPLICA_SELECTOR_CLASSES
from storage.errors import ConfigError

__all__ = [
    "BROKER_ROLE",
    "CONTROLLER_ROLE",
    "BootstrapServer",
    "KRaftSettings",
    "QuorumSettings",
    "QuorumVoter",
    "ReplicaFetchSettings",
    "effective_protocol_map",
    "kraft_settings",
    "parse_bootstrap_servers",
    "parse_listener_names",
    "parse_process_roles",
    "parse_security_protocol",
    "parse_voters",
]

logger = logging.getLogger("samsa.broker.config")

BROKER_ROLE = "broker"
CONTROLLER_ROLE = "controller"
VOTERS = "controller.quorum.voters"
BOOTSTRAP_SERVERS = "controller.quorum.bootstrap.servers"
PROCESS_ROLES = "process.roles"
CONTROLLER_LISTENER_NAMES = "controller.listener.names"
LISTENERS = "listeners"
ADVERTISED_LISTENERS = "advertised.listeners"
PROTOCOL_MAP = "listener.security.protocol.map"
INTER_BROKER_LISTENER_NAME = "inter.broker.listener.name"
INTER_BROKER_SECURITY_PROTOCOL = "security.inter.broker.protocol"
NON_ROUTABLE_HOST = "0.0.0.0"
_SSL_OR_SASL = frozenset({"SSL", "SASL_SSL", "SASL_PLAINTEXT"})
_HOST = re.compile(r"[0-9A-Za-z\-._%:]+")  # Kafka's Utils.validHostPattern / getHost


@dataclass(frozen=True, slots=True)
class QuorumVoter:
    """One ``{id}@{host}:{port}`` entry of ``controller.quorum.voters``."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BootstrapServer:
    """One ``{host}:{port}`` entry of ``controller.quorum.bootstrap.servers``."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class QuorumSettings:
    """What the Raft client needs (Kafka's ``QuorumConfig``); every timeout in milliseconds."""

    voters: tuple[QuorumVoter, ...] = ()
    bootstrap_servers: tuple[BootstrapServer, ...] = ()
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    append_linger_ms: int = 25

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(voter.node_id for voter in self.voters)

    def voter(self, node_id: int) -> QuorumVoter | None:
        return next((voter for voter in self.voters if voter.node_id == node_id), None)


@dataclass(frozen=True, slots=True)
class ReplicaFetchSettings:
    """A follower's fetcher and the leader's ISR timing (Kafka's ``ReplicationConfigs``)."""

    replica_lag_time_max_ms: int = 30000
    replica_socket_timeout_ms: int = 30000
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1000
    replica_fetch_response_max_bytes: int = 10485760
    num_replica_fetchers: int = 1
    replica_selector_class: str = ""  # KIP-392; empty: consumers get no preferred read replica


@dataclass(frozen=True, slots=True)
class KRaftSettings:
    """This node's place in a cluster. ``process_roles`` empty = Samsa's single node."""

    process_roles: frozenset[str] = frozenset()
    node_id: int = 1
    controller_listener_names: tuple[str, ...] = ()
    controller_listeners: tuple[Listener, ...] = ()  # this node's, in ``listeners`` (bound)
    advertised_controller_listeners: tuple[Listener, ...] = ()  # what other voters are told
    inter_broker_listener_name: str = "PLAINTEXT"
    inter_broker_security_protocol: str = "PLAINTEXT"
    broker_rack: str | None = None
    quorum: QuorumSettings = field(default_factory=QuorumSettings)
    initial_broker_registration_timeout_ms: int = 60000
    broker_heartbeat_interval_ms: int = 2000
    broker_session_timeout_ms: int = 9000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    unclean_leader_election_interval_ms: int = 300000
    offsets_topic_replication_factor: int = 3
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    replica: ReplicaFetchSettings = field(default_factory=ReplicaFetchSettings)

    @property
    def is_kraft(self) -> bool:
        """``process.roles`` is set: the node is part of a quorum-backed cluster."""
        return bool(self.process_roles)

    @property
    def is_broker(self) -> bool:
        return not self.process_roles or BROKER_ROLE in self.process_roles

    @property
    def is_controller(self) -> bool:
        return not self.process_roles or CONTROLLER_ROLE in self.process_roles

    @property
    def is_combined(self) -> bool:
        return self.process_roles == {BROKER_ROLE, CONTROLLER_ROLE}

    def is_controller_listener(self, listener_name: str) -> bool:
        """Whether a connection on ``listener_name`` (``RequestContext.listener_name``) came in
        on a controller listener."""
        return listener_name.upper() in self.controller_listener_names

    def controller_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where the controller ``node_id`` listens: its voter entry, or for this node its
        advertised controller listener; None for a node that is not a known controller."""
        voter = self.quorum.voter(node_id)
        if voter is not None:
            return voter.host, voter.port
        if node_id == self.node_id and self.advertised_controller_listeners:
            first = self.advertised_controller_listeners[0]
            return first.host, first.port
        return None


# -- parsers (key, raw text) -> value ------------------------------------------------------------

def parse_process_roles(key: str, raw: str) -> frozenset[str]:
    roles = [item.strip() for item in raw.split(",") if item.strip()]
    for role in roles:
        if role not in (BROKER_ROLE, CONTROLLER_ROLE):
            raise ConfigError(key, raw, f"Unknown process role '{role}' "
                                        "(only 'broker' and 'controller' are allowed roles)")
    if len(set(roles)) != len(roles):
        raise ConfigError(key, raw, f"Duplicate role names found in `{key}`: {roles}")
    return frozenset(roles)


def parse_replica_selector_class(key: str, raw: str) -> str:
    """KIP-392's ``replica.selector.class``: empty (no selector) or Kafka's rack-aware one."""
    value = raw.strip()
    if value not in REPLICA_SELECTOR_CLASSES:
        raise ConfigError(key, raw, "the only replica selector Samsa has is "
                                    f"{RACK_AWARE_REPLICA_SELECTOR} (or empty: none)")
    return value


def parse_security_protocol(key: str, raw: str) -> str:
    protocol = raw.strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(key, raw, f"Invalid security protocol `{raw}` defined in {key}")
    return protocol


def parse_listener_names(key: str, raw: str) -> tuple[str, ...]:
    """A comma-separated list of listener names, normalised to upper case as listeners are."""
    names = tuple(item.strip().upper() for item in raw.split(",") if item.strip())
    if len(set(names)) != len(names):
        raise ConfigError(key, raw, "a listener name is listed twice")
    return names


def _host_port(text: str) -> tuple[str | None, int | None]:
    """``host:port`` or ``[ipv6]:port`` -> (host, port); None for the part that is not valid."""
    host, colon, port_text = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    valid_host = host if colon and _HOST.fullmatch(host) else None
    port = int(port_text) if colon and port_text.isdigit() and int(port_text) <= 65535 else None
    return valid_host, port


def parse_voters(key: str, raw: str) -> tuple[QuorumVoter, ...]:
    """``{id}@{host}:{port},...`` with Kafka's messages (``QuorumConfig.parseVoterConnections``)."""
    form = "Each entry should be in the form `{id}@{host}:{port}`."
    voters: list[QuorumVoter] = []
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
        id_text, at, address = entry.partition("@")
        if not at or "@" in address:
            raise ConfigError(key, raw, f"Invalid configuration value for {key}. {form}")
        if not id_text.strip().isdigit():
            raise ConfigError(key, raw, f"Failed to parse voter ID as an integer from {id_text}")
        host, port = _host_port(address)
        if host is None:
            raise ConfigError(key, raw, f"Failed to parse host name from entry {entry} for the "
                                        f"configuration {key}. {form}")
        if port is None:
            raise ConfigError(key, raw, f"Failed to parse host port from entry {entry} for the "
                                        f"configuration {key}. {form}")
        if host == NON_ROUTABLE_HOST:
            raise ConfigError(key, raw, f"Host string ({host}) is not routeable")
        voter = QuorumVoter(int(id_text), host, port)
        if any(existing.node_id == voter.node_id for existing in voters):
            raise ConfigError(key, raw, f"voter id {voter.node_id} is listed twice")
        voters.append(voter)
    return tuple(voters)


def parse_bootstrap_servers(key: str, raw: str) -> tuple[BootstrapServer, ...]:
    """``{host}:{port},...`` (``QuorumConfig.parseBootstrapServers``)."""
    servers: list[BootstrapServer] = []
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
        host, port = _host_port(entry)
        form = 'Each entry should be in the form "{host}:{port}"'
        if host is None:
            raise ConfigError(key, raw, f"Failed to parse host name from {entry} for the "
                                        f"configuration {key}. {form}")
        if port is None:
            raise ConfigError(key, raw, f"Failed to parse host port from {entry} for the "
                                        f"configuration {key}. {form}")
        servers.append(BootstrapServer(host, port))
    return tuple(servers)


# -- the effective protocol map ----------------------------------------------------------------

def effective_protocol_map(
    protocols: Mapping[str, str],
    *,
    process_roles: frozenset[str],
    controller_listener_names: tuple[str, ...],
    listener_names: Collection[str],
    map_is_explicit: bool,
) -> dict[str, str]:
    """Kafka's ``effectiveListenerSecurityProtocolMap``: in KRaft mode with the default map,
    controller listener names map to PLAINTEXT unless SSL or SASL is in use anywhere."""
    if not process_roles or map_is_explicit:
        return dict(protocols)
    names = (*controller_listener_names, *listener_names)
    if any(name in _SSL_OR_SASL for name in names):
        return dict(protocols)
    return {**protocols, **{name: "PLAINTEXT" for name in controller_listener_names
                            if name != "PLAINTEXT"}}


# -- cross-key rules ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Inputs:
    """What the cross-key rules look at: parsed values, raw text, and the listeners."""

    values: Mapping[str, object]
    raw: Mapping[str, str]
    explicit: Collection[str]
    listeners: tuple[Listener, ...]
    advertised: tuple[Listener, ...]  # advertised.listeners, or the listeners when unset
    protocols: Mapping[str, str]  # the effective listener.security.protocol.map

    @property
    def roles(self) -> frozenset[str]:
        roles = self.values[PROCESS_ROLES]
        assert isinstance(roles, frozenset)
        return roles

    @property
    def controller_names(self) -> tuple[str, ...]:
        names = self.values.get(CONTROLLER_LISTENER_NAMES) or ()
        assert isinstance(names, tuple)
        return names

    @property
    def voters(self) -> tuple[QuorumVoter, ...]:
        voters = self.values[VOTERS]
        assert isinstance(voters, tuple)
        return voters

    @property
    def node_id(self) -> int:
        node_id = self.values["node.id"]
        assert isinstance(node_id, int)
        return node_id

    def number(self, key: str) -> int:
        value = self.values[key]
        assert isinstance(value, int)
        return value

    def fail(self, key: str, reason: str) -> ConfigError:
        value = self.raw.get(key, "") if key in self.explicit else self.raw.get(key) or ""
        return ConfigError(key, value, reason)


def kraft_settings(
    values: Mapping[str, object],
    raw: Mapping[str, str],
    explicit: Collection[str],
    *,
    listeners: tuple[Listener, ...],
    advertised: tuple[Listener, ...],
    protocols: Mapping[str, str],
) -> KRaftSettings:
    """Check Kafka's cross-key rules and build the settings (``values`` are parsed by
    ``BROKER_KEYS``; ``explicit`` are the keys the file or overrides set)."""
    inputs = _Inputs(values, raw, explicit, listeners, advertised, protocols)
    if inputs.roles:
        _check_kraft(inputs)
    elif inputs.controller_names:
        raise inputs.fail(CONTROLLER_LISTENER_NAMES, f"{CONTROLLER_LISTENER_NAMES} must be empty "
                          f"when not running in KRaft mode: {list(inputs.controller_names)}")
    inter_broker_name, inter_broker_protocol = _inter_broker_listener(inputs)
    # Samsa's single node checks the inter-broker listener only when it is set: it has no
    # inter-broker traffic, and a SASL-only single node must keep starting.
    if inputs.roles:
        is_checked = BROKER_ROLE in inputs.roles
    else:
        is_checked = bool({INTER_BROKER_LISTENER_NAME, INTER_BROKER_SECURITY_PROTOCOL} & set(explicit))
    if is_checked:
        _check_broker_listeners(inputs, inter_broker_name)
    return _build(inputs, inter_broker_name, inter_broker_protocol)


def _check_kraft(inputs: _Inputs) -> None:
    if "node.id" not in inputs.explicit:  # Samsa's single node defaults it to 1; KRaft does not
        raise ConfigError("node.id", "", "Missing configuration `node.id` which is required when "
                                     "`process.roles` is defined (i.e. when running in KRaft mode).")
    if not inputs.voters and not inputs.values[BOOTSTRAP_SERVERS]:
        raise inputs.fail(VOTERS, f"If using {PROCESS_ROLES}, either {BOOTSTRAP_SERVERS} must "
                                  f"contain the set of bootstrap controllers or {VOTERS} must "
                                  "contain a parseable set of controllers.")
    if inputs.roles == {BROKER_ROLE}:
        _check_broker_only(inputs)
    else:
        _check_controller(inputs)
    for listener in _advertised_controller_listeners(inputs):
        if listener.host == NON_ROUTABLE_HOST:
            raise inputs.fail(ADVERTISED_LISTENERS, f"{ADVERTISED_LISTENERS} cannot use the "
                              "nonroutable meta-address 0.0.0.0. Use a routable IP address.")


def _check_broker_only(inputs: _Inputs) -> None:
    voter_ids = {voter.node_id for voter in inputs.voters}
    if inputs.node_id in voter_ids:
        raise inputs.fail(VOTERS, f"If {PROCESS_ROLES} contains just the 'broker' role, the node "
                                  f"id {inputs.node_id} must not be included in the set of voters "
                                  f"{VOTERS}={_id_set(voter_ids)}")
    if not inputs.controller_names:
        raise inputs.fail(CONTROLLER_LISTENER_NAMES, f"{CONTROLLER_LISTENER_NAMES} must contain at "
                          "least one value when running KRaft with just the broker role")
    if any(listener.name in inputs.controller_names for listener in inputs.listeners):
        raise inputs.fail(CONTROLLER_LISTENER_NAMES, f"{CONTROLLER_LISTENER_NAMES} must not "
                          f"contain a value appearing in the '{LISTENERS}' configuration when "
                          "running KRaft with just the broker role")
    for name in inputs.controller_names:
        protocol = inputs.protocols.get(name)
        if protocol is None:
            raise inputs.fail(PROTOCOL_MAP, f"Controller listener with name {name} defined in "
                              f"{CONTROLLER_LISTENER_NAMES} not found in {PROTOCOL_MAP}  (an "
                              "explicit security mapping for each controller listener is "
                              f"required if {PROTOCOL_MAP} is non-empty, or if there are security "
                              "protocols other than PLAINTEXT in use)")
        if protocol == "SASL_SSL":  # SSL is fine: the node client speaks TLS, not SASL
            raise inputs.fail(PROTOCOL_MAP, f"controller listener {name}: security protocol "
                              f"{protocol} is not supported, Samsa's node client has no SASL")
    if len(inputs.controller_names) > 1:
        logger.warning("%s has multiple entries; only the first will be used since %s=broker: %s",
                       CONTROLLER_LISTENER_NAMES, PROCESS_ROLES, list(inputs.controller_names))


def _check_controller(inputs: _Inputs) -> None:
    """The rules for the controller-only and the combined roles."""
    controller_listeners = [lis for lis in inputs.listeners if lis.name in inputs.controller_names]
    if inputs.roles == {CONTROLLER_ROLE} and len(controller_listeners) != len(inputs.listeners):
        raise inputs.fail(LISTENERS, f"The {LISTENERS} config must only contain KRaft controller "
                          f"listeners from {CONTROLLER_LISTENER_NAMES} when {PROCESS_ROLES}=controller")
    voter_ids = {voter.node_id for voter in inputs.voters}
    if voter_ids and inputs.node_id not in voter_ids:
        raise inputs.fail(VOTERS, f"If {PROCESS_ROLES} contains the 'controller' role, the node "
                                  f"id {inputs.node_id} must be included in the set of voters "
                                  f"{VOTERS}={_id_set(voter_ids)}")
    if not _advertised_controller_listeners(inputs):
        raise inputs.fail(CONTROLLER_LISTENER_NAMES, f"{CONTROLLER_LISTENER_NAMES} must contain at "
                          f"least one value appearing in the '{LISTENERS}' configuration when "
                          "running the KRaft controller role")
    listener_names = {listener.name for listener in inputs.listeners}
    if not set(inputs.controller_names) <= listener_names:
        raise inputs.fail(CONTROLLER_LISTENER_NAMES, f"{CONTROLLER_LISTENER_NAMES} must only "
                          f"contain values appearing in the '{LISTENERS}' configuration when "
                          "running the KRaft controller role")


def _check_broker_listeners(inputs: _Inputs, inter_broker_name: str) -> None:
    """Rules for every broker (Samsa's single node only when inter.broker.listener.name is set)."""
    broker_names = [lis.name for lis in inputs.advertised if lis.name not in inputs.controller_names]
    if not broker_names:
        hint = f" Perhaps all listeners appear in {CONTROLLER_LISTENER_NAMES}?" if (
            BROKER_ROLE in inputs.roles) else ""
        raise inputs.fail(LISTENERS, f"There must be at least one broker advertised listener.{hint}")
    if inter_broker_name not in broker_names:
        key = INTER_BROKER_LISTENER_NAME if INTER_BROKER_LISTENER_NAME in inputs.explicit else (
            INTER_BROKER_SECURITY_PROTOCOL)
        raise inputs.fail(key, f"{INTER_BROKER_LISTENER_NAME} must be a listener name defined in "
                               f"{ADVERTISED_LISTENERS}. The valid options based on currently "
                               f"configured listeners are {','.join(broker_names)}")
    if inputs.roles and any(listener.host == NON_ROUTABLE_HOST for listener in inputs.advertised):
        raise inputs.fail(ADVERTISED_LISTENERS, f"{ADVERTISED_LISTENERS} cannot use the "
                          "nonroutable meta-address 0.0.0.0. Use a routable IP address.")


def _inter_broker_listener(inputs: _Inputs) -> tuple[str, str]:
    """Kafka's ``getInterBrokerListenerNameAndSecurityProtocol``."""
    if INTER_BROKER_LISTENER_NAME not in inputs.explicit:
        protocol = str(inputs.values[INTER_BROKER_SECURITY_PROTOCOL])
        return protocol, protocol
    if INTER_BROKER_SECURITY_PROTOCOL in inputs.explicit:
        raise inputs.fail(INTER_BROKER_LISTENER_NAME, f"Only one of {INTER_BROKER_LISTENER_NAME} "
                                                      f"and {INTER_BROKER_SECURITY_PROTOCOL} should be set.")
    name = str(inputs.values[INTER_BROKER_LISTENER_NAME]).strip().upper()
    if name not in inputs.protocols:
        raise inputs.fail(INTER_BROKER_LISTENER_NAME, f"Listener with name {name} defined in "
                          f"{INTER_BROKER_LISTENER_NAME} not found in {PROTOCOL_MAP}.")
    return name, inputs.protocols[name]


def _advertised_controller_listeners(inputs: _Inputs) -> tuple[Listener, ...]:
    """Kafka's ``effectiveAdvertisedControllerListeners``: per controller listener name, its
    advertised endpoint, else its listener."""
    found: list[Listener] = []
    for name in inputs.controller_names:
        endpoint = next((lis for lis in inputs.advertised if lis.name == name), None) or next(
            (lis for lis in inputs.listeners if lis.name == name), None)
        if endpoint is not None:
            found.append(endpoint)
    return tuple(found)


def _id_set(ids: Collection[int]) -> str:
    return "Set(" + ", ".join(map(str, sorted(ids))) + ")"


def _build(inputs: _Inputs, inter_broker_name: str, inter_broker_protocol: str) -> KRaftSettings:
    number = inputs.number
    bootstrap = inputs.values[BOOTSTRAP_SERVERS]
    assert isinstance(bootstrap, tuple)
    rack = inputs.values.get("broker.rack")
    return KRaftSettings(
        process_roles=inputs.roles,
        node_id=inputs.node_id,
        controller_listener_names=inputs.controller_names,
        controller_listeners=tuple(
            lis for lis in inputs.listeners if lis.name in inputs.controller_names),
        advertised_controller_listeners=_advertised_controller_listeners(inputs),
        inter_broker_listener_name=inter_broker_name,
        inter_broker_security_protocol=inter_broker_protocol,
        broker_rack=str(rack) if rack else None,
        quorum=QuorumSettings(
            voters=inputs.voters,
            bootstrap_servers=bootstrap,
            election_timeout_ms=number("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=number("controller.quorum.fetch.timeout.ms"),
            election_backoff_max_ms=number("controller.quorum.election.backoff.max.ms"),
            request_timeout_ms=number("controller.quorum.request.timeout.ms"),
            retry_backoff_ms=number("controller.quorum.retry.backoff.ms"),
            append_linger_ms=number("controller.quorum.append.linger.ms"),
        ),
        initial_broker_registration_timeout_ms=number("initial.broker.registration.timeout.ms"),
        broker_heartbeat_interval_ms=number("broker.heartbeat.interval.ms"),
        broker_session_timeout_ms=number("broker.session.timeout.ms"),
        auto_leader_rebalance_enable=bool(inputs.values["auto.leader.rebalance.enable"]),
        leader_imbalance_check_interval_seconds=number("leader.imbalance.check.interval.seconds"),
        leader_imbalance_per_broker_percentage=number("leader.imbalance.per.broker.percentage"),
        unclean_leader_election_interval_ms=number("unclean.leader.election.interval.ms"),
        offsets_topic_replication_factor=number("offsets.topic.replication.factor"),
        transaction_state_log_replication_factor=number(
            "transaction.state.log.replication.factor"),
        transaction_state_log_min_isr=number("transaction.state.log.min.isr"),
        replica=_replica_fetch_settings(inputs),
    )


def _replica_fetch_settings(inputs: _Inputs) -> ReplicaFetchSettings:
    """Kafka's two replica timing rules (``validateValues``)."""
    number = inputs.number
    settings = ReplicaFetchSettings(
        replica_lag_time_max_ms=number("replica.lag.time.max.ms"),
        replica_socket_timeout_ms=number("replica.socket.timeout.ms"),
        replica_fetch_max_bytes=number("replica.fetch.max.bytes"),
        replica_fetch_wait_max_ms=number("replica.fetch.wait.max.ms"),
        replica_fetch_min_bytes=number("replica.fetch.min.bytes"),
        replica_fetch_backoff_ms=number("replica.fetch.backoff.ms"),
        replica_fetch_response_max_bytes=number("replica.fetch.response.max.bytes"),
        num_replica_fetchers=number("num.replica.fetchers"),
        replica_selector_class=str(inputs.values["replica.selector.class"]),
    )
    if settings.replica_fetch_wait_max_ms > settings.replica_socket_timeout_ms:
        raise inputs.fail("replica.fetch.wait.max.ms", "replica.socket.timeout.ms should always be "
                          "at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts")
    if settings.replica_fetch_wait_max_ms > settings.replica_lag_time_max_ms:
        raise inputs.fail("replica.fetch.wait.max.ms", "replica.fetch.wait.max.ms should always be "
                          "less than or equal to replica.lag.time.max.ms to prevent frequent "
                          "changes in ISR")
    return settings
