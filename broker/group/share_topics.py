"""The metadata image seen as a share group needs it: topic name -> (topic id, partition
count), looked up lazily (``ShareGroup`` asks only for the topics its members subscribe to).
Internal topics are left out: a share group never consumes ``__consumer_offsets`` and the like.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from broker.share.share_group import TopicMetadata
from replication.metadata.image import MetadataImage

__all__ = ["INTERNAL_TOPICS", "ImageTopics"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata"})


class ImageTopics(Mapping[str, TopicMetadata]):
    def __init__(self, image: MetadataImage) -> None:
        self._topics = image.topics_by_name

    def __getitem__(self, name: str) -> TopicMetadata:
        if name in INTERNAL_TOPICS:
            raise KeyError(name)
        topic = self._topics[name]
        return TopicMetadata(topic.topic_id, len(topic.partitions))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name not in INTERNAL_TOPICS and name in self._topics

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._topics if name not in INTERNAL_TOPICS)

    def __len__(self) -> int:
        return sum(1 for _ in self)
