"""Broker configuration: a Kafka-style properties file plus ``--override key=value``.

Every key has Kafka's name and Kafka's default (``KafkaConfig`` / ``ServerLogConfigs``), except
where Samsa documents its own (``listeners`` binds 127.0.0.1, ``log.dir`` is /tmp/samsa-logs,
``node.id`` is 1 as in Kafka's shipped server.properties, ``metrics.port`` is Samsa's).
``conf/server.properties`` lists every supported key.

The broker's ``log.*`` keys are the defaults of every topic's ``LogConfig`` (a topic's own
configs override them); they are parsed by ``LogConfig.from_properties`` so broker and topic
rules cannot drift. Precedence follows Kafka: ``log.retention.ms`` > ``.minutes`` > ``.hours``,
``log.roll.ms`` > ``log.roll.hours``, ``log.dirs`` > ``log.dir``, ``log.flush.interval.ms`` >
``log.flush.scheduler.interval.ms``.

A bad value raises ``ConfigError(key, value, reason)`` (one line); an unknown key is logged and
ignored, as Kafka does ("supplied but isn't a known config").

``BrokerConfig`` is an immutable value built once at start-up; nothing mutates it.
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker.group.values import GroupConfig
from broker.kraft_config import (
    KRaftSettings,
    effective_protocol_map,
    kraft_settings,
    parse_bootstrap_servers,
    parse_listener_names,
    parse_process_roles,
    parse_replica_selector_class,
    parse_security_protocol,
    parse_voters,
)
from broker.listener import Listener, endpoint_for
from broker.sasl.config import (
    DEFAULT_PROTOCOL_MAP,
    ListenerSecurity,
    is_security_key,
    listener_security,
    parse_protocol_map,
)
from broker.share.coordinator_config import ShareCoordinatorConfig
from broker.tls.config import client_context, tls_settings
from broker.transaction.coordinator import TransactionConfig
from replication.metadata.group_config import ShareGroupSettings
from replication.metadata.log import MetadataLogConfig
from storage.config import LONG_MAX, LogConfig
from storage.errors import ConfigError
from storage.verification import VERIFY_MODES, VERIFY_UNCLEAN

__all__ = [
    "BROKER_KEYS", "BrokerConfig", "ConfigError", "Listener", "endpoint_for", "parse_properties",
]

logger = logging.getLogger("samsa.broker.config")

INT_MAX = 2**31 - 1


def _integer(minimum: int, maximum: int = LONG_MAX) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, "not an integer") from None
        if not minimum <= value <= maximum:
            raise ConfigError(key, raw, f"must be between {minimum} and {maximum}")
        return value

    return parse


def _boolean(key: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(key, raw, "must be true or false")
    return lowered == "true"


def _verify_mode(key: str, raw: str) -> str:
    mode = raw.strip().lower()
    if mode not in VERIFY_MODES:
        raise ConfigError(key, raw, f"must be one of {', '.join(VERIFY_MODES)}")
    return mode


def _text(key: str, raw: str) -> str:
    return raw.strip()


def _listeners(key: str, raw: str) -> tuple[Listener, ...]:
    listeners: list[Listener] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, separator, address = item.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not separator or not colon or not port_text.isdigit():
            raise ConfigError(key, raw, f"{item!r} is not NAME://host:port")
        if not _LISTENER_NAME.fullmatch(name):
            raise ConfigError(key, raw, f"{name!r} is not a listener name (letters, digits, _)")
        port = int(port_text)
        if port > 65535:
            raise ConfigError(key, raw, f"port {port} is out of range")
        if any(listener.name == name.upper() for listener in listeners):
            raise ConfigError(key, raw, f"listener name {name.upper()} is used twice")
        listeners.append(Listener(name.upper(), host.strip("[]"), port))
    if not listeners:
        raise ConfigError(key, raw, "at least one listener is required")
    return tuple(listeners)


_LISTENER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _authorizer_class(key: str, raw: str) -> str:
    value = raw.strip()
    if value not in ("", STANDARD_AUTHORIZER):
        raise ConfigError(
            key, raw, f"the only authorizer Samsa has is {STANDARD_AUTHORIZER} (or empty: none)"
        )
    return value


@dataclass(frozen=True, slots=True)
class BrokerKey:
    """A broker-level key: its default (None = unset) and parser; ``topic_key`` when it is the
    broker-wide default of a topic config."""

    default: str | None
    parse: Callable[[str, str], object] = _text
    topic_key: str | None = None
    doc: str = ""


def _log(default: str | None, topic_key: str, doc: str = "") -> BrokerKey:
    return BrokerKey(default, _text, topic_key, doc)


_LONG = str(LONG_MAX)

BROKER_KEYS: dict[str, BrokerKey] = {
    "node.id": BrokerKey("1", _integer(0, INT_MAX)),
    "listeners": BrokerKey("PLAINTEXT://127.0.0.1:9092", _listeners),
    "advertised.listeners": BrokerKey(None, _listeners),
    "log.dirs": BrokerKey(None),
    "log.dir": BrokerKey("/tmp/samsa-logs"),
    "num.partitions": BrokerKey("1", _integer(1, INT_MAX)),
    "default.replication.factor": BrokerKey("1", _integer(1, 32767)),
    "auto.create.topics.enable": BrokerKey("true", _boolean),
    "socket.request.max.bytes": BrokerKey("104857600", _integer(1, INT_MAX)),
    "queued.max.requests": BrokerKey("500", _integer(1, INT_MAX)),
    "connections.max.idle.ms": BrokerKey("600000", _integer(-1)),
    "num.recovery.threads.per.data.dir": BrokerKey("2", _integer(1, INT_MAX)),
    # [Samsa] Kafka has no such key: it keeps every segment's .log open and needs ulimit -n above
    # the number of segments. Samsa caps its open segment files with an LRU so tens of thousands
    # of partitions run under a few thousand descriptors; -1 = half of RLIMIT_NOFILE.
    "log.segment.open.files.max": BrokerKey("-1", _integer(-1, INT_MAX)),
    # [Samsa] Kafka has no such key: it trusts every segment below the recovery point. Samsa
    # checks every batch's CRC-32C and header order at start-up (storage.verification) after an
    # unclean shutdown ("unclean"), at every start-up ("always") or never ("never", Kafka's way).
    "samsa.log.verify.on.startup": BrokerKey(VERIFY_UNCLEAN, _verify_mode),
    # [Samsa] Kafka has no such key: it loads every log before it serves. Above this many logs
    # Samsa opens its listeners once the internal topics' logs are loaded and loads the others
    # in the background, each partition served as its log loads (NOT_LEADER_OR_FOLLOWER before,
    # as for a partition being created); -1: never (Kafka's way).
    "samsa.log.background.load.above": BrokerKey("1000", _integer(-1, INT_MAX)),
    "log.retention.check.interval.ms": BrokerKey("300000", _integer(1)),
    "log.flush.scheduler.interval.ms": BrokerKey(_LONG, _integer(0)),
    "log.flush.offset.checkpoint.interval.ms": BrokerKey("60000", _integer(0, INT_MAX)),
    "log.flush.start.offset.checkpoint.interval.ms": BrokerKey("60000", _integer(0, INT_MAX)),
    "replica.high.watermark.checkpoint.interval.ms": BrokerKey("5000", _integer(0)),
    "log.cleaner.enable": BrokerKey("true", _boolean),
    "log.cleaner.backoff.ms": BrokerKey("15000", _integer(0)),
    "log.cleaner.dedupe.buffer.size": BrokerKey("134217728", _integer(1024 * 1024)),
    "offsets.topic.num.partitions": BrokerKey("50", _integer(1, INT_MAX)),
    "offsets.topic.segment.bytes": BrokerKey("104857600", _integer(1, INT_MAX)),
    "offsets.retention.minutes": BrokerKey("10080", _integer(1, INT_MAX)),
    "offsets.retention.check.interval.ms": BrokerKey("600000", _integer(1)),
    "offset.metadata.max.bytes": BrokerKey("4096", _integer(0, INT_MAX)),
    "group.min.session.timeout.ms": BrokerKey("6000", _integer(0, INT_MAX)),
    "group.max.session.timeout.ms": BrokerKey("1800000", _integer(0, INT_MAX)),
    "group.max.size": BrokerKey(str(INT_MAX), _integer(1, INT_MAX)),
    "group.initial.rebalance.delay.ms": BrokerKey("3000", _integer(0, INT_MAX)),
    # share groups (KIP-932): Kafka's broker defaults of the share.* group configs
    "group.share.session.timeout.ms": BrokerKey("45000", _integer(1, INT_MAX)),
    "group.share.heartbeat.interval.ms": BrokerKey("5000", _integer(1, INT_MAX)),
    "group.share.max.size": BrokerKey("200", _integer(1, 1000)),
    "group.share.record.lock.duration.ms": BrokerKey("30000", _integer(1000, 3600000)),
    "group.share.delivery.count.limit": BrokerKey("5", _integer(2, 10)),
    "group.share.partition.max.record.locks": BrokerKey("2000", _integer(100, 10000)),
    "group.share.max.share.sessions": BrokerKey("2000", _integer(1, INT_MAX)),
    "transaction.state.log.num.partitions": BrokerKey("50", _integer(1, INT_MAX)),
    "transaction.state.log.segment.bytes": BrokerKey("104857600", _integer(1, INT_MAX)),
    "transaction.max.timeout.ms": BrokerKey("900000", _integer(1, INT_MAX)),
    "transactional.id.expiration.ms": BrokerKey("604800000", _integer(1, INT_MAX)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": BrokerKey(
        "10000", _integer(1, INT_MAX)),
    "transaction.remove.expired.transaction.cleanup.interval.ms": BrokerKey(
        "3600000", _integer(1, INT_MAX)),
    "transaction.partition.verification.enable": BrokerKey("true", _boolean),
    # The share coordinator (KIP-932, Kafka's ShareCoordinatorConfig; broker.share).
    "share.coordinator.state.topic.num.partitions": BrokerKey("50", _integer(1, INT_MAX)),
    "share.coordinator.state.topic.replication.factor": BrokerKey("3", _integer(1, 32767)),
    "share.coordinator.state.topic.min.isr": BrokerKey("2", _integer(1, 32767)),
    "share.coordinator.state.topic.segment.bytes": BrokerKey("104857600", _integer(1, INT_MAX)),
    "share.coordinator.snapshot.update.records.per.snapshot": BrokerKey("500", _integer(0, 500)),
    "share.coordinator.write.timeout.ms": BrokerKey("5000", _integer(1, INT_MAX)),
    "metrics.port": BrokerKey("0", _integer(0, 65535)),
    # KRaft: roles, the controller quorum and its listeners (broker.kraft_config; Kafka's
    # KRaftConfigs, QuorumConfig, ReplicationConfigs). No process.roles = Samsa's single node.
    "process.roles": BrokerKey("", parse_process_roles),
    "controller.quorum.voters": BrokerKey("", parse_voters),
    "controller.quorum.bootstrap.servers": BrokerKey("", parse_bootstrap_servers),
    "controller.listener.names": BrokerKey(None, parse_listener_names),
    "inter.broker.listener.name": BrokerKey(None),
    "security.inter.broker.protocol": BrokerKey("PLAINTEXT", parse_security_protocol),
    "broker.rack": BrokerKey(None),
    "controller.quorum.election.timeout.ms": BrokerKey("1000", _integer(1, INT_MAX)),
    "controller.quorum.fetch.timeout.ms": BrokerKey("2000", _integer(1, INT_MAX)),
    "controller.quorum.election.backoff.max.ms": BrokerKey("1000", _integer(0, INT_MAX)),
    "controller.quorum.request.timeout.ms": BrokerKey("2000", _integer(1, INT_MAX)),
    "controller.quorum.retry.backoff.ms": BrokerKey("20", _integer(0, INT_MAX)),
    "controller.quorum.append.linger.ms": BrokerKey("25", _integer(0, INT_MAX)),
    "initial.broker.registration.timeout.ms": BrokerKey("60000", _integer(1, INT_MAX)),
    "broker.heartbeat.interval.ms": BrokerKey("2000", _integer(1, INT_MAX)),
    "broker.session.timeout.ms": BrokerKey("9000", _integer(1, INT_MAX)),
    "auto.leader.rebalance.enable": BrokerKey("true", _boolean),
    "leader.imbalance.check.interval.seconds": BrokerKey("300", _integer(1)),
    "leader.imbalance.per.broker.percentage": BrokerKey("10", _integer(0, 100)),
    "unclean.leader.election.interval.ms": BrokerKey("300000", _integer(1)),
    "offsets.topic.replication.factor": BrokerKey("3", _integer(1, 32767)),
    "transaction.state.log.replication.factor": BrokerKey("3", _integer(1, 32767)),
    "transaction.state.log.min.isr": BrokerKey("2", _integer(1, INT_MAX)),
    "replica.lag.time.max.ms": BrokerKey("30000", _integer(0)),
    "replica.socket.timeout.ms": BrokerKey("30000", _integer(0, INT_MAX)),
    "replica.fetch.max.bytes": BrokerKey("1048576", _integer(0, INT_MAX)),
    "replica.fetch.wait.max.ms": BrokerKey("500", _integer(0, INT_MAX)),
    "replica.fetch.min.bytes": BrokerKey("1", _integer(1, INT_MAX)),
    "replica.fetch.backoff.ms": BrokerKey("1000", _integer(0, INT_MAX)),
    "replica.fetch.response.max.bytes": BrokerKey("10485760", _integer(0, INT_MAX)),
    "num.replica.fetchers": BrokerKey("1", _integer(1, INT_MAX)),
    # KIP-392: empty (Kafka's null) = consumers read the leader only.
    "replica.selector.class": BrokerKey("", parse_replica_selector_class),
    # The metadata log and its snapshots (Kafka's KRaftConfigs; replication.metadata.log).
    "metadata.log.max.record.bytes.between.snapshots": BrokerKey("20971520", _integer(1)),
    "metadata.log.max.snapshot.interval.ms": BrokerKey("3600000", _integer(0)),
    "metadata.max.retention.bytes": BrokerKey("104857600", _integer(-LONG_MAX - 1)),
    "metadata.max.retention.ms": BrokerKey("604800000", _integer(-LONG_MAX - 1)),
    "metadata.log.segment.bytes": BrokerKey("1073741824", _integer(12, INT_MAX)),
    "metadata.log.segment.min.bytes": BrokerKey("8388608", _integer(12, INT_MAX)),  # testing only
    "metadata.log.segment.ms": BrokerKey("604800000", _integer(1)),
    # Listener security (broker.sasl.config; the listener.name.* and sasl.jaas.config keys are
    # read there and kept out of this table, so DescribeConfigs never shows a password).
    "listener.security.protocol.map": BrokerKey(DEFAULT_PROTOCOL_MAP, parse_protocol_map),
    "sasl.enabled.mechanisms": BrokerKey("GSSAPI"),
    "connections.max.reauth.ms": BrokerKey("0", _integer(0)),
    "sasl.server.max.receive.size": BrokerKey("524288", _integer(1, INT_MAX)),
    # Authorization (broker.auth): "" = none; Kafka's StandardAuthorizer is the one accepted.
    "authorizer.class.name": BrokerKey("", _authorizer_class),
    "allow.everyone.if.no.acl.found": BrokerKey("false", _boolean),
    "super.users": BrokerKey(""),
    # Broker-wide defaults of topic configs (Kafka's ServerLogConfigs -> TopicConfig).
    "message.max.bytes": _log("1048588", "max.message.bytes"),
    "log.segment.bytes": _log("1073741824", "segment.bytes"),
    "log.roll.ms": _log(None, "segment.ms"),
    "log.roll.hours": BrokerKey("168", _integer(1, INT_MAX)),
    "log.roll.jitter.ms": _log(None, "segment.jitter.ms"),
    "log.roll.jitter.hours": BrokerKey("0", _integer(0, INT_MAX)),
    "log.retention.ms": _log(None, "retention.ms"),
    "log.retention.minutes": BrokerKey(None, _integer(-1, INT_MAX)),
    "log.retention.hours": BrokerKey("168", _integer(-1, INT_MAX)),
    "log.retention.bytes": _log("-1", "retention.bytes"),
    "log.cleanup.policy": _log("delete", "cleanup.policy"),
    "log.cleaner.delete.retention.ms": _log("86400000", "delete.retention.ms"),
    "log.cleaner.min.cleanable.ratio": _log("0.5", "min.cleanable.dirty.ratio"),
    "log.cleaner.min.compaction.lag.ms": _log("0", "min.compaction.lag.ms"),
    "log.cleaner.max.compaction.lag.ms": _log(_LONG, "max.compaction.lag.ms"),
    "log.flush.interval.messages": _log(_LONG, "flush.messages"),
    "log.flush.interval.ms": _log(None, "flush.ms"),
    "log.index.size.max.bytes": _log("10485760", "segment.index.bytes"),
    "log.index.interval.bytes": _log("4096", "index.interval.bytes"),
    "log.message.timestamp.type": _log("CreateTime", "message.timestamp.type"),
    "log.message.timestamp.before.max.ms": _log(_LONG, "message.timestamp.before.max.ms"),
    "log.message.timestamp.after.max.ms": _log("3600000", "message.timestamp.after.max.ms"),
    "log.segment.delete.delay.ms": _log("60000", "file.delete.delay.ms"),
    "log.preallocate": _log("false", "preallocate"),
    "compression.type": _log("producer", "compression.type"),
    "compression.gzip.level": _log("-1", "compression.gzip.level"),
    "compression.lz4.level": _log("9", "compression.lz4.level"),
    "compression.zstd.level": _log("3", "compression.zstd.level"),
    "min.insync.replicas": _log("1", "min.insync.replicas"),
    "unclean.leader.election.enable": _log("false", "unclean.leader.election.enable"),
    "log.local.retention.ms": _log("-2", "local.retention.ms"),
    "log.local.retention.bytes": _log("-2", "local.retention.bytes"),
}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The parsed, validated configuration. ``properties`` keeps the effective raw strings."""

    node_id: int
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    log_dirs: tuple[Path, ...]
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    socket_request_max_bytes: int
    queued_max_requests: int
    connections_max_idle_ms: int
    num_recovery_threads_per_data_dir: int
    log_segment_open_files_max: int
    samsa_log_verify_on_startup: str
    samsa_log_background_load_above: int
    log_retention_check_interval_ms: int
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    log_cleaner_enable: bool
    log_cleaner_backoff_ms: int
    log_cleaner_dedupe_buffer_size: int
    offsets_topic_num_partitions: int
    metrics_port: int
    group_config: GroupConfig
    log_config: LogConfig
    properties: Mapping[str, str] = field(default_factory=dict)
    explicit_keys: frozenset[str] = frozenset()  # the keys the file or overrides set (static)
    offsets_topic_segment_bytes: int = 104857600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    transaction_config: TransactionConfig = field(default_factory=TransactionConfig)
    share_coordinator_config: ShareCoordinatorConfig = field(default_factory=ShareCoordinatorConfig)
    listener_security: Mapping[str, ListenerSecurity] = field(default_factory=dict)  # by name
    authorizer_class_name: str = ""
    allow_everyone_if_no_acl_found: bool = False
    super_users: str = ""  # principals separated by ';'
    metadata_log_config: MetadataLogConfig = field(default_factory=MetadataLogConfig)
    kraft: KRaftSettings = field(default_factory=KRaftSettings)  # roles, quorum, controller
    # This node as a client of other nodes' TLS listeners (inter-broker, controller), by
    # listener name: built from that listener's ssl.* keys (broker.tls.config).
    node_ssl_contexts: Mapping[str, ssl.SSLContext] = field(default_factory=dict, compare=False)

    @property
    def share_group_defaults(self) -> ShareGroupSettings:
        """The ``group.share.*`` defaults a share group's own configs override
        (``replication.metadata.group_config.share_settings``)."""
        values = self.properties
        return ShareGroupSettings(
            session_timeout_ms=int(values["group.share.session.timeout.ms"]),
            heartbeat_interval_ms=int(values["group.share.heartbeat.interval.ms"]),
            record_lock_duration_ms=int(values["group.share.record.lock.duration.ms"]),
            delivery_count_limit=int(values["group.share.delivery.count.limit"]),
            partition_max_record_locks=int(values["group.share.partition.max.record.locks"]),
            max_size=int(values["group.share.max.size"]),
        )

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> BrokerConfig:
        """Validate ``properties`` (Kafka-named strings) over the defaults."""
        for key in properties:
            if key not in BROKER_KEYS and not is_security_key(key):
                logger.warning("the configuration '%s' was supplied but isn't a known config", key)
        raw = {k: v for k, spec in BROKER_KEYS.items() if (v := spec.default) is not None}
        raw.update({k: str(v) for k, v in properties.items() if k in BROKER_KEYS})
        values = {key: BROKER_KEYS[key].parse(key, text) for key, text in raw.items()}
        explicit = frozenset(key for key in properties if key in BROKER_KEYS)
        protocols = _protocol_map(values, explicit)
        listeners, security = _secured_listeners(values, raw, properties, protocols)
        raw.update({k: str(v) for k, v in properties.items() if is_security_key(k)})
        advertised = _advertised(values, listeners)
        kraft = kraft_settings(values, raw, explicit, listeners=listeners, advertised=advertised,
                               protocols=protocols)
        return cls(
            node_id=_int(values, "node.id"),
            listeners=listeners,
            advertised_listeners=tuple(  # Metadata never shows the controller listeners
                a for a in advertised if not kraft.is_controller_listener(a.name)),
            kraft=kraft,
            listener_security=security,
            log_dirs=_log_dirs(raw),
            num_partitions=_int(values, "num.partitions"),
            default_replication_factor=_int(values, "default.replication.factor"),
            auto_create_topics_enable=bool(values["auto.create.topics.enable"]),
            socket_request_max_bytes=_int(values, "socket.request.max.bytes"),
            queued_max_requests=_int(values, "queued.max.requests"),
            connections_max_idle_ms=_int(values, "connections.max.idle.ms"),
            num_recovery_threads_per_data_dir=_int(values, "num.recovery.threads.per.data.dir"),
            log_segment_open_files_max=_int(values, "log.segment.open.files.max"),
            samsa_log_verify_on_startup=str(values["samsa.log.verify.on.startup"]),
            samsa_log_background_load_above=_int(values, "samsa.log.background.load.above"),
            log_retention_check_interval_ms=_int(values, "log.retention.check.interval.ms"),
            log_flush_scheduler_interval_ms=_int(values, "log.flush.scheduler.interval.ms"),
            log_flush_offset_checkpoint_interval_ms=_int(
                values, "log.flush.offset.checkpoint.interval.ms"
            ),
            replica_high_watermark_checkpoint_interval_ms=_int(
                values, "replica.high.watermark.checkpoint.interval.ms"
            ),
            log_cleaner_enable=bool(values["log.cleaner.enable"]),
            log_cleaner_backoff_ms=_int(values, "log.cleaner.backoff.ms"),
            log_cleaner_dedupe_buffer_size=_int(values, "log.cleaner.dedupe.buffer.size"),
            offsets_topic_num_partitions=_int(values, "offsets.topic.num.partitions"),
            metrics_port=_int(values, "metrics.port"),
            group_config=GroupConfig(
                group_min_session_timeout_ms=_int(values, "group.min.session.timeout.ms"),
                group_max_session_timeout_ms=_int(values, "group.max.session.timeout.ms"),
                group_max_size=_int(values, "group.max.size"),
                group_initial_rebalance_delay_ms=_int(values, "group.initial.rebalance.delay.ms"),
            ),
            log_config=_log_config(raw, values),
            properties=raw,
            explicit_keys=explicit,
            offsets_topic_segment_bytes=_int(values, "offsets.topic.segment.bytes"),
            offsets_retention_minutes=_int(values, "offsets.retention.minutes"),
            offsets_retention_check_interval_ms=_int(values, "offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=_int(values, "offset.metadata.max.bytes"),
            transaction_config=_transaction_config(values),
            share_coordinator_config=_share_coordinator_config(values),
            authorizer_class_name=str(values["authorizer.class.name"]),
            allow_everyone_if_no_acl_found=bool(values["allow.everyone.if.no.acl.found"]),
            super_users=str(values["super.users"]),
            metadata_log_config=_metadata_log_config(values),
            node_ssl_contexts=_node_ssl_contexts(kraft, protocols, raw),
        )

    @classmethod
    def load(cls, path: Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Read the properties file (if any), apply ``key=value`` overrides, validate."""
        properties = parse_properties(path.read_text(encoding="utf-8")) if path else {}
        for override in overrides:
            key, separator, value = override.partition("=")
            if not separator or not key.strip():
                raise ConfigError("--override", override, "expected key=value")
            properties[key.strip()] = value.strip()
        return cls.from_properties(properties)


def _metadata_log_config(values: Mapping[str, object]) -> MetadataLogConfig:
    segment_bytes = _int(values, "metadata.log.segment.bytes")
    minimum = _int(values, "metadata.log.segment.min.bytes")
    if segment_bytes < minimum:  # Kafka's KafkaMetadataLog check, with its message
        raise ConfigError("metadata.log.segment.bytes", segment_bytes,
                          f"Cannot set metadata.log.segment.bytes below {minimum}")
    return MetadataLogConfig(
        max_record_bytes_between_snapshots=_int(
            values, "metadata.log.max.record.bytes.between.snapshots"),
        max_snapshot_interval_ms=_int(values, "metadata.log.max.snapshot.interval.ms"),
        retention_max_bytes=_int(values, "metadata.max.retention.bytes"),
        retention_ms=_int(values, "metadata.max.retention.ms"),
        segment_bytes=segment_bytes,
        segment_ms=_int(values, "metadata.log.segment.ms"),
    )


def _transaction_config(values: Mapping[str, object]) -> TransactionConfig:
    return TransactionConfig(
        transaction_max_timeout_ms=_int(values, "transaction.max.timeout.ms"),
        transactional_id_expiration_ms=_int(values, "transactional.id.expiration.ms"),
        transaction_abort_timed_out_transaction_cleanup_interval_ms=_int(
            values, "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        transaction_remove_expired_transaction_cleanup_interval_ms=_int(
            values, "transaction.remove.expired.transaction.cleanup.interval.ms"),
        transaction_state_log_num_partitions=_int(values, "transaction.state.log.num.partitions"),
        transaction_state_log_segment_bytes=_int(values, "transaction.state.log.segment.bytes"),
        transaction_partition_verification_enable=bool(
            values["transaction.partition.verification.enable"]),
    )


def _share_coordinator_config(values: Mapping[str, object]) -> ShareCoordinatorConfig:
    return ShareCoordinatorConfig(
        state_topic_num_partitions=_int(values, "share.coordinator.state.topic.num.partitions"),
        state_topic_replication_factor=_int(values, "share.coordinator.state.topic.replication.factor"),
        state_topic_min_isr=_int(values, "share.coordinator.state.topic.min.isr"),
        state_topic_segment_bytes=_int(values, "share.coordinator.state.topic.segment.bytes"),
        snapshot_update_records_per_snapshot=_int(
            values, "share.coordinator.snapshot.update.records.per.snapshot"),
        write_timeout_ms=_int(values, "share.coordinator.write.timeout.ms"),
    )


def _int(values: Mapping[str, object], key: str) -> int:
    value = values[key]
    assert isinstance(value, int)
    return value


def _protocol_map(values: Mapping[str, object], explicit: frozenset[str]) -> dict[str, str]:
    """``listener.security.protocol.map`` with KRaft's default controller mappings."""
    protocols, listeners = values["listener.security.protocol.map"], values["listeners"]
    roles, names = values["process.roles"], values.get("controller.listener.names") or ()
    assert isinstance(protocols, dict) and isinstance(listeners, tuple)
    assert isinstance(roles, frozenset) and isinstance(names, tuple)
    return effective_protocol_map(
        protocols, process_roles=roles, controller_listener_names=names,
        listener_names=[listener.name for listener in listeners],
        map_is_explicit="listener.security.protocol.map" in explicit)


def _secured_listeners(
    values: Mapping[str, object], raw: Mapping[str, str], properties: Mapping[str, str],
    protocols: Mapping[str, str],
) -> tuple[tuple[Listener, ...], dict[str, ListenerSecurity]]:
    """The listeners with their security protocols (``listener.security.protocol.map``)."""
    listeners = values["listeners"]
    assert isinstance(listeners, tuple)
    secured, security = [], {}
    for listener in listeners:
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError("listener.security.protocol.map", raw["listener.security.protocol.map"],
                              f"no security protocol is defined for listener {listener.name}")
        security[listener.name] = listener_security(listener.name, protocol, properties, raw)
        secured.append(Listener(listener.name, listener.host, listener.port, protocol))
    return tuple(secured), security


def _node_ssl_contexts(kraft: KRaftSettings, protocols: Mapping[str, str],
                       raw: Mapping[str, str]) -> dict[str, ssl.SSLContext]:
    """Client contexts for the listeners this node connects to: the inter-broker listener and
    the first controller listener (in KRaft mode), when they are SSL."""
    if not kraft.process_roles:
        return {}
    if kraft.inter_broker_security_protocol == "SASL_SSL":
        raise ConfigError("inter.broker.listener.name", kraft.inter_broker_listener_name,
                          "an inter-broker listener with security protocol SASL_SSL is not "
                          "supported: Samsa's node client has no SASL (use an SSL listener)")
    names = {kraft.inter_broker_listener_name, *kraft.controller_listener_names[:1]}
    return {name: client_context(tls_settings(name, "SSL", raw, server=False))
            for name in sorted(names) if protocols.get(name) == "SSL"}


def _advertised(
    values: Mapping[str, object], listeners: tuple[Listener, ...]
) -> tuple[Listener, ...]:
    """Kafka's rule: advertised listeners name listeners (default: the listeners themselves)."""
    advertised = values.get("advertised.listeners")
    if advertised is None:
        return listeners
    assert isinstance(advertised, tuple)
    protocols = {listener.name: listener.security_protocol for listener in listeners}
    for listener in advertised:
        if listener.name not in protocols:
            raise ConfigError("advertised.listeners", ",".join(map(str, advertised)),
                              f"listener {listener.name} is not one of the listeners "
                              f"({', '.join(protocols)})")
    return tuple(Listener(a.name, a.host, a.port, protocols[a.name]) for a in advertised)


def _log_dirs(raw: Mapping[str, str]) -> tuple[Path, ...]:
    key = "log.dirs" if raw.get("log.dirs") else "log.dir"
    dirs = tuple(Path(part.strip()) for part in raw[key].split(",") if part.strip())
    if not dirs:
        raise ConfigError(key, raw[key], "at least one directory is required")
    return dirs


def _log_config(raw: Mapping[str, str], values: Mapping[str, object]) -> LogConfig:
    """The broker-wide topic defaults, with Kafka's ms > minutes > hours precedence."""
    topic_properties: dict[str, str] = {}
    origin: dict[str, str] = {}
    for key, spec in BROKER_KEYS.items():
        if spec.topic_key is not None and key in raw:
            topic_properties[spec.topic_key] = raw[key]
            origin[spec.topic_key] = key
    hour_ms = 3_600_000
    derived = {
        "segment.ms": ("log.roll.hours", hour_ms),
        "segment.jitter.ms": ("log.roll.jitter.hours", hour_ms),
    }
    for topic_key, (key, scale) in derived.items():
        if topic_key not in topic_properties:
            topic_properties[topic_key] = str(_int(values, key) * scale)
            origin[topic_key] = key
    if "retention.ms" not in topic_properties:
        key = "log.retention.minutes" if "log.retention.minutes" in values else "log.retention.hours"
        amount = _int(values, key)
        scale = 60_000 if key.endswith("minutes") else hour_ms
        topic_properties["retention.ms"] = str(-1 if amount < 0 else amount * scale)
        origin["retention.ms"] = key
    if "flush.ms" not in topic_properties:
        topic_properties["flush.ms"] = raw["log.flush.scheduler.interval.ms"]
        origin["flush.ms"] = "log.flush.scheduler.interval.ms"
    try:
        return LogConfig.from_properties(topic_properties)
    except ConfigError as error:
        broker_key = origin.get(error.key, error.key)
        raise ConfigError(broker_key, error.value, error.reason) from None


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` as Kafka's files use it: ``key=value`` or ``key: value`` lines,
    ``#``/``!`` comments, blank lines, and ``\\`` line continuations."""
    properties: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        logical, pending = pending + stripped, ""
        key, value = _split_property(logical)
        properties[key] = value
    if pending:
        key, value = _split_property(pending)
        properties[key] = value
    return properties


def _split_property(line: str) -> tuple[str, str]:
    positions = [p for p in (line.find("="), line.find(":")) if p >= 0]
    if not positions:
        return line.strip(), ""
    cut = min(positions)
    return line[:cut].strip(), line[cut + 1 :].strip()
