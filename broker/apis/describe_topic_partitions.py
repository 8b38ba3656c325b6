"""DescribeTopicPartitions: v0–v0 (KIP-966).

The topics asked for (all topics, by name, when the list is empty), sorted by name, with their
partitions in order, as Kafka's ``DescribeTopicPartitionsRequestHandler``: at most
``response_partition_limit`` partitions in one response; when the limit cuts a topic short,
``next_cursor`` names the topic and partition to resume from, and a request's ``cursor`` starts
there (topics before the cursor's are skipped). A topic that does not exist ->
UNKNOWN_TOPIC_OR_PARTITION for it alone. ``__cluster_metadata`` is not a topic clients see.
``eligible_leader_replicas`` and ``last_known_elr`` are the image's (KIP-966: kept only when the
cluster finalizes ``eligible.leader.replicas.version``, as a Kafka-written metadata log does).

Not implemented: authorized operations (always "not requested"), ACLs.

Authorization (with an authorizer): DESCRIBE on each topic; a named one without it answers
TOPIC_AUTHORIZATION_FAILED, and "all topics" leaves it out. Every described topic carries
its allowed operations' bitfield, as Kafka's handler always sets it.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize, authorized_operations
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import KafkaError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from protocol.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from replication.metadata.controller import is_internal
from replication.metadata.image import TopicImage
from replication.metadata.log import METADATA_TOPIC


def handle(
    context: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    image = context.broker.replica_manager.image
    names = sorted({t.name for t in request.topics} if request.topics else image.topics_by_name)
    response = DescribeTopicPartitionsResponse()
    allowed = [n for n in names if authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, n)]
    if request.topics:
        permitted = set(allowed)  # once: a set built per name made this O(topics^2)
        response.topics += [_denied(name) for name in names if name not in permitted]
    names = allowed
    cursor = request.cursor
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]
    budget = max(request.response_partition_limit, 1)
    for name in names:
        topic = image.topics_by_name.get(name)
        if topic is None or name == METADATA_TOPIC:
            response.topics.append(_unknown(name))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        indexes = [index for index in sorted(topic.partitions) if index >= first]
        described, rest = indexes[:budget], indexes[budget:]
        response.topics.append(_describe(topic, described))
        response.topics[-1].topic_authorized_operations = authorized_operations(
            context, ResourceType.TOPIC, name
        )
        budget -= len(described)
        if rest:
            response.next_cursor = Cursor(topic_name=name, partition_index=rest[0])
            break
        if budget == 0:
            following = names[names.index(name) + 1 :]
            if following:
                response.next_cursor = Cursor(topic_name=following[0], partition_index=0)
            break
    return response


def _describe(topic: TopicImage, indexes: list[int]) -> DescribeTopicPartitionsResponseTopic:
    partitions = []
    for index in indexes:
        state = topic.partitions[index]
        partitions.append(
            DescribeTopicPartitionsResponsePartition(
                partition_index=index,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                eligible_leader_replicas=list(state.eligible_leader_replicas),
                last_known_elr=list(state.last_known_elr),
                offline_replicas=[],
            )
        )
    return DescribeTopicPartitionsResponseTopic(
        name=topic.name, topic_id=topic.topic_id, is_internal=is_internal(topic.name),
        partitions=partitions,
    )


def _denied(name: str) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=TopicAuthorizationFailedError.code, name=name
    )


def _unknown(name: str) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=UnknownTopicOrPartitionError.code, name=name
    )


def error_response(
    request: DescribeTopicPartitionsRequest, error: KafkaError
) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(
        topics=[DescribeTopicPartitionsResponseTopic(error_code=error.code, name=t.name)
                for t in request.topics]
    )


SPEC = register(
    ApiSpec(
        api_key=DescribeTopicPartitionsRequest.API_KEY,
        min_version=0,
        max_version=DescribeTopicPartitionsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeTopicPartitions",
    )
)
