"""Dynamic broker configs and the entries DescribeConfigs returns: Kafka's ``DynamicBrokerConfig``
and ``ConfigHelper`` for Samsa's keys.

Dynamic broker configs are ConfigRecords on the BROKER resource: named "" for the cluster-wide
default (source DYNAMIC_DEFAULT_BROKER_CONFIG) or by node id (DYNAMIC_BROKER_CONFIG). Precedence,
Kafka's: this node's dynamic > cluster-wide dynamic > static (server.properties, --override;
STATIC_BROKER_CONFIG) > Kafka's default (DEFAULT_CONFIG). A topic's own configs
(DYNAMIC_TOPIC_CONFIG) come before all of them.

What may change at run time is Kafka's ``DynamicLogConfig.ReconfigurableConfigs``: the broker-wide
defaults of topic configs under their first synonym (``log.retention.ms``, ``log.cleanup.policy``,
``message.max.bytes``...; not ``log.retention.hours``). Another key Samsa knows ->
INVALID_REQUEST "Cannot update these configs dynamically"; a bad value -> INVALID_REQUEST with the
reason (Kafka's broker-side check, KAFKA-13609: INVALID_REQUEST, not INVALID_CONFIG); a key Samsa
does not know is kept as a custom config, as Kafka's ``customPropsAllowed`` (and described as
sensitive, its type being unknown). Samsa-only keys (``metrics.port``) are read-only too.

Pure functions over the static ``BrokerConfig`` and the metadata image, but ``alter_resource``
(the common path of AlterConfigs and IncrementalAlterConfigs: check the request and the broker
configs, then propose the changes to the controller, which plans the ConfigRecords); the
broker's event loop calls them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from broker.commits import refusal, when_committed
from broker.config import BROKER_KEYS, BrokerConfig
from broker.sasl.config import is_security_key
from protocol.errors import InvalidRequestError, KafkaError
from replication.controller.proposal import Proposal
from replication.metadata.config_control import Changes, current_configs
from replication.metadata.group_config import GROUP_CONFIG_TYPES, group_config_values
from replication.metadata.image import (
    BROKER_RESOURCE_TYPE,
    GROUP_RESOURCE_TYPE,
    TOPIC_RESOURCE_TYPE,
    MetadataImage,
)
from storage.config import LogConfig
from storage.errors import ConfigError

if TYPE_CHECKING:
    from broker.broker import Broker

__all__ = [
    "BROKER_LIST_KEYS",
    "DYNAMIC_BROKER_KEYS",
    "TOPIC_LIST_KEYS",
    "ConfigEntry",
    "ConfigSource",
    "Synonym",
    "alter_each",
    "alter_resource",
    "broker_defaults",
    "check_alter_request",
    "describe_broker",
    "describe_group",
    "describe_topic",
    "dynamic_log_config",
    "effective_broker_properties",
    "validate_broker_configs",
]

logger = logging.getLogger("samsa.broker.config_admin")


class ConfigSource:
    """DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


# DescribeConfigsResponse.ConfigType ids.
UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 4, 5, 6, 7

TOPIC_CONFIG_TYPES: dict[str, int] = {
    "segment.bytes": INT, "segment.ms": LONG, "segment.jitter.ms": LONG,
    "segment.index.bytes": INT, "index.interval.bytes": INT, "retention.ms": LONG,
    "retention.bytes": LONG, "cleanup.policy": LIST, "delete.retention.ms": LONG,
    "min.cleanable.dirty.ratio": DOUBLE, "min.compaction.lag.ms": LONG,
    "max.compaction.lag.ms": LONG, "flush.messages": LONG, "flush.ms": LONG,
    "max.message.bytes": INT, "message.timestamp.type": STRING,
    "message.timestamp.before.max.ms": LONG, "message.timestamp.after.max.ms": LONG,
    "file.delete.delay.ms": LONG, "preallocate": BOOLEAN,
    "compression.type": STRING, "compression.gzip.level": INT, "compression.lz4.level": INT,
    "compression.zstd.level": INT, "min.insync.replicas": INT,
    "unclean.leader.election.enable": BOOLEAN, "leader.replication.throttled.replicas": LIST,
    "follower.replication.throttled.replicas": LIST, "remote.storage.enable": BOOLEAN,
    "local.retention.ms": LONG, "local.retention.bytes": LONG, "remote.log.copy.disable": BOOLEAN,
    "remote.log.delete.on.disable": BOOLEAN,
}

