"""The metadata log: KRaft framing, replay after restart gives the same image."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import (
    InvalidConfigError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicExceptionError,
    TopicAlreadyExistsError,
)
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.controller import (
    plan_create_topic,
    plan_delete_topic,
    validate_topic_name,
)
from replication.metadata.image import MetadataImage
from replication.metadata.log import MetadataLog
from replication.metadata.records import (
    MetadataRecordError,
    decode_metadata_record,
    encode_metadata_record,
)
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log


def test_frame_layout_is_kraft_frame_version_1() -> None:
    record = TopicRecord(name="t")
    framed = encode_metadata_record(record)
    assert framed[:3] == bytes([1, 2, 0])  # frame version 1, TopicRecord (2), version 0
    assert framed[3:] == record.encode(0)
    assert decode_metadata_record(framed) == (record, 0)


@pytest.mark.parametrize("value", [b"", b"\x00\x02\x00", b"\x01\x63\x00", b"\x01\x02\x00\x00\x00"])
def test_bad_frames_are_rejected(value: bytes) -> None:
    with pytest.raises(MetadataRecordError):
        decode_metadata_record(value)


def _plan(image: MetadataImage, name: str, partitions: int = 3, **configs: str):  # type: ignore[no-untyped-def]
    return plan_create_topic(
        image, name, num_partitions=partitions, replication_factor=-1, configs=configs,
        node_id=5, default_num_partitions=1, default_replication_factor=1,
        default_config=LogConfig(),
    )


def open_log(directory: Path, clock: ManualClock) -> MetadataLog:
    log = Log.open(directory / "__cluster_metadata-0", LogConfig(), clock=clock)
    return MetadataLog(log, clock=clock)


def test_create_delete_restart_gives_the_same_image(tmp_path: Path) -> None:
    clock = ManualClock()
    metadata = open_log(tmp_path, clock)
    metadata.replay()
    for name in ("a", "b", "c"):
        metadata.append(_plan(metadata.image, name, **{"retention.ms": "1000"}).records)
    topic_b = metadata.image.topics_by_name["b"]
    _, records = plan_delete_topic(metadata.image, name="b")
    metadata.append(records)
    before = metadata.image
    metadata.log.close()

    again = open_log(tmp_path, clock)
    image = again.replay()
    assert set(image.topics_by_name) == {"a", "c"}
    assert topic_b.topic_id not in image.topics_by_id
    assert image.topics_by_name["a"].topic_id == before.topics_by_name["a"].topic_id
    assert image.topics_by_name["a"].partitions == before.topics_by_name["a"].partitions
    assert image.topic_configs == {"a": {"retention.ms": "1000"}, "c": {"retention.ms": "1000"}}
    partition = image.topics_by_name["c"].partitions[2]
    assert (partition.leader, partition.replicas, partition.isr, partition.leader_epoch) == (
        5, (5,), (5,), 0)
    assert image.last_offset == before.last_offset
    again.log.close()


def test_creation_refusals_are_kafkas() -> None:
    image = MetadataImage()
    image.apply(_plan(image, "taken.name").records[0])
    with pytest.raises(TopicAlreadyExistsError):
        _plan(image, "taken.name")
    with pytest.raises(InvalidTopicExceptionError, match="collides"):
        _plan(image, "taken_name")
    with pytest.raises(InvalidRequestError):
        _plan(image, "__cluster_metadata")
    with pytest.raises(InvalidConfigError):
        _plan(image, "x", **{"retention.ms": "never"})
    with pytest.raises(InvalidReplicationFactorError):
        plan_create_topic(image, "y", num_partitions=1, replication_factor=3, configs={},
                          node_id=1, default_num_partitions=1, default_replication_factor=1,
                          default_config=LogConfig())


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "sp ace", "slash/", "ü"])
def test_invalid_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicExceptionError):
        validate_topic_name(name)


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "a" * 249, "..."])
def test_valid_topic_names(name: str) -> None:
    validate_topic_name(name)
