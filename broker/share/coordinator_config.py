"""The share coordinator's configuration (Kafka's ``ShareCoordinatorConfig``, the keys Samsa
serves), read from the broker's properties by ``broker.config``.

| key | default | Kafka's validation |
| --- | --- | --- |
| ``share.coordinator.state.topic.num.partitions`` | 50 | at least 1 |
| ``share.coordinator.state.topic.replication.factor`` | 3 | at least 1 (a single node: 1) |
| ``share.coordinator.state.topic.min.isr`` | 2 | at least 1 (the topic's min.insync.replicas) |
| ``share.coordinator.state.topic.segment.bytes`` | 104857600 | at least 1 |
| ``share.coordinator.snapshot.update.records.per.snapshot`` | 500 | 0 to 500 |
| ``share.coordinator.write.timeout.ms`` | 5000 | at least 1 |

Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinatorConfig"]

SHARE_GROUP_STATE_TOPIC = "__share_group_state"


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    state_topic_num_partitions: int = 50
    state_topic_replication_factor: int = 3
    state_topic_min_isr: int = 2
    state_topic_segment_bytes: int = 104857600
    snapshot_update_records_per_snapshot: int = 500
    write_timeout_ms: int = 5000
