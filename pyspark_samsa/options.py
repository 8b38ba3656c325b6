"""The source's and the sink's options: Spark's Kafka names, rules and error messages.

Moving from ``format("kafka")`` to ``format("samsa")`` is a one-word change, so the options are
Spark's (``KafkaSourceProvider``) and an invalid combination fails at planning with the message
Spark's Kafka source gives (an ``OptionError``, a ``ValueError``, as Spark's are
``IllegalArgumentException``). Option names are case-insensitive, as in Spark. ``kafka.*``
options go to Samsa's client (``samsa.config``, Kafka's names); the few Spark refuses are
refused here too. One Samsa option: ``samsa.logDirs`` (read segment files directly).

Pure functions and frozen values: no I/O.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.config import parse_config
from samsa.errors import ConfigError
from samsa.types import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "parse_sink_options",
    "parse_source_options",
]

log = logging.getLogger("pyspark_samsa")

EARLIEST = -2  # in offset JSON, as Spark's KafkaOffsetRangeLimit.EARLIEST
LATEST = -1
STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's "15m"

_CONSUMER_ONLY_SPARK = ("group.id",)
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                  "d": 86_400_000}


class OptionError(ValueError):
    """An invalid option or combination of options (Spark's IllegalArgumentException)."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends: ``kind`` is earliest, latest, offsets (per partition,
    -2/-1 allowed), timestamp (one for all partitions) or timestamps (per partition)."""

    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = -1
    option: str = ""  # the option it came from, for messages


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything the reader needs, validated."""

    strategy: str  # subscribe | subscribepattern | assign
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: error | latest
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    log_dirs: tuple[str, ...] = ()
    client: Mapping[str, Any] = field(default_factory=dict)  # kafka.* without the prefix

    def client_config(self) -> dict[str, Any]:
        """The consumer configuration for Samsa's client (``samsa.config``)."""
        return parse_config("consumer", self.client)

    @property
    def read_committed(self) -> bool:
        """``kafka.isolation.level=read_committed``: "latest" is the last stable offset and
        aborted transactions' records are left out."""
        return self.client.get("isolation.level") == "read_committed"


