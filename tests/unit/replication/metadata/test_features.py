"""Finalized features in the metadata image (FeatureLevelRecord), and the metadata records of
Apache Kafka 4.3 that Samsa must read when it opens a log directory Kafka wrote.

Found with Kafka's own tools (issue #14): ``kafka-metadata-shell`` refused every Samsa snapshot
("Unknown metadata version for FeaturesImage") because none carried ``metadata.version``, and
Samsa could not load a snapshot of Kafka 4.3 (RegisterBrokerRecord v4)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.messages.metadata.feature_level_record import FeatureLevelRecord
from protocol.messages.metadata.register_broker_record import RegisterBrokerRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.image import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    MetadataImage,
    feature_level_records,
)
from replication.metadata.image_records import copy_image, image_records
from replication.metadata.records import decode_metadata_record, encode_metadata_record


def _replayed(image: MetadataImage) -> MetadataImage:
    replayed = MetadataImage()
    for record in image_records(image):
        replayed.apply(decode_metadata_record(encode_metadata_record(record))[0])
    return replayed


def test_a_new_image_has_samsas_metadata_version_and_a_snapshot_opens_with_it() -> None:
    image = MetadataImage()
    assert image.features == {METADATA_VERSION: METADATA_VERSION_LEVEL}
    image.apply(TopicRecord(name="t", topic_id=uuid.uuid4()))
    first = next(iter(image_records(image)))
    assert first == FeatureLevelRecord(name=METADATA_VERSION, feature_level=METADATA_VERSION_LEVEL)


def test_kafkas_bootstrap_features_are_kept_metadata_version_first() -> None:
    image = MetadataImage()
    for name, level in (("metadata.version", 30), ("transaction.version", 2), ("group.version", 1)):
        image.apply(FeatureLevelRecord(name=name, feature_level=level))
    assert [(r.name, r.feature_level) for r in feature_level_records(image)] == [
        ("metadata.version", 30), ("group.version", 1), ("transaction.version", 2)]
    assert _replayed(image).features == image.features
    assert copy_image(image).features == image.features


def test_level_zero_removes_a_feature_but_never_metadata_version() -> None:
    image = MetadataImage()
    image.apply(FeatureLevelRecord(name="group.version", feature_level=1))
    image.apply(FeatureLevelRecord(name="group.version", feature_level=0))
    image.apply(FeatureLevelRecord(name=METADATA_VERSION, feature_level=0))
    assert image.features == {METADATA_VERSION: METADATA_VERSION_LEVEL}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["metadata.version", "group.version", "kraft.version",
                                           "transaction.version"]),
                          st.integers(0, 40)), max_size=12))
def test_features_survive_a_snapshot_round_trip(levels: list[tuple[str, int]]) -> None:
    image = MetadataImage()
    model = {METADATA_VERSION: METADATA_VERSION_LEVEL}
    for name, level in levels:
        image.apply(FeatureLevelRecord(name=name, feature_level=level))
        if level > 0:
            model[name] = level
        elif name != METADATA_VERSION:
            model.pop(name, None)
    assert image.features == model
    assert _replayed(image).features == model


def test_kafka_4_3_register_broker_record_v4_reads_back() -> None:
    """Kafka 4.3 writes v4 (KIP-1066's tagged CordonedLogDirs) in every snapshot."""
    directory = uuid.uuid4()
    record = RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=11,
                                  log_dirs=[directory], cordoned_log_dirs=[directory])
    decoded, version = decode_metadata_record(encode_metadata_record(record, 4))
    assert version == 4 and decoded == record
    image = MetadataImage()
    image.apply(decoded, offset=11)
    assert 1 in image.brokers.by_id
