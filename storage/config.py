"""Per-log configuration: Kafka's topic-level config keys, with Kafka's defaults.

``LogConfig`` is an immutable value; a topic's config change builds a new one and hands it to the
log (``Log.config = ...``). ``LogConfig.from_properties`` parses Kafka-named string properties and
rejects bad values with the key, the value and the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from storage.errors import ConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = (CLEANUP_POLICY_DELETE,)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    # Kafka 4.0 (KIP-937) rejects records more than an hour in the future by default.
    message_timestamp_after_max_ms: int = 3600 * 1000
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
    # Kept, validated and described like Kafka's, but not acted on by the log (see README):
    # the broker stores batches as producers compressed them and has one replica per partition.
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @property
    def compact(self) -> bool:
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], *, base: LogConfig | None = None
    ) -> LogConfig:
        """Parse Kafka-named properties (``segment.bytes`` ...) over ``base`` (defaults)."""
        for key, raw in properties.items():  # Kafka checks every name before any value
            if key not in LOG_CONFIG_KEYS:
                raise ConfigError(key, raw, f"Unknown topic config name: {key}")
        changes: dict[str, object] = {}
        for key, raw in properties.items():
            spec = LOG_CONFIG_KEYS[key]
            changes[spec.field] = spec.parse(key, str(raw))
        return dataclasses.replace(base or cls(), **changes)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        """Kafka-named string form of every key (DescribeConfigs, checkpoints)."""
        return {key: spec.render(getattr(self, spec.field)) for key, spec in LOG_CONFIG_KEYS.items()}


@dataclass(frozen=True, slots=True)
class ConfigKey:
    field: str
    parse: Callable[[str, str], object]
    render: Callable[[object], str] = str


def _int_parser(minimum: int, maximum: int = LONG_MAX) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, "not an integer") from None
        if not minimum <= value <= maximum:
            raise ConfigError(key, raw, f"must be between {minimum} and {maximum}")
        return value

    return parse


def _ratio(key: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(key, raw, "not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(key, raw, "must be between 0 and 1")
    return value


def _cleanup_policy(key: str, raw: str) -> tuple[str, ...]:
    """A list of ``delete`` and/or ``compact``; empty (Kafka 4.2+) is infinite retention: no
    segment is deleted or compacted, only those below the log start offset go."""
    # In the order given, as Kafka's list (IncrementalAlterConfigs APPEND adds at the end).
    policies = tuple(dict.fromkeys(p.strip() for p in raw.split(",") if p.strip()))
    allowed = {CLEANUP_POLICY_DELETE, CLEANUP_POLICY_COMPACT}
    if not set(policies) <= allowed:
        raise ConfigError(key, raw, "must be a list of 'delete' and/or 'compact', or empty")
    return policies


def _timestamp_type(key: str, raw: str) -> str:
    if raw.strip() not in ("CreateTime", "LogAppendTime"):
        raise ConfigError(key, raw, "must be CreateTime or LogAppendTime")
    return raw.strip()


def _boolean(key: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(key, raw, "must be true or false")
    return lowered == "true"


# Kafka's BrokerCompressionType names.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _compression_type(key: str, raw: str) -> str:
    value = raw.strip()
    if value not in COMPRESSION_TYPES:
        raise ConfigError(key, raw, f"String must be one of: {', '.join(COMPRESSION_TYPES)}")
    return value


def _gzip_level(key: str, raw: str) -> int:
    """Kafka's GZIP level: 1..9, or -1 for the codec's default."""
    value = _int_parser(-1, 9)(key, raw)
    if value == 0:
        raise ConfigError(key, raw, "Value must be between 1 and 9 or equal to -1")
    return value


def _throttled_replicas(key: str, raw: str) -> str:
    """Kafka's ``ThrottledReplicaListValidator``: "", "*" or partition:broker pairs."""
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if parts == ["*"] or all(_is_replica_pair(part) for part in parts):
        return ",".join(parts)
    raise ConfigError(
        key, raw, "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


def _is_replica_pair(part: str) -> bool:
    partition, _, broker = part.partition(":")
    return partition.strip().isdigit() and broker.strip().isdigit()


def _remote_storage(key: str, raw: str) -> bool:
    if _boolean(key, raw):
        raise ConfigError(
            key, raw, "Tiered Storage functionality is disabled in the broker. Topic cannot be "
            "configured with remote log storage.",
        )
    return False


def _render_bool(value: object) -> str:
    return "true" if value else "false"


def _render_policy(value: object) -> str:
    assert isinstance(value, tuple)
    return ",".join(value)


# Lower bounds are Kafka's (LogConfig.java): segment.bytes >= 14, segment.ms >= 1, ...
LOG_CONFIG_KEYS: dict[str, ConfigKey] = {
    "segment.bytes": ConfigKey("segment_bytes", _int_parser(14, INT_MAX)),
    "segment.ms": ConfigKey("segment_ms", _int_parser(1)),
    "segment.jitter.ms": ConfigKey("segment_jitter_ms", _int_parser(0)),
    "segment.index.bytes": ConfigKey("segment_index_bytes", _int_parser(4, INT_MAX)),
    "index.interval.bytes": ConfigKey("index_interval_bytes", _int_parser(0, INT_MAX)),
    "retention.ms": ConfigKey("retention_ms", _int_parser(-1)),
    "retention.bytes": ConfigKey("retention_bytes", _int_parser(-1)),
    "cleanup.policy": ConfigKey("cleanup_policy", _cleanup_policy, _render_policy),
    "delete.retention.ms": ConfigKey("delete_retention_ms", _int_parser(0)),
    "min.cleanable.dirty.ratio": ConfigKey("min_cleanable_dirty_ratio", _ratio),
    "min.compaction.lag.ms": ConfigKey("min_compaction_lag_ms", _int_parser(0)),
    "max.compaction.lag.ms": ConfigKey("max_compaction_lag_ms", _int_parser(1)),
    "flush.messages": ConfigKey("flush_messages", _int_parser(1)),
    "flush.ms": ConfigKey("flush_ms", _int_parser(0)),
    "max.message.bytes": ConfigKey("max_message_bytes", _int_parser(0, INT_MAX)),
    "message.timestamp.type": ConfigKey("message_timestamp_type", _timestamp_type),
    "message.timestamp.before.max.ms": ConfigKey("message_timestamp_before_max_ms", _int_parser(0)),
    "message.timestamp.after.max.ms": ConfigKey("message_timestamp_after_max_ms", _int_parser(0)),
    "file.delete.delay.ms": ConfigKey("file_delete_delay_ms", _int_parser(0)),
    "preallocate": ConfigKey("preallocate", _boolean, _render_bool),
    "compression.type": ConfigKey("compression_type", _compression_type),
    "compression.gzip.level": ConfigKey("compression_gzip_level", _gzip_level),
    "compression.lz4.level": ConfigKey("compression_lz4_level", _int_parser(1, 17)),
    "compression.zstd.level": ConfigKey("compression_zstd_level", _int_parser(-131072, 22)),
    "min.insync.replicas": ConfigKey("min_insync_replicas", _int_parser(1, INT_MAX)),
    "unclean.leader.election.enable": ConfigKey(
        "unclean_leader_election_enable", _boolean, _render_bool),
    "leader.replication.throttled.replicas": ConfigKey(
        "leader_replication_throttled_replicas", _throttled_replicas),
    "follower.replication.throttled.replicas": ConfigKey(
        "follower_replication_throttled_replicas", _throttled_replicas),
    "remote.storage.enable": ConfigKey("remote_storage_enable", _remote_storage, _render_bool),
    "local.retention.ms": ConfigKey("local_retention_ms", _int_parser(-2)),
    "local.retention.bytes": ConfigKey("local_retention_bytes", _int_parser(-2)),
    "remote.log.copy.disable": ConfigKey("remote_log_copy_disable", _boolean, _render_bool),
    "remote.log.delete.on.disable": ConfigKey(
        "remote_log_delete_on_disable", _boolean, _render_bool),
}
