"""The API registry: each handler module under ``broker.apis`` registers itself here.

A module declares ``SPEC = register(ApiSpec(api_key=..., min_version=..., max_version=...,
handle=..., error_response=...))``. ``ApiVersions`` is computed from this registry, and the
connection looks the handler up here: there is no central dispatcher.

Handler contract:
- ``handle(context, request)`` returns a ``Message`` (the response), a ``ZeroCopyResponse``
  (Fetch), ``NO_RESPONSE`` (Produce acks=0), ``CLOSE_CONNECTION`` (acks=0 with an error: Kafka
  closes the connection so the producer notices), or an awaitable of one of those (a delayed
  operation). Whatever a handler changes, it changes before its first ``await``, so requests
  of one connection take effect in the order they arrived.
- ``error_response(request, error)`` builds the response that reports ``error`` for every part
  of the request (Kafka's ``AbstractRequest.getErrorResponse``); used for an unsupported
  version and for a handler that raised.

Listener types (Kafka's ``ApiMessageType.ListenerType``): every API is served on the listener
types its request schema names (``protocol.messages.API_LISTENERS``, "zkBroker" dropped) unless
its ``ApiSpec`` says otherwise. A listener named in ``controller.listener.names`` is a
"controller" listener, any other a "broker" listener (``listener_type``, the one place that
decides). ``served_on`` is the registry seen from one listener type: what its connections
dispatch and what its ApiVersions lists; a request for any other API closes the connection.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from protocol.codec import Message
from protocol.errors import KafkaError
from protocol.messages import API_LISTENERS
from protocol.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.config import BrokerConfig
    from storage.segment import FetchSlice

__all__ = [
    "API_MODULES",
    "BROKER_LISTENER",
    "CLOSE_CONNECTION",
    "CONTROLLER_LISTENER",
    "NO_RESPONSE",
    "ApiSpec",
    "HandlerResult",
    "Outcome",
    "RequestContext",
    "ZeroCopyResponse",
    "listener_type",
    "load_apis",
    "register",
    "registry",
    "served_on",
]

# Kafka's listener types (ApiMessageType.ListenerType), as the schemas spell them.
BROKER_LISTENER = "broker"
CONTROLLER_LISTENER = "controller"
LISTENER_TYPES = (BROKER_LISTENER, CONTROLLER_LISTENER)


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_RESPONSE = _Marker("NO_RESPONSE")
CLOSE_CONNECTION = _Marker("CLOSE_CONNECTION")

ResponsePart = Union[bytes, bytearray, "FetchSlice"]


class ZeroCopyResponse:
    """A response whose frame is built by the handler as bytes and file slices, in order."""

    def frame_parts(
        self, correlation_id: int, header_version: int, api_version: int
    ) -> list[ResponsePart]:
        raise NotImplementedError


Outcome = Message | ZeroCopyResponse | _Marker
HandlerResult = Outcome | Awaitable[Outcome]


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    api_version: int
    broker: Broker
    connection_id: str
    # Who sent the request (Kafka's KafkaPrincipal as "Type:name") and from where: PLAINTEXT
    # connections are "User:ANONYMOUS"; an authenticated (SASL) connection carries its user.
    principal: str = "User:ANONYMOUS"
    client_host: str = ""
    listener_name: str = ""  # the listener the connection came in on ("" in unit tests)

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handle: Callable[[RequestContext, Any], HandlerResult]
    error_response: Callable[[Any, KafkaError], Message]
    name: str = ""
    # What ApiVersions lists as the minimum, when it is not ``min_version``: Kafka 4 lists
    # Produce from v0 while serving v3+ (KAFKA-18659), because librdkafka before 2.10 turns
    # compression off unless Produce v0 is listed. Versions below ``min_version`` still get
    # UNSUPPORTED_VERSION.
    advertised_min_version: int | None = None
    # The listener types this API is served on; None: those its request schema names.
    listeners: tuple[str, ...] | None = None

    @property
    def listener_types(self) -> frozenset[str]:
        named = API_LISTENERS.get(self.api_key, (BROKER_LISTENER,))
        return frozenset(name for name in (self.listeners or named) if name in LISTENER_TYPES)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def advertised_range(self) -> tuple[int, int]:
        low = self.min_version if self.advertised_min_version is None else self.advertised_min_version
        return low, self.max_version


_REGISTRY: dict[int, ApiSpec] = {}

# The handler modules, imported once by ``load_apis``.
API_MODULES = (
    "broker_registration",
    "broker_heartbeat",
    "allocate_producer_ids",
    "vote",
    "begin_quorum_epoch",
    "end_quorum_epoch",
    "fetch_snapshot",
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "create_topics",
    "delete_topics",
    "init_producer_id",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "create_partitions",
    "delete_records",
    "describe_cluster",
    "describe_quorum",
    "describe_log_dirs",
    "alter_replica_log_dirs",
    "describe_topic_partitions",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "alter_partition",  # controller listeners only (KIP-497)
    "describe_log_segments",  # Samsa's own API (key 10000)
    "conditional_produce",  # Samsa's own API (key 10001)
    "read_key",  # Samsa's own API (key 10002)
    "describe_share_partitions",  # Samsa's own API (key 10003)
    "offset_for_leader_epoch",
    "offset_commit",
    "offset_fetch",
    "offset_delete",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "share_group_heartbeat",
    "share_group_describe",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "share_fetch",
    "share_acknowledge",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "write_txn_markers",
    "describe_transactions",
    "describe_producers",
    "list_transactions",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "create_acls",
    "describe_acls",
    "delete_acls",
    # the share coordinator's broker-to-broker APIs (KIP-932)
    "initialize_share_group_state",
    "read_share_group_state",
    "write_share_group_state",
    "delete_share_group_state",
    "read_share_group_state_summary",
    "envelope",  # controller listeners only (KIP-590)
)


def register(spec: ApiSpec) -> ApiSpec:
    existing = _REGISTRY.get(spec.api_key)
    if existing is not None and existing is not spec:
        raise ValueError(f"API key {spec.api_key} registered twice")
    _REGISTRY[spec.api_key] = spec
    return spec


def load_apis() -> dict[int, ApiSpec]:
    """Import every handler module (each registers itself); the registry, by API key."""
    for module in API_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return registry()


def registry() -> dict[int, ApiSpec]:
    return dict(sorted(_REGISTRY.items()))


def served_on(apis: dict[int, ApiSpec], listener: str) -> dict[int, ApiSpec]:
    """The APIs of ``apis`` a listener of type ``listener`` serves, by API key."""
    return {key: spec for key, spec in apis.items() if listener in spec.listener_types}


def listener_type(config: BrokerConfig, listener_name: str) -> str:
    """"controller" for a listener named in ``controller.listener.names``, else "broker"."""
    return CONTROLLER_LISTENER if config.kraft.is_controller_listener(listener_name) \
        else BROKER_LISTENER
