"""Option parsing and validation: Spark's Kafka source rules and messages."""

from __future__ import annotations

import pytest

from pyspark_samsa.options import (
    OffsetSpec,
    OptionError,
    parse_sink_options,
    parse_source_options,
)
from samsa.types import TopicPartition

BASE = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t"}


def parse(streaming: bool = False, **options: str) -> object:
    return parse_source_options({**BASE, **options}, streaming=streaming)


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": None}, False, "One of the following options must be specified for Kafka "
     "source: subscribe, subscribepattern, assign. See the docs for more details."),
    ({"assign": '{"t":[0]}'}, False, "Only one of the following options can be specified"),
    ({"subscribe": " , "}, False, "No topics to subscribe to as specified value for option "
     "'subscribe' is ' , '"),
    ({"subscribe": None, "subscribePattern": " "}, False, "Pattern to subscribe is empty"),
    ({"subscribe": None, "assign": "t-0"}, False, "No topicpartitions to assign as specified "
     "value for option 'assign' is 't-0'"),
    ({"subscribe": None, "assign": '{"t":["x"]}'}, False, 'Expected e.g. {"topicA":[0,1],'),
    ({"kafka.bootstrap.servers": None}, False, "Option 'kafka.bootstrap.servers' must be "
     "specified for configuring Kafka consumer"),
    ({"kafka.auto.offset.reset": "earliest"}, False, "Kafka option 'auto.offset.reset' is not "
     "supported."),
    ({"kafka.key.deserializer": "x"}, False, "Kafka option 'key.deserializer' is not supported "
     "as keys are deserialized as byte arrays with ByteArrayDeserializer."),
    ({"kafka.value.deserializer": "x"}, False, "Kafka option 'value.deserializer' is not "
     "supported"),
    ({"kafka.enable.auto.commit": "true"}, False, "Kafka option 'enable.auto.commit' is not "
     "supported"),
    ({"kafka.interceptor.classes": "x"}, False, "Kafka option 'interceptor.classes' is not "
     "supported"),
    ({"kafka.isolation.level": "committed"}, False, "Kafka option 'isolation.level': must be one "
     "of read_uncommitted, read_committed"),
    ({"kafka.no.such.setting": "1"}, False, "Kafka option 'no.such.setting': unknown consumer "
     "config"),
    ({"startingOffsets": "latest"}, False, "starting offset can't be latest for batch queries "
     "on Kafka"),
    ({"startingOffsets": '{"t":{"0":-1}}'}, False, "startingOffsets for t-0 can't be latest for "
     "batch queries on Kafka"),
    ({"endingOffsets": "earliest"}, False, "ending offset can't be earliest for batch queries"),
    ({"endingOffsets": '{"t":{"1":-2}}'}, False, "ending offset for t-1 can't be earliest"),
    ({"endingOffsets": "latest"}, True, "ending offset not valid in streaming queries"),
    ({"endingOffsetsByTimestamp": "{}"}, True, "ending timestamp not valid in streaming queries"),
    ({"startingOffsets": "{bad"}, False, 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":'
     '{"0":-2}}, got {bad'),
    ({"startingOffsetsByTimestamp": '{"t":{"0":"x"}}'}, False, 'Expected e.g. {"topicA": '
     '{"0": 123456789'),
    ({"startingTimestamp": "soon"}, False, "Expected a single long value, got soon"),
    ({"minPartitions": "0"}, False, "minPartitions must be positive"),
    ({"maxOffsetsPerTrigger": "-5"}, True, "Option 'maxOffsetsPerTrigger' must be a positive"),
    ({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"}, True,
     "The value of minOffsetPerTrigger(20) is higher than the maxOffsetsPerTrigger(10)."),
    ({"failOnDataLoss": "maybe"}, False, "Option 'failOnDataLoss' must be true or false"),
    ({"maxTriggerDelay": "soon"}, True, "Option 'maxTriggerDelay': invalid duration 'soon'"),
    ({"startingOffsetsByTimestampStrategy": "never"}, False,
     "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'"),
])
def test_invalid_options_fail_with_sparks_message(options: dict[str, str | None],
                                                  streaming: bool, message: str) -> None:
    settings = {**BASE, **options}
    settings = {key: value for key, value in settings.items() if value is not None}
    with pytest.raises(OptionError) as caught:
        parse_source_options(settings, streaming=streaming)
    assert message in str(caught.value)


