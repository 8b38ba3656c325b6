"""CreateTopics: v2–v7.

Per topic, as Kafka's controller: name validation (legal characters, length <= 249, not '.'
or '..', no '.'/'_' collision) -> INVALID_TOPIC_EXCEPTION; TOPIC_ALREADY_EXISTS;
num_partitions -1 = ``num.partitions``, other values < 1 -> INVALID_PARTITIONS; replication
factor -1 = ``default.replication.factor``, anything but 1 on this single node ->
INVALID_REPLICATION_FACTOR; configs validated by ``LogConfig`` -> INVALID_CONFIG; a name
given twice -> INVALID_REQUEST ("Duplicate topic name."); ``__cluster_metadata`` ->
INVALID_REQUEST. Manual replica assignments are Kafka's: num_partitions and replication_factor
must then be -1 (INVALID_REQUEST), partitions numbered 0..n-1 once each and every replica list
exactly [this node] (INVALID_REPLICA_ASSIGNMENT). ``validate_only`` checks everything and writes
nothing. v5+ responses carry the topic id, partition count, replication factor and the
effective configs.

Not implemented: create-topic policies, quotas.

Authorization (with an authorizer): CREATE on the cluster or on the topic, else
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize, authorize_cluster
from broker.auth.acl import AclOperation, ResourceType
from protocol.codec import ZERO_UUID
from protocol.errors import (
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
)
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from replication.metadata.controller import TopicPlan

logger = logging.getLogger("samsa.broker.apis.create_topics")

DEFAULT_CONFIG_SOURCE = 5  # DescribeConfigs ConfigSource.DEFAULT_CONFIG
TOPIC_CONFIG_SOURCE = 1  # ConfigSource.TOPIC_CONFIG


def handle(context: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    names = [topic.name for topic in request.topics]
    duplicates = {name for name in names if names.count(name) > 1}
    response = CreateTopicsResponse()
    for name in sorted(duplicates):
        response.topics.append(_failed(name, InvalidRequestError("Duplicate topic name.")))
    may_create_any = authorize_cluster(context, AclOperation.CREATE)
    for topic in request.topics:
        if topic.name in duplicates:
            continue
        if may_create_any or authorize(context, AclOperation.CREATE, ResourceType.TOPIC, topic.name):
            response.topics.append(_create(context, topic, request.validate_only))
        else:
            response.topics.append(_failed(topic.name, TopicAuthorizationFailedError()))
    return response


def _create(context: RequestContext, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    try:
        plan = context.broker.replica_manager.create_topic(
            topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            configs={config.name: config.value for config in topic.configs},
            assignments=[(a.partition_index, a.broker_ids) for a in topic.assignments],
            validate_only=validate_only,
        )
    except KafkaError as error:
        return _failed(topic.name, error)
    except Exception:
        logger.exception("creating topic %r failed", topic.name)
        return _failed(topic.name, UnknownServerError())
    return _created(topic, plan)


def _created(topic: CreatableTopic, plan: TopicPlan) -> CreatableTopicResult:
    explicit = {config.name for config in topic.configs if config.value is not None}
    return CreatableTopicResult(
        name=topic.name,
        topic_id=plan.topic_id,
        error_code=0,
        error_message=None,
        num_partitions=plan.num_partitions,
        replication_factor=plan.replication_factor,
        configs=[
            CreatableTopicConfigs(
                name=key, value=value, read_only=False, is_sensitive=False,
                config_source=TOPIC_CONFIG_SOURCE if key in explicit else DEFAULT_CONFIG_SOURCE,
            )
            for key, value in sorted(plan.config.to_properties().items())
        ],
    )


def _failed(name: str, error: KafkaError) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=name, topic_id=ZERO_UUID, error_code=error.code, error_message=error.message or None
    )


def error_response(request: CreateTopicsRequest, error: KafkaError) -> CreateTopicsResponse:
    return CreateTopicsResponse(topics=[_failed(topic.name, error) for topic in request.topics])


SPEC = register(
    ApiSpec(
        api_key=CreateTopicsRequest.API_KEY,
        min_version=2,
        max_version=CreateTopicsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="CreateTopics",
    )
)