@dataclass(frozen=True, slots=True)
class SinkOptions:
    topic: str | None
    client: Mapping[str, Any]

    def client_config(self) -> dict[str, Any]:
        return dict(self.client)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate ``options`` as Spark's Kafka source does for a batch or streaming read."""
    params = _lower(options)
    if streaming:
        if "endingoffsets" in params:
            raise OptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in params:
            raise OptionError("ending timestamp not valid in streaming queries")
    strategy, topics, pattern, assigned = _strategy(params)
    client = _client_options(params)
    starting = offset_spec(params, "startingtimestamp", "startingoffsetsbytimestamp",
                           "startingoffsets", "latest" if streaming else "earliest")
    ending = offset_spec(params, "endingtimestamp", "endingoffsetsbytimestamp",
                         "endingoffsets", "latest")
    if not streaming:
        _check_batch_range(starting, ending)
        if "maxoffsetspertrigger" in params:
            log.warning("maxOffsetsPerTrigger option ignored in batch queries")
    max_per_trigger = _positive_long(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_per_trigger = _positive_long(params, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise OptionError(f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
                          f"maxOffsetsPerTrigger({max_per_trigger}).")
    return SourceOptions(
        strategy=strategy, topics=topics, pattern=pattern, assigned=assigned,
        starting=starting, ending=ending,
        timestamp_strategy=_timestamp_strategy(params),
        max_offsets_per_trigger=max_per_trigger, min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(params.get("maxtriggerdelay", "15m")),
        min_partitions=_min_partitions(params),
        fail_on_data_loss=_boolean(params, "failondataloss", "failOnDataLoss", True),
        include_headers=_boolean(params, "includeheaders", "includeHeaders", False),
        log_dirs=tuple(p.strip() for p in params.get("samsa.logdirs", "").split(",") if p.strip()),
        client=client,
    )


def _strategy(params: dict[str, str]) -> tuple[str, tuple[str, ...], str, tuple[TopicPartition, ...]]:
    specified = [key for key in STRATEGY_KEYS if key in params]
    if not specified:
        raise OptionError("One of the following options must be specified for Kafka source: "
                          f"{', '.join(STRATEGY_KEYS)}. See the docs for more details.")
    if len(specified) > 1:
        raise OptionError("Only one of the following options can be specified for Kafka source: "
                          f"{', '.join(STRATEGY_KEYS)}. See the docs for more details.")
    key = specified[0]
    value = params[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise OptionError("No topicpartitions to assign as specified value for option "
                              f"'assign' is '{value}'")
        return key, (), "", tuple(parse_assign(value))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError("No topics to subscribe to as specified value for option "
                              f"'subscribe' is '{value}'")
        return key, topics, "", ()
    pattern = value.strip()
    if not pattern:
        raise OptionError("Pattern to subscribe is empty as specified value for option "
                          f"'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as error:
        raise OptionError(f"Invalid pattern '{pattern}' for option 'subscribePattern': {error}") from None
    return key, (), pattern, ()


def _client_options(params: dict[str, str]) -> dict[str, str]:
    if "kafka.auto.offset.reset" in params:
        raise OptionError(
            "Kafka option 'auto.offset.reset' is not supported.\nInstead set the source option "
            "'startingoffsets' to 'earliest' or 'latest' to specify where to start. Structured "
            "Streaming manages which offsets are consumed internally, rather than relying on the "
            "kafkaConsumer to do it. This will ensure that no data is missed when new "
            "topics/partitions are dynamically subscribed. Note that 'startingoffsets' only "
            "applies when a new Streaming query is started, and that resuming will always pick "
            "up from where the query left off. See the docs for more details.")
    for what in ("key", "value"):
        if f"kafka.{what}.deserializer" in params:
            raise OptionError(
                f"Kafka option '{what}.deserializer' is not supported as {what}s are deserialized "
                f"as byte arrays with ByteArrayDeserializer. Use DataFrame operations to "
                f"explicitly deserialize the {what}s.")
    for unsupported in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{unsupported}" in params:
            raise OptionError(f"Kafka option '{unsupported}' is not supported")
    if "kafka.bootstrap.servers" not in params:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                          "Kafka consumer")
    if "kafka.group.id" in params:
        log.warning("Kafka option 'kafka.group.id' has been set on this query: the samsa source "
                    "uses no consumer group, so it is ignored.")
    client = {key[len("kafka."):]: value for key, value in params.items()
              if key.startswith("kafka.") and key[len("kafka."):] not in _CONSUMER_ONLY_SPARK}
    try:
        parse_config("consumer", client)
    except ConfigError as error:
        raise OptionError(f"Kafka option '{error.key}': {error.reason} "
                          f"(value {error.value!r})") from None
    return client


# --- offsets ---------------------------------------------------------------------------------


def offset_spec(params: Mapping[str, str], timestamp_key: str, by_timestamp_key: str,
                offsets_key: str, default: str) -> OffsetSpec:
    """Spark's getKafkaOffsetRangeLimit: a global timestamp wins over per-partition timestamps,
    which win over offsets (earliest, latest or JSON)."""
    if timestamp_key in params:
        text = params[timestamp_key].strip()
        try:
            return OffsetSpec("timestamp", timestamp=int(text), option=_spark_name(timestamp_key))
        except ValueError:
            raise OptionError(f"Expected a single long value, got {text}") from None
    if by_timestamp_key in params:
        return OffsetSpec("timestamps", offsets=parse_partition_timestamps(params[by_timestamp_key]),
                          option=_spark_name(by_timestamp_key))
    text = params.get(offsets_key, default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower(), option=_spark_name(offsets_key))
    return OffsetSpec("offsets", offsets=parse_partition_offsets(text),
                      option=_spark_name(offsets_key))


def _spark_name(key: str) -> str:
    names = {"startingtimestamp": "startingTimestamp", "endingtimestamp": "endingTimestamp",
             "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
             "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
             "startingoffsets": "startingOffsets", "endingoffsets": "endingOffsets"}
    return names[key]


def _check_batch_range(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting.kind == "latest":
        raise OptionError("starting offset can't be latest for batch queries on Kafka")
    if starting.kind == "offsets":
        for tp, offset in starting.offsets.items():
            if offset == LATEST:
                raise OptionError(f"startingOffsets for {_tp_name(tp)} can't be latest for batch "
                                  "queries on Kafka")
    if ending.kind == "earliest":
        raise OptionError("ending offset can't be earliest for batch queries on Kafka")
    if ending.kind == "offsets":
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST:
                raise OptionError(f"ending offset for {_tp_name(tp)} can't be earliest for batch "
                                  "queries on Kafka")


def _tp_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_partition_offsets(text: str) -> dict[TopicPartition, int]:
    """``{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}``."""
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    return _nested_longs(text, example)


def parse_partition_timestamps(text: str) -> dict[TopicPartition, int]:
    example = ('{"topicA": {"0": 123456789, "1": 123456789}, '
               '"topicB": {"0": 123456789, "1": 123456789}}')
    return _nested_longs(text, example)


def _nested_longs(text: str, example: str) -> dict[TopicPartition, int]:
    try:
        document = json.loads(text)
        result: dict[TopicPartition, int] = {}
        for topic, partitions in document.items():
            for partition, value in partitions.items():
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(value)
                result[TopicPartition(topic, int(partition))] = value
        return result
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f"Expected e.g. {example}, got {text}") from None


def parse_assign(text: str) -> list[TopicPartition]:
    """``{"topicA":[0,1],"topicB":[0,1]}``."""
    try:
        document = json.loads(text)
        result = []
        for topic, partitions in document.items():
            for partition in partitions:
                if isinstance(partition, bool) or not isinstance(partition, int):
                    raise TypeError(partition)
                result.append(TopicPartition(topic, partition))
        return sorted(set(result))
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f'Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {text}') from None


# --- scalars ---------------------------------------------------------------------------------


def _timestamp_strategy(params: Mapping[str, str]) -> str:
    value = params.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if value not in ("error", "latest"):
        raise OptionError("Option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                          f"'latest', got '{value}'")
    return value


def _positive_long(params: Mapping[str, str], key: str, name: str) -> int | None:
    if key not in params:
        return None
    text = params[key].strip()
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"Option '{name}' must be a positive long, got '{text}'") from None
    if value <= 0:
        raise OptionError(f"Option '{name}' must be a positive long, got '{text}'")
    return value


def _min_partitions(params: Mapping[str, str]) -> int | None:
    if "minpartitions" not in params:
        return None
    try:
        value = int(params["minpartitions"].strip())
    except ValueError:
        raise OptionError(f"minPartitions must be an integer, got '{params['minpartitions']}'") from None
    if value <= 0:
        raise OptionError("minPartitions must be positive")
    return value


def _boolean(params: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    text = params.get(key, str(default)).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"Option '{name}' must be true or false, got '{params[key]}'")
    return text == "true"


def _duration_ms(text: str) -> int:
    """Spark's timeStringAsMs: ``15m``, ``30s``, ``100ms``, ``1h``, ``2d``; a bare number is ms."""
    match = re.fullmatch(r"\s*(-?\d+)\s*([a-z]*)\s*", text.lower())
    if match is None or match.group(2) not in ("", *_TIME_UNITS_MS):
        raise OptionError(f"Option 'maxTriggerDelay': invalid duration '{text}' "
                          "(e.g. 15m, 30s, 100ms)")
    return int(int(match.group(1)) * _TIME_UNITS_MS.get(match.group(2) or "ms", 1))


# --- sink ------------------------------------------------------------------------------------


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Spark's Kafka sink rules: ``kafka.bootstrap.servers``; byte array serializers only."""
    params = _lower(options)
    if "kafka.key.serializer" in params:
        raise OptionError("Kafka option 'key.serializer' is not supported as keys are serialized "
                          "with ByteArraySerializer.")
    if "kafka.value.serializer" in params:
        raise OptionError("Kafka option 'value.serializer' is not supported as value are "
                          "serialized with ByteArraySerializer.")
    if "kafka.bootstrap.servers" not in params:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                          "Kafka producer")
    client = {key[len("kafka."):]: value for key, value in params.items()
              if key.startswith("kafka.")}
    try:
        parse_config("producer", client)
    except ConfigError as error:
        raise OptionError(f"Kafka option '{error.key}': {error.reason} "
                          f"(value {error.value!r})") from None
    topic = params.get("topic")
    return SinkOptions(topic=topic.strip() if topic is not None else None, client=client)