def test_defaults_are_sparks() -> None:
    batch = parse_source_options(BASE, streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.min_partitions is None and batch.log_dirs == ()
    assert batch.max_trigger_delay_ms == 15 * 60 * 1000
    streaming = parse_source_options(BASE, streaming=True)
    assert streaming.starting.kind == "latest"


def test_names_are_case_insensitive_and_values_parsed() -> None:
    options = parse_source_options({
        "KAFKA.BOOTSTRAP.SERVERS": "a:1,b:2", "SubscribePattern": "orders-.*",
        "STARTINGOFFSETS": '{"orders-a":{"0":23,"1":-2}}', "includeheaders": "TRUE",
        "failondataloss": "False", "minpartitions": "8", "maxOffsetsPerTrigger": "1000",
        "minOffsetsPerTrigger": "10", "maxTriggerDelay": "30s", "samsa.logDirs": "/a, /b",
        "kafka.max.partition.fetch.bytes": "2097152"}, streaming=True)
    assert (options.strategy, options.pattern) == ("subscribepattern", "orders-.*")
    assert options.starting == OffsetSpec(
        "offsets", {TopicPartition("orders-a", 0): 23, TopicPartition("orders-a", 1): -2},
        option="startingOffsets")
    assert options.include_headers and not options.fail_on_data_loss
    assert (options.min_partitions, options.max_offsets_per_trigger,
            options.min_offsets_per_trigger, options.max_trigger_delay_ms) == (8, 1000, 10, 30_000)
    assert options.log_dirs == ("/a", "/b")
    config = options.client_config()
    assert config["bootstrap.servers"] == ["a:1", "b:2"]
    assert config["max.partition.fetch.bytes"] == 2097152


def test_assign_and_timestamps() -> None:
    options = parse_source_options({"kafka.bootstrap.servers": "h:1",
                                     "assign": '{"b":[1,0],"a":[2]}',
                                     "startingTimestamp": " 1700000000000 ",
                                     "endingOffsetsByTimestamp": '{"a":{"2":5}}'},
                                    streaming=False)
    assert options.assigned == (TopicPartition("a", 2), TopicPartition("b", 0),
                                TopicPartition("b", 1))
    assert options.starting == OffsetSpec("timestamp", timestamp=1700000000000,
                                          option="startingTimestamp")
    assert options.ending.kind == "timestamps"
    assert options.ending.offsets == {TopicPartition("a", 2): 5}


def test_a_global_timestamp_wins_over_per_partition_ones_and_offsets() -> None:
    options = parse(startingTimestamp="5", startingOffsetsByTimestamp='{"t":{"0":1}}',
                    startingOffsets="earliest")
    assert options.starting.kind == "timestamp"  # type: ignore[attr-defined]
    options = parse(startingOffsetsByTimestamp='{"t":{"0":1}}', startingOffsets="earliest")
    assert options.starting.kind == "timestamps"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("options", "message"), [
    ({}, "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.key.serializer": "x"},
     "Kafka option 'key.serializer' is not supported as keys are serialized with "
     "ByteArraySerializer."),
    ({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"},
     "Kafka option 'value.serializer' is not supported"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.acks": "2"}, "Kafka option 'acks'"),
])
def test_sink_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_sink_options(options)


def test_sink_options_keep_the_topic_and_producer_settings() -> None:
    options = parse_sink_options({"kafka.bootstrap.servers": "h:1", "Topic": " out ",
                                  "kafka.linger.ms": "0"})
    assert options.topic == "out"
    assert options.client_config() == {"bootstrap.servers": "h:1", "linger.ms": "0"}