_BROKER_ONLY_TYPES: dict[str, int] = {
    "node.id": INT, "listeners": LIST, "advertised.listeners": LIST, "log.dirs": LIST,
    "log.dir": LIST, "num.partitions": INT, "default.replication.factor": INT,
    "auto.create.topics.enable": BOOLEAN, "socket.request.max.bytes": INT,
    "queued.max.requests": INT, "connections.max.idle.ms": LONG,
    "num.recovery.threads.per.data.dir": INT, "log.retention.check.interval.ms": LONG,
    "log.segment.open.files.max": INT, "samsa.log.verify.on.startup": STRING,
    "samsa.log.background.load.above": INT,
    "log.flush.scheduler.interval.ms": LONG, "log.flush.offset.checkpoint.interval.ms": INT,
    "log.flush.start.offset.checkpoint.interval.ms": INT, "log.cleaner.enable": BOOLEAN,
    "log.cleaner.backoff.ms": LONG, "log.cleaner.dedupe.buffer.size": LONG,
    "offsets.topic.num.partitions": INT, "metrics.port": INT, "log.roll.hours": INT,
    "log.roll.jitter.hours": INT, "log.retention.minutes": INT, "log.retention.hours": INT,
    "metadata.log.max.record.bytes.between.snapshots": LONG,
    "metadata.log.max.snapshot.interval.ms": LONG, "metadata.max.retention.bytes": LONG,
    "metadata.max.retention.ms": LONG, "metadata.log.segment.bytes": INT,
    "metadata.log.segment.min.bytes": INT, "metadata.log.segment.ms": LONG,
    # As Apache Kafka 4.3.1's DescribeConfigs types them (tests/integration/kafka/
    # test_differential.py compares).
    "authorizer.class.name": STRING, "auto.leader.rebalance.enable": BOOLEAN,
    "broker.heartbeat.interval.ms": INT, "broker.rack": STRING,
    "broker.session.timeout.ms": INT, "connections.max.reauth.ms": LONG,
    "controller.listener.names": LIST, "controller.quorum.append.linger.ms": INT,
    "controller.quorum.bootstrap.servers": LIST, "controller.quorum.election.backoff.max.ms": INT,
    "controller.quorum.election.timeout.ms": INT, "controller.quorum.fetch.timeout.ms": INT,
    "controller.quorum.request.timeout.ms": INT, "controller.quorum.retry.backoff.ms": INT,
    "controller.quorum.voters": LIST, "group.initial.rebalance.delay.ms": INT,
    "group.max.session.timeout.ms": INT, "group.max.size": INT,
    "group.min.session.timeout.ms": INT, "initial.broker.registration.timeout.ms": INT,
    "inter.broker.listener.name": STRING, "leader.imbalance.check.interval.seconds": LONG,
    "listener.security.protocol.map": STRING, "num.replica.fetchers": INT,
    "offset.metadata.max.bytes": INT, "offsets.retention.check.interval.ms": LONG,
    "offsets.retention.minutes": INT, "offsets.topic.replication.factor": SHORT,
    "offsets.topic.segment.bytes": INT, "process.roles": LIST, "replica.fetch.backoff.ms": INT,
    "replica.fetch.max.bytes": INT, "replica.fetch.min.bytes": INT,
    "replica.fetch.response.max.bytes": INT, "replica.fetch.wait.max.ms": INT,
    "replica.high.watermark.checkpoint.interval.ms": LONG, "replica.lag.time.max.ms": LONG,
    "replica.selector.class": STRING, "replica.socket.timeout.ms": INT,
    "sasl.enabled.mechanisms": LIST, "sasl.server.max.receive.size": INT,
    "security.inter.broker.protocol": STRING,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": INT,
    "transaction.max.timeout.ms": INT, "transaction.partition.verification.enable": BOOLEAN,
    "transaction.remove.expired.transaction.cleanup.interval.ms": INT,
    "transaction.state.log.min.isr": INT, "transaction.state.log.num.partitions": INT,
    "transaction.state.log.replication.factor": SHORT,
    "transaction.state.log.segment.bytes": INT, "transactional.id.expiration.ms": INT,
    # Kafka's ShareCoordinatorConfig types
    "share.coordinator.state.topic.num.partitions": INT,
    "share.coordinator.state.topic.replication.factor": SHORT,
    "share.coordinator.state.topic.min.isr": SHORT,
    "share.coordinator.state.topic.segment.bytes": INT,
    "share.coordinator.snapshot.update.records.per.snapshot": INT,
    "share.coordinator.write.timeout.ms": INT,
    "group.share.session.timeout.ms": INT, "group.share.heartbeat.interval.ms": INT,
    "group.share.max.size": INT, "group.share.record.lock.duration.ms": INT,
    "group.share.delivery.count.limit": INT, "group.share.partition.max.record.locks": INT,
    "group.share.max.share.sessions": INT,
}

