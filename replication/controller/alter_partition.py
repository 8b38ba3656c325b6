"""AlterPartition (KIP-497): a partition leader asks the controller to change its ISR; Kafka's
``ReplicationControlManager.alterPartition``.

The request's broker and epoch must match a registration (STALE_BROKER_EPOCH, for the whole
request). Topics are found by id from v2, by name before (UNKNOWN_TOPIC_ID /
UNKNOWN_TOPIC_OR_PARTITION for all their partitions). Each partition is checked in Kafka's order:
1. unknown partition: UNKNOWN_TOPIC_OR_PARTITION;
2. the request's leader epoch or partition epoch ahead of the image's: NOT_CONTROLLER (this
   controller is behind; the leader should find the current one);
3. leader epoch behind: FENCED_LEADER_EPOCH;
4. sender not the leader: INVALID_REQUEST;
5. partition epoch behind: INVALID_UPDATE_VERSION;
6. the new ISR names a non-replica or a replica twice, or leaves the leader out: INVALID_REQUEST;
7. RECOVERING with more than one ISR member, or RECOVERED -> RECOVERING: INVALID_REQUEST;
8. an ISR member not registered, in controlled shutdown, fenced, or (v3+ broker epochs) of
   another broker epoch: INELIGIBLE_REPLICA (v2+; OPERATION_NOT_ATTEMPTED before).
A valid change is built by ``partition_change`` (an unclean election only where the topic allows
it). If the change completes a reassignment that moves the leadership away from the sender,
the record is written and the sender gets NEW_LEADER_ELECTED (v2+; FENCED_LEADER_EPOCH before);
otherwise it gets the partition's state after the change (or as it is, when nothing changed).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from protocol.codec import ZERO_UUID, Message
from protocol.errors import ErrorCode, StaleBrokerEpochError
from protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from replication.controller.partition_change import (
    Election,
    build_partition_change,
    elr_policy,
    unclean_leader_election_enabled,
)
from replication.metadata.image import (
    NO_LEADER_CHANGE,
    RECOVERED,
    RECOVERING,
    MetadataImage,
    PartitionImage,
    TopicImage,
    merge_partition,
)

__all__ = ["AlterPartitionResult", "plan_alter_partition"]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """One partition of the AlterPartition response (state fields only when error_code is 0)."""

    topic_name: str
    topic_id: UUID
    partition_index: int
    error_code: int = ErrorCode.NONE
    partition: PartitionImage | None = None


def plan_alter_partition(
    image: MetadataImage, request: AlterPartitionRequest, *, version: int
) -> tuple[list[AlterPartitionResult], list[Message]]:
    """Per-partition results, and the records to propose (one batch)."""
    registration = image.brokers.get(request.broker_id)
    if registration is None or registration.epoch != request.broker_epoch:
        raise StaleBrokerEpochError(
            f"Broker {request.broker_id} is not registered with epoch {request.broker_epoch}")
    results: list[AlterPartitionResult] = []
    records: list[Message] = []
    for topic_data in request.topics:
        topic = _find_topic(image, topic_data, version)
        for data in topic_data.partitions:
            if topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID if version > 1 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                results.append(AlterPartitionResult(
                    topic_data.topic_name, topic_data.topic_id, data.partition_index, code))
                continue
            results.append(_alter_one(image, request.broker_id, topic, data, version, records))
    return results, records


def _find_topic(image: MetadataImage, data: TopicData, version: int) -> TopicImage | None:
    if version > 1:
        return None if data.topic_id == ZERO_UUID else image.topics_by_id.get(data.topic_id)
    return image.topics_by_name.get(data.topic_name)


def _alter_one(
    image: MetadataImage, broker_id: int, topic: TopicImage, data: PartitionData, version: int,
    records: list[Message],
) -> AlterPartitionResult:
    new_isr = (data.new_isr_with_epochs if version >= 3
               else [BrokerState(broker_id=replica, broker_epoch=-1) for replica in data.new_isr])
    partition = topic.partitions.get(data.partition_index)
    error = _validate(image, broker_id, partition, data, new_isr, version)
    if error != ErrorCode.NONE or partition is None:
        return AlterPartitionResult(topic.name, topic.topic_id, data.partition_index, error)
    election = (Election.UNCLEAN if unclean_leader_election_enabled(image, topic.name)
                else Election.ONLINE)
    record = build_partition_change(
        topic.topic_id, partition, is_acceptable_leader=image.brokers.is_active,
        election=election, isr=[state.broker_id for state in new_isr],
        leader_recovery_state=data.leader_recovery_state, elr=elr_policy(image, topic),
    )
    if record is not None:
        records.append(record)
        partition = merge_partition(partition, record)
        if record.leader not in (broker_id, NO_LEADER_CHANGE):
            code = ErrorCode.NEW_LEADER_ELECTED if version > 1 else ErrorCode.FENCED_LEADER_EPOCH
            return AlterPartitionResult(topic.name, topic.topic_id, data.partition_index, code)
    return AlterPartitionResult(topic.name, topic.topic_id, data.partition_index,
                                partition=partition)


def _validate(
    image: MetadataImage, broker_id: int, partition: PartitionImage | None, data: PartitionData,
    new_isr: list[BrokerState], version: int,
) -> int:
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if data.leader_epoch > partition.leader_epoch or data.partition_epoch > partition.partition_epoch:
        return ErrorCode.NOT_CONTROLLER
    if data.leader_epoch < partition.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if broker_id != partition.leader:
        return ErrorCode.INVALID_REQUEST
    if data.partition_epoch < partition.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    isr = [state.broker_id for state in new_isr]
    if len(set(isr)) != len(isr) or not set(isr) <= set(partition.replicas):
        return ErrorCode.INVALID_REQUEST
    if partition.leader not in isr:
        return ErrorCode.INVALID_REQUEST
    if data.leader_recovery_state == RECOVERING and len(isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if partition.leader_recovery_state == RECOVERED and data.leader_recovery_state == RECOVERING:
        return ErrorCode.INVALID_REQUEST
    if any(not _eligible(image, state) for state in new_isr):
        return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return ErrorCode.NONE


def _eligible(image: MetadataImage, state: BrokerState) -> bool:
    """Kafka's ``ineligibleReplicasForIsr``, negated; epoch -1 skips the epoch check."""
    registration = image.brokers.get(state.broker_id)
    return (registration is not None and not registration.in_controlled_shutdown
            and not registration.fenced
            and state.broker_epoch in (-1, registration.epoch))
