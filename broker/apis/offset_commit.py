"""OffsetCommit: v2–v9 (Kafka 4's floor, KIP-896, to the schema's max).

As Kafka's OffsetMetadataManager.commitOffset: an empty group id is INVALID_GROUP_ID; while
the group's ``__consumer_offsets`` partition loads, every partition answers
COORDINATOR_LOAD_IN_PROGRESS (``GroupCoordinator.partition_error``); the group validates
the member and generation (``broker.group.offsets.validate_offset_commit``:
generation -1 with no group is a simple consumer or the admin client and is accepted); its
error goes to every partition. Then per partition: a topic unknown to the metadata image
(KafkaApis' check) is UNKNOWN_TOPIC_OR_PARTITION, metadata longer than
``offset.metadata.max.bytes`` is OFFSET_METADATA_TOO_LARGE, and the rest are appended to the
group's ``__consumer_offsets`` partition as one batch (the response is sent after the append;
on one node that is acks=all). A failed append answers those partitions with Kafka's mapped
coordinator error (KAFKA_STORAGE_ERROR -> NOT_COORDINATOR, ...). Metadata round-trips (null is
stored as ""); the commit timestamp is the broker's time; ``retention_time_ms`` (v2–v4, not -1)
sets an expire timestamp (at most the largest int64), written as OffsetCommitValue v1 as Kafka
does.

Not implemented: the new consumer-group protocol's member epochs (v9 validates classic groups
only), transactions, quotas (throttle_time_ms is 0).

Authorization (with an authorizer): READ on the group (else GROUP_AUTHORIZATION_FAILED for
every partition) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize, filter_authorized
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    coordinator_error_code,
    validate_offset_commit,
)
from broker.replicated_answers import answer_when_replicated
from protocol.errors import ErrorCode, KafkaError, UnknownServerError
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
)
from protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

logger = logging.getLogger("samsa.broker.apis.offset_commit")

DEFAULT_RETENTION_TIME_MS = -1
INT64_MAX = 2**63 - 1


def handle(context: RequestContext, request: OffsetCommitRequest) -> HandlerResult:
    broker = context.broker
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return error_response(request, ErrorCode.INVALID_GROUP_ID)
    unavailable = broker.group_coordinator.partition_error(request.group_id)
    if unavailable is not None:
        return error_response(request, unavailable)
    error = validate_offset_commit(
        broker, request.group_id, generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id, group_instance_id=request.group_instance_id,
        api_version=context.api_version,
    )
    if error is not None:
        return error_response(request, error)
    now_ms = broker.clock.milliseconds()
    expire_ms = None
    if context.api_version <= 4 and request.retention_time_ms != DEFAULT_RETENTION_TIME_MS:
        # Kafka's long addition wraps a huge retention into the past; an int64 cannot hold
        # the sum here, so it saturates: "never" stays never.
        expire_ms = min(now_ms + request.retention_time_ms, INT64_MAX)
    response = OffsetCommitResponse()
    accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
    readable = filter_authorized(context, AclOperation.READ, ResourceType.TOPIC,
                                 [topic.name for topic in request.topics])
    for topic in request.topics:
        answers = OffsetCommitResponseTopic(name=topic.name)
        known = broker.replica_manager.topic_by_name(topic.name) is not None
        for partition in topic.partitions:
            code = (_check(context, known, partition) if topic.name in readable
                    else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if code == ErrorCode.NONE:
                accepted[(topic.name, partition.partition_index)] = _offset(partition, now_ms, expire_ms)
            answers.partitions.append(
                OffsetCommitResponsePartition(partition_index=partition.partition_index, error_code=code)
            )
        response.topics.append(answers)
    _store(context, request.group_id, accepted, response)
    key = (OFFSETS_TOPIC, broker.offset_store.partition_for(request.group_id))
    return answer_when_replicated(broker, key, response,
                                  lambda code: error_response(request, code))


def _check(context: RequestContext, known: bool, partition: OffsetCommitRequestPartition) -> int:
    if not known:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    metadata = partition.committed_metadata
    if metadata is not None and len(metadata) > context.broker.offset_store.config.metadata_max_bytes:
        return ErrorCode.OFFSET_METADATA_TOO_LARGE
    return ErrorCode.NONE


def _offset(partition: OffsetCommitRequestPartition, now_ms: int, expire_ms: int | None) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        committed_offset=partition.committed_offset,
        leader_epoch=partition.committed_leader_epoch,
        metadata=partition.committed_metadata or "",
        commit_timestamp_ms=now_ms,
        expire_timestamp_ms=expire_ms,
    )


def _store(
    context: RequestContext, group_id: str, accepted: dict[tuple[str, int], OffsetAndMetadata],
    response: OffsetCommitResponse,
) -> None:
    """Append; on failure, give every accepted partition the mapped error."""
    try:
        context.broker.offset_store.commit(group_id, accepted)
        return
    except Exception as error:
        code = _failure_code(group_id, error)
    for topic in response.topics:
        for answer in topic.partitions:
            if (topic.name, answer.partition_index) in accepted:
                answer.error_code = code


def _failure_code(group_id: str, error: Exception) -> int:
    """Kafka's mapped coordinator error; anything unexpected (an encoder's EncodeError
    included, which is an UnknownServerError) is a bug: logged with its traceback."""
    if isinstance(error, KafkaError) and not isinstance(error, UnknownServerError):
        logger.warning("committing offsets of group %s failed: %s", group_id, error)
        return coordinator_error_code(error)
    logger.error("committing offsets of group %s failed", group_id, exc_info=error)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def error_response(request: OffsetCommitRequest, error: KafkaError | int) -> OffsetCommitResponse:
    code = error if isinstance(error, int) else error.code
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                            for p in topic.partitions],
            )
            for topic in request.topics
        ]
    )


SPEC = register(
    ApiSpec(
        api_key=OffsetCommitRequest.API_KEY,
        min_version=2,
        max_version=OffsetCommitRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="OffsetCommit",
    )
)
