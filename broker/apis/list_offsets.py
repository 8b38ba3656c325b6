"""ListOffsets: v1–v10.

Per partition, by the request's timestamp: -2 earliest (the log start offset), -1 latest (the
high watermark; ``isolation_level`` 1, read_committed: the last stable offset), -3 the record with the
largest timestamp (KIP-734), -4 earliest local (the log start offset: no tiered storage),
-5 latest tiered (nothing tiered: not found), otherwise the first offset whose timestamp is at
or after it, if that offset is below the high watermark (read_committed: the last stable
offset). Not found: offset -1, timestamp -1.
The leader epoch answered (v4+) is Kafka's (``UnifiedLog.fetchOffsetByTimestamp``): latest,
the partition's current leader epoch; earliest, the first cached epoch if it starts at or below
the log start offset; a record found by timestamp, the epoch that wrote it (the leader epoch
cache's entry for its offset: a leader's batches carry the epoch the cache records); nothing
found (or latest tiered), -1.
A follower (``replica_id`` >= 0) asking for the latest offset gets the leader's log end
offset (Kafka's isolation "none"), which its fetcher needs after OFFSET_OUT_OF_RANGE.
Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER
(only the leader answers, except to the debugging replica id -2, as Kafka), and
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a ``current_leader_epoch`` older / newer than the
partition's.

Authorization (with an authorizer): each topic needs DESCRIBE, else its partitions answer
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import (
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
)
from protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from replication.partition import Partition
from storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)

logger = logging.getLogger("samsa.broker.apis.list_offsets")

LATEST_TIERED_TIMESTAMP = -5
READ_COMMITTED = 1
DEBUGGING_REPLICA_ID = -2  # Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID: any replica answers
LEADER_EPOCH_VERSION = 4  # the first response version with leader_epoch


def handle(context: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    response = ListOffsetsResponse()
    for topic in request.topics:
        answers = ListOffsetsTopicResponse(name=topic.name)
        if not authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            answers.partitions = [
                _failed(p.partition_index, TopicAuthorizationFailedError()) for p in topic.partitions
            ]
            response.topics.append(answers)
            continue
        for requested in topic.partitions:
            answers.partitions.append(
                _lookup(context, topic.name, requested, request.isolation_level == READ_COMMITTED,
                        request.replica_id))
        response.topics.append(answers)
    return response


def _lookup(
    context: RequestContext, topic: str, requested: ListOffsetsPartition, read_committed: bool,
    replica_id: int,
) -> ListOffsetsPartitionResponse:
    try:
        return _lookup_or_raise(context, topic, requested, read_committed, replica_id)
    except KafkaError as error:
        return _failed(requested.partition_index, error)
    except Exception:
        logger.exception("list offsets of %s-%d failed", topic, requested.partition_index)
        return _failed(requested.partition_index, UnknownServerError())


def _lookup_or_raise(
    context: RequestContext, topic: str, requested: ListOffsetsPartition, read_committed: bool,
    replica_id: int,
) -> ListOffsetsPartitionResponse:
    partition = context.broker.replica_manager.partition_or_error(topic, requested.partition_index)
    partition.check_current_leader_epoch(requested.current_leader_epoch)
    if replica_id != DEBUGGING_REPLICA_ID:
        partition.check_leader()
    answer = ListOffsetsPartitionResponse(partition_index=requested.partition_index)
    timestamp = requested.timestamp
    last_fetchable = (partition.log_end_offset if replica_id >= 0
                      else partition.last_stable_offset if read_committed
                      else partition.high_watermark)
    epoch = -1
    if timestamp == LATEST_TIMESTAMP:
        answer.offset, epoch = last_fetchable, partition.leader_epoch
    elif timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        answer.offset = partition.log_start_offset
        epoch = _earliest_epoch(partition)
    elif timestamp != LATEST_TIERED_TIMESTAMP:
        found = partition.log.offset_for_timestamp(timestamp)
        if found is not None and found.offset < last_fetchable:
            answer.offset, answer.timestamp = found.offset, found.timestamp
            epoch = _or_unknown(partition.log.leader_epoch_cache.epoch_for_offset(found.offset))
    if context.api_version >= LEADER_EPOCH_VERSION:  # v1-v3 lack the field: it stays unset
        answer.leader_epoch = epoch
    return answer


def _earliest_epoch(partition: Partition) -> int:
    """Kafka's: the first cached epoch if it starts at or below the log start offset. Kafka
    caches a leader's epoch even for an empty log; Samsa does not (``make_leader``), so an
    empty log answers the epoch Kafka would have cached: the current one."""
    entry = partition.log.leader_epoch_cache.earliest_entry
    if entry is None:
        empty = partition.log_start_offset == partition.log_end_offset
        return partition.leader_epoch if empty else -1
    return entry.epoch if entry.start_offset <= partition.log_start_offset else -1


def _or_unknown(epoch: int | None) -> int:
    return -1 if epoch is None else epoch


def _failed(index: int, error: KafkaError) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(partition_index=index, error_code=error.code)


def error_response(request: ListOffsetsRequest, error: KafkaError) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=topic.name,
                partitions=[_failed(p.partition_index, error) for p in topic.partitions],
            )
            for topic in request.topics
        ]
    )


SPEC = register(
    ApiSpec(
        api_key=ListOffsetsRequest.API_KEY,
        min_version=1,
        max_version=ListOffsetsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ListOffsets",
    )
)
