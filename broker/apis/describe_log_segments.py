"""SamsaDescribeLogSegments: v0–v0.

Samsa's own admin API (key 10000, schema in ``protocol/schemas/``): each partition's segment
layout, for readers that plan work by segments (the Spark source makes one input partition per
segment's offset range). Per partition: the log start offset, high watermark and last stable
offset, and each segment holding offsets at or above the log start offset, oldest first (the
active one last) with its base offset, end offset (exclusive: the next segment's base offset, or
the log end offset for the active one, which may be above the high watermark: readers clip to
it), size in bytes, first timestamp (the max timestamp of its first batch, as Kafka's
``getFirstBatchTimestamp``) and max timestamp (its largest record timestamp); -1 when unknown.

``topics`` null = every partition of every topic (``__cluster_metadata`` is not one of them).
Every replica answers, leader or follower, with its own log and its own high watermark (a
follower's is the leader's as of its last fetch, capped by its log end offset, so it never
names an offset this replica lacks): a reader of this node's segment files must stop there.
Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (no replica here), NOT_LEADER_OR_FOLLOWER (a
replica with no role yet: no leader known), KAFKA_STORAGE_ERROR (log directory offline). Kafka clients skip the unknown key
in ApiVersions. Not implemented: ACLs (Kafka would need DESCRIBE on the topic).

Authorization (with an authorizer): a topic needs DESCRIBE; a named one without it answers
TOPIC_AUTHORIZATION_FAILED, and "all topics" leaves it out.
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.samsa_describe_log_segments_request import SamsaDescribeLogSegmentsRequest
from protocol.messages.samsa_describe_log_segments_response import (
    DescribeLogSegmentsPartitionResult,
    DescribeLogSegmentsTopicResult,
    LogSegmentDescription,
    SamsaDescribeLogSegmentsResponse,
)

logger = logging.getLogger("samsa.broker.apis.describe_log_segments")


def handle(
    context: RequestContext, request: SamsaDescribeLogSegmentsRequest
) -> SamsaDescribeLogSegmentsResponse:
    response = SamsaDescribeLogSegmentsResponse()
    for name, indexes in _requested(context, request):
        result = DescribeLogSegmentsTopicResult(name=name)
        if authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            result.partitions = [_describe(context, name, index) for index in indexes]
        else:
            result.partitions = [_failed(i, TopicAuthorizationFailedError()) for i in indexes]
        response.topics.append(result)
    return response


def _requested(
    context: RequestContext, request: SamsaDescribeLogSegmentsRequest
) -> list[tuple[str, list[int]]]:
    if request.topics is not None:
        return [(topic.name, topic.partitions) for topic in request.topics]
    everything: dict[str, list[int]] = {}
    for name, index in sorted(context.broker.replica_manager.partitions):
        if authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            everything.setdefault(name, []).append(index)
    return list(everything.items())


def _describe(
    context: RequestContext, topic: str, index: int
) -> DescribeLogSegmentsPartitionResult:
    try:
        return _describe_or_raise(context, topic, index)
    except KafkaError as error:
        return _failed(index, error)
    except Exception:
        logger.exception("describing the segments of %s-%d failed", topic, index)
        return _failed(index, UnknownServerError())


def _describe_or_raise(
    context: RequestContext, topic: str, index: int
) -> DescribeLogSegmentsPartitionResult:
    partition = context.broker.replica_manager.partition(topic, index)
    if partition is None:
        raise UnknownTopicOrPartitionError()
    if partition.leader_id < 0:  # no leader: its high watermark means nothing yet
        raise NotLeaderOrFollowerError()
    layout = partition.log.describe_segments()
    return DescribeLogSegmentsPartitionResult(
        partition_index=index,
        log_start_offset=layout.log_start_offset,
        high_watermark=partition.high_watermark,
        last_stable_offset=partition.last_stable_offset,
        segments=[
            LogSegmentDescription(
                base_offset=segment.base_offset,
                end_offset=segment.end_offset,
                size_in_bytes=segment.size_in_bytes,
                first_timestamp=segment.first_timestamp,
                max_timestamp=segment.max_timestamp,
            )
            for segment in layout.segments
        ],
    )


def _failed(index: int, error: KafkaError) -> DescribeLogSegmentsPartitionResult:
    return DescribeLogSegmentsPartitionResult(partition_index=index, error_code=error.code)


def error_response(
    request: SamsaDescribeLogSegmentsRequest, error: KafkaError
) -> SamsaDescribeLogSegmentsResponse:
    topics = request.topics or []
    return SamsaDescribeLogSegmentsResponse(
        error_code=error.code,
        topics=[
            DescribeLogSegmentsTopicResult(
                name=topic.name, partitions=[_failed(index, error) for index in topic.partitions]
            )
            for topic in topics
        ],
    )


SPEC = register(
    ApiSpec(
        api_key=SamsaDescribeLogSegmentsRequest.API_KEY,
        min_version=0,
        max_version=SamsaDescribeLogSegmentsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="SamsaDescribeLogSegments",
    )
)