# A topic config -> its broker-wide default's first synonym (Kafka's TOPIC_CONFIG_SYNONYMS).
TOPIC_TO_BROKER_KEY: dict[str, str] = {
    spec.topic_key: key for key, spec in BROKER_KEYS.items() if spec.topic_key is not None
}
DYNAMIC_BROKER_KEYS = frozenset(TOPIC_TO_BROKER_KEY.values())
BROKER_LIST_KEYS = frozenset({"log.cleanup.policy"})
TOPIC_LIST_KEYS = frozenset({
    "cleanup.policy", "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
})

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: a key's names, in order of precedence.
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    config_type: int
    synonyms: tuple[Synonym, ...]


@dataclass(frozen=True, slots=True)
class _Layers:
    """A broker config's values by source, highest precedence first."""

    node: Mapping[str, str]
    cluster: Mapping[str, str]
    static: Mapping[str, str]
    default: Mapping[str, str]

    def by_source(self) -> tuple[tuple[Mapping[str, str], int], ...]:
        return (
            (self.node, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            (self.default, ConfigSource.DEFAULT_CONFIG),
        )


def broker_defaults() -> dict[str, str]:
    return {key: spec.default for key, spec in BROKER_KEYS.items() if spec.default is not None}


def _layers(static: BrokerConfig, image: MetadataImage, node_id: int) -> _Layers:
    return _Layers(
        node=image.broker_configs.get(str(node_id), {}),
        cluster=image.broker_configs.get("", {}),
        static={k: v for k, v in static.properties.items() if k in static.explicit_keys},
        default=broker_defaults(),
    )


def effective_broker_properties(
    static: BrokerConfig, node: Mapping[str, str], cluster: Mapping[str, str]
) -> dict[str, str]:
    """The broker's properties with the dynamic layers over the static ones."""
    return {**static.properties, **cluster, **node}


def _to_validate(
    static: BrokerConfig, node: Mapping[str, str], cluster: Mapping[str, str]
) -> dict[str, str]:
    """What ``BrokerConfig.from_properties`` re-checks: the static keys the file or overrides
    set, not the defaults filled in for the others (a default passed as if set trips Kafka's
    either-or rules: ``inter.broker.listener.name`` beside a defaulted
    ``security.inter.broker.protocol`` is "Only one of ... should be set"), the dynamic layers
    over them."""
    explicit = {k: v for k, v in static.properties.items() if k in static.explicit_keys}
    return _known({**explicit, **cluster, **node})


def _known(properties: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in properties.items()
            if key in BROKER_KEYS or is_security_key(key)}


def dynamic_log_config(static: BrokerConfig, image: MetadataImage, node_id: int) -> LogConfig:
    """The topic defaults with the dynamic broker configs applied (the static ones if they fail:
    Kafka, too, skips invalid dynamic configs at start-up)."""
    node = image.broker_configs.get(str(node_id), {})
    cluster = image.broker_configs.get("", {})
    if not node and not cluster:
        return static.log_config
    try:
        return BrokerConfig.from_properties(_to_validate(static, node, cluster)).log_config
    except ConfigError as error:
        logger.error("ignoring the dynamic broker configs: %s", error)
        return static.log_config


def validate_broker_configs(
    static: BrokerConfig,
    image: MetadataImage,
    node_id: int,
    resource_name: str,
    configs: Mapping[str, str],
) -> None:
    """Kafka's dynamic broker config check of the resulting configs of one BROKER resource."""
    fixed = sorted(key for key in configs if key in BROKER_KEYS and key not in DYNAMIC_BROKER_KEYS)
    if fixed:
        raise InvalidRequestError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    node = dict(image.broker_configs.get(str(node_id), {}))
    cluster = dict(image.broker_configs.get("", {}))
    if resource_name:
        node = dict(configs)
    else:
        cluster = dict(configs)
    try:
        BrokerConfig.from_properties(_to_validate(static, node, cluster))
    except ConfigError as error:
        raise InvalidRequestError(str(error)) from None


def _synonym_names(name: str) -> tuple[str, ...]:
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def _synonyms(name: str, layers: _Layers, *, sensitive: bool) -> list[Synonym]:
    """Kafka's ``configSynonyms``: by source, then by name; those before ``name`` dropped."""
    found = [
        Synonym(synonym, None if sensitive else values[synonym], source)
        for values, source in layers.by_source()
        for synonym in _synonym_names(name)
        if synonym in values
    ]
    for index, synonym in enumerate(found):
        if synonym.name == name:
            return found[index:]
    return []


def describe_topic(
    static: BrokerConfig,
    image: MetadataImage,
    node_id: int,
    topic: str,
    *,
    default_config: LogConfig,
) -> list[ConfigEntry]:
    """Every topic config with its effective value (the topic must exist)."""
    topic_properties = image.configs_of(topic)
    values = LogConfig.from_properties(topic_properties, base=default_config).to_properties()
    layers = _layers(static, image, node_id)
    entries = []
    for name, value in values.items():
        broker_key = TOPIC_TO_BROKER_KEY.get(name)
        synonyms = [] if broker_key is None else _synonyms(broker_key, layers, sensitive=False)
        if name in topic_properties:
            synonyms.insert(0, Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        entries.append(ConfigEntry(
            name=name, value=value,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=False, is_sensitive=False,
            config_type=TOPIC_CONFIG_TYPES.get(name, UNKNOWN), synonyms=tuple(synonyms),
        ))
    return entries


def describe_group(image: MetadataImage, group_id: str) -> list[ConfigEntry]:
    """Kafka's ``createGroupConfigEntry``: every group config, GROUP_CONFIG if the group's own."""
    if not group_id:
        raise InvalidRequestError("Group name must not be empty")
    own = image.group_configs.get(group_id, {})
    entries = []
    for name, value in group_config_values(own).items():
        source = ConfigSource.GROUP_CONFIG if name in own else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(
            name=name, value=value, source=source, read_only=False, is_sensitive=False,
            config_type=GROUP_CONFIG_TYPES.get(name, INT), synonyms=(Synonym(name, value, source),),
        ))
    return entries


def describe_broker(
    static: BrokerConfig, image: MetadataImage, node_id: int, resource_name: str
) -> list[ConfigEntry]:
    """This node's configs (name = its id), or the cluster-wide dynamic ones (name = "")."""
    layers = _layers(static, image, node_id)
    if not resource_name:
        values: Mapping[str, str | None] = dict(layers.cluster)
    else:
        effective = effective_broker_properties(static, layers.node, layers.cluster)
        values = {key: effective.get(key) for key in (*BROKER_KEYS, *effective)}
    entries = []
    for name, value in values.items():
        config_type = _BROKER_ONLY_TYPES.get(name, _broker_topic_type(name))
        sensitive = name not in BROKER_KEYS  # Kafka's maybeSensitive: a custom key's type is unknown
        synonyms = _synonyms(name, layers, sensitive=sensitive)
        if not resource_name:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        entries.append(ConfigEntry(
            name=name, value=None if sensitive else value,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=name not in DYNAMIC_BROKER_KEYS,
            is_sensitive=sensitive, config_type=config_type, synonyms=tuple(synonyms),
        ))
    return entries


def _broker_topic_type(name: str) -> int:
    spec = BROKER_KEYS.get(name)
    if spec is None or spec.topic_key is None:
        return UNKNOWN
    return TOPIC_CONFIG_TYPES.get(spec.topic_key, UNKNOWN)


def check_alter_request(names: list[str], null_values: list[str]) -> None:
    """Kafka's preprocessing of one resource: no key twice, no null value where one is needed."""
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    if null_values:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(null_values))


