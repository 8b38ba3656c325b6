"""``stage_batch`` + ``apply_staged`` against the model they replace: applying the batch record by
record (``MetadataDelta.observe`` then ``MetadataImage.apply``). Random sequences of planner-like
batches (create a topic with partitions, grow it, change partitions, set configs, remove it);
after each batch the two images and the two deltas must be equal."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import Message
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.remove_topic_record import RemoveTopicRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.delta import MetadataDelta
from replication.metadata.image import TOPIC_RESOURCE_TYPE, MetadataImage
from replication.metadata.staging import apply_staged, stage_batch

TOPIC_IDS = [uuid.UUID(int=index + 1) for index in range(3)]
REPLICAS = st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True)


def model(image: MetadataImage, records: list[Message], base_offset: int) -> MetadataDelta:
    delta = MetadataDelta()
    for index, record in enumerate(records):
        delta.observe(image, record)
        image.apply(record, base_offset + index)
    return delta


@st.composite
def batch(draw: st.DrawFn, image: MetadataImage) -> list[Message]:
    """One batch as a planner would write it, for the image as it is now."""
    topic_id = draw(st.sampled_from(TOPIC_IDS))
    topic = image.topics_by_id.get(topic_id)
    name = f"t{topic_id.int}"
    if topic is None:
        count = draw(st.integers(0, 4))
        configs = [ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name=name,
                                name="retention.ms", value="1")] if draw(st.booleans()) else []
        return [TopicRecord(name=name, topic_id=topic_id), *configs, *[
            PartitionRecord(partition_id=index, topic_id=topic_id, replicas=draw(REPLICAS),
                            isr=[0], leader=0, leader_epoch=0, partition_epoch=0)
            for index in range(count)]]
    action = draw(st.sampled_from(["grow", "change", "remove", "config", "unknown"]))
    size = len(topic.partitions)
    if action == "grow":
        return [PartitionRecord(partition_id=size + index, topic_id=topic_id,
                                replicas=draw(REPLICAS), isr=[1], leader=1, leader_epoch=0,
                                partition_epoch=0) for index in range(draw(st.integers(1, 3)))]
    if action == "change" and size:
        return [PartitionChangeRecord(partition_id=draw(st.integers(0, size - 1)),
                                      topic_id=topic_id, leader=draw(st.integers(-2, 3)),
                                      isr=draw(st.none() | REPLICAS))
                for _ in range(draw(st.integers(1, 4)))]
    if action == "remove":
        return [RemoveTopicRecord(topic_id=topic_id)]
    if action == "unknown":  # a record for a topic the image does not know is ignored
        return [PartitionChangeRecord(partition_id=0, topic_id=uuid.UUID(int=99), leader=1)]
    return [ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name=name,
                         name="segment.ms", value=draw(st.sampled_from(["5", None])))]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_staged_batch_applies_as_its_records_one_by_one(data: st.DataObject) -> None:
    staged_image, model_image = MetadataImage(), MetadataImage()
    offset = 0
    for _ in range(data.draw(st.integers(1, 12))):
        records = data.draw(batch(model_image))
        staged = stage_batch(staged_image, records)
        apply_staged(staged_image, staged, offset)
        expected = model(model_image, records, offset)
        offset += len(records)
        assert staged.delta == expected
        assert staged_image == model_image


def test_staging_reads_the_image_without_changing_it() -> None:
    image = MetadataImage()
    model(image, [TopicRecord(name="t", topic_id=TOPIC_IDS[0]), PartitionRecord(
        partition_id=0, topic_id=TOPIC_IDS[0], replicas=[1], isr=[1], leader=1)], 0)
    partitions = image.topics_by_id[TOPIC_IDS[0]].partitions
    before = dict(partitions)
    staged = stage_batch(image, [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_IDS[0],
                                                       leader=-1, isr=[])])
    assert partitions == before and image.last_offset == 1
    apply_staged(image, staged, 2)
    assert image.topics_by_id[TOPIC_IDS[0]].partitions[0].leader == -1
    assert image.last_offset == 2
