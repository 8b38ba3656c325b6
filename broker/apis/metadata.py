"""Metadata: v0–v12.

Brokers (this node, at its advertised listener), the cluster id, the controller (this node) and
the requested topics with their partitions, topic ids (v10+) and leader epochs (v7+). A topic
may be named by id (v10+). A missing topic is created when the request allows it (v4+ flag;
always for v0–v3) and ``auto.create.topics.enable`` is true, with ``num.partitions``; it is
created synchronously, so the same response describes it. ``__cluster_metadata`` is not a topic
clients can see; internal topics (``__consumer_offsets``...) are never auto-created here.
Not implemented: authorized operations (always "not requested").
"""

from __future__ import annotations

import logging
from uuid import UUID

from broker.apis import ApiSpec, RequestContext, register
from protocol.codec import ZERO_UUID
from protocol.errors import (
    InvalidTopicExceptionError,
    KafkaError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replication.metadata.controller import is_internal
from replication.metadata.image import TopicImage
from replication.metadata.log import METADATA_TOPIC

logger = logging.getLogger("samsa.broker.apis.metadata")


def handle(context: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = context.broker
    response = MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=broker.node_id, host=listener.host, port=listener.port)
            for listener in broker.advertised[:1]
        ],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
    )
    wants_all = request.topics is None or (context.api_version == 0 and not request.topics)
    if wants_all:
        images = list(broker.replica_manager.image.topics_by_name.values())
        response.topics = [_describe(topic) for topic in images]
        return response
    allow_create = request.allow_auto_topic_creation or context.api_version < 4
    for requested in request.topics or ():
        response.topics.append(_topic(context, requested.name, requested.topic_id, allow_create))
    return response


def _topic(
    context: RequestContext, name: str | None, topic_id: UUID, allow_create: bool
) -> MetadataResponseTopic:
    manager = context.broker.replica_manager
    if name is None or (not name and topic_id != ZERO_UUID):
        topic = manager.topic_by_id(topic_id)
        if topic is None:
            return _error(None, topic_id, UnknownTopicIdError())
        return _describe(topic)
    topic = manager.topic_by_name(name)
    if topic is not None:
        return _describe(topic)
    if name == METADATA_TOPIC or is_internal(name):
        # Internal topics are created by their coordinators, never by a Metadata request.
        return _error(name, ZERO_UUID, UnknownTopicOrPartitionError())
    if not (allow_create and context.broker.config.auto_create_topics_enable):
        return _error(name, ZERO_UUID, UnknownTopicOrPartitionError())
    try:
        manager.create_topic(name)
    except InvalidTopicExceptionError as error:
        return _error(name, ZERO_UUID, error)
    except KafkaError as error:
        logger.info("auto-creation of topic %r failed: %s", name, error)
        return _error(name, ZERO_UUID, error)
    created = manager.topic_by_name(name)
    assert created is not None
    return _describe(created)


def _describe(topic: TopicImage) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal(topic.name),
        partitions=[
            MetadataResponsePartition(
                error_code=0,
                partition_index=index,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[],
            )
            for index, state in sorted(topic.partitions.items())
        ],
    )


def _error(name: str | None, topic_id: UUID, error: KafkaError) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=error.code, name=name, topic_id=topic_id)


def error_response(request: MetadataRequest, error: KafkaError) -> MetadataResponse:
    return MetadataResponse(
        topics=[_error(topic.name, topic.topic_id, error) for topic in request.topics or ()]
    )


SPEC = register(
    ApiSpec(
        api_key=MetadataRequest.API_KEY,
        min_version=0,
        max_version=MetadataRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="Metadata",
    )
)