def alter_resource(
    broker: Broker,
    resource_type: int,
    name: str,
    changes_of: Callable[[dict[str, str]], Changes],
    *,
    validate_only: bool,
) -> Proposal[None]:
    """Propose a change of one resource's dynamic configs to the controller;
    ``changes_of(current)`` gives the new values. Raises a refusal found before proposing."""
    image = broker.controller.image
    if resource_type not in (TOPIC_RESOURCE_TYPE, BROKER_RESOURCE_TYPE, GROUP_RESOURCE_TYPE):
        raise InvalidRequestError(f"Unknown resource type {resource_type}")
    current = current_configs(image, resource_type, name)
    changes = changes_of(current)
    if resource_type == BROKER_RESOURCE_TYPE:
        if name:
            _check_node_id(name, broker.node_id)
        resulting = {k: v for k, v in {**current, **changes}.items() if v is not None}
        validate_broker_configs(broker.config, image, broker.node_id, name, resulting)
    return broker.controller.alter_configs(resource_type, name, changes, validate_only=validate_only)


def _check_node_id(name: str, node_id: int) -> None:
    try:
        requested = int(name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    if requested != node_id:
        raise InvalidRequestError(f"Unexpected broker id, expected {node_id}, but received {name}")


class ConfigResource(Protocol):
    resource_type: int
    resource_name: str


Resource = TypeVar("Resource", bound=ConfigResource)
Result = TypeVar("Result")
Response = TypeVar("Response")


def alter_each(
    resources: Sequence[Resource],
    alter: Callable[[Resource], Proposal[None]],
    result: Callable[[Resource, KafkaError | None], Result],
    response: Callable[[list[Result]], Response],
) -> Response | Awaitable[Response]:
    """AlterConfigs / IncrementalAlterConfigs: ``alter`` each resource named once (one named
    twice is INVALID_REQUEST), then answer with each one's ``result`` once all are committed."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    outcomes = [
        (resource, Proposal[None].refused(InvalidRequestError("Each resource must appear at most once."))
         if counts[(resource.resource_type, resource.resource_name)] > 1 else alter(resource))
        for resource in resources
    ]
    return when_committed([proposal for _, proposal in outcomes], lambda: response([
        result(resource, refusal(proposal, f"altering configs of {resource!r}"))
        for resource, proposal in outcomes
    ]))
