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
nothing. A request that would write more than Kafka's ``MAX_RECORDS_PER_USER_OP`` (10,000)
metadata records in all (a record per topic, per config, per partition) is refused whole
with POLICY_VIOLATION, as Kafka's controller does. v5+ responses carry the topic id, partition count, replication factor and the
effective configs.

Not implemented: create-topic policies, quotas.

Authorization (with an authorizer): CREATE on the cluster or on the topic, else
TOPIC_AUTHORIZATION_FAILED.

Each change is proposed to the controller (``replication.controller``); the response is sent once
they are committed and this node's new logs are created (on the storage worker, off the loop).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize, authorize_cluster
from broker.auth.acl import AclOperation, ResourceType
from broker.commits import refusal, when_committed
from protocol.codec import ZERO_UUID
from protocol.errors import (
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
)
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from replication.controller.interface import NewTopic
from replication.controller.proposal import Proposal
from replication.metadata.controller import MAX_RECORDS_PER_USER_OP, TopicPlan

DEFAULT_CONFIG_SOURCE = 5  # DescribeConfigs ConfigSource.DEFAULT_CONFIG
TOPIC_CONFIG_SOURCE = 1  # ConfigSource.TOPIC_CONFIG


def handle(
    context: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse | Awaitable[CreateTopicsResponse]:
    names = [topic.name for topic in request.topics]
    duplicates = {name for name in names if names.count(name) > 1}
    refused = [_failed(name, InvalidRequestError("Duplicate topic name.")) for name in sorted(duplicates)]
    if _records_at_most(request, context.broker.config.num_partitions) > MAX_RECORDS_PER_USER_OP:
        too_large = PolicyViolationError("Unable to perform excessively large batch operation.")
        return CreateTopicsResponse(topics=refused + [
            _failed(topic.name, too_large) for topic in request.topics if topic.name not in duplicates])
    may_create_any = authorize_cluster(context, AclOperation.CREATE)
    outcomes = [
        (topic, _propose(context, topic, request.validate_only)
         if may_create_any or authorize(context, AclOperation.CREATE, ResourceType.TOPIC, topic.name)
         else Proposal[TopicPlan].refused(TopicAuthorizationFailedError()))
        for topic in request.topics if topic.name not in duplicates
    ]
    return when_committed(
        [proposal for _, proposal in outcomes],
        lambda: CreateTopicsResponse(
            topics=refused + [_outcome(topic, proposal) for topic, proposal in outcomes]),
        settled=lambda: context.broker.replica_manager.settled(
            topic.name for topic, _ in outcomes))


def _records_at_most(request: CreateTopicsRequest, default_num_partitions: int) -> int:
    """How many metadata records creating every topic of ``request`` writes, at most: Kafka's
    controller bounds one request's records (``MAX_RECORDS_PER_USER_OP``) and refuses the
    whole request beyond it, so a request of many huge topics cannot pass topic by topic."""
    total = 0
    for topic in request.topics:
        partitions = (len(topic.assignments) if topic.assignments else
                      default_num_partitions if topic.num_partitions == -1 else
                      max(topic.num_partitions, 0))
        total += 1 + len(topic.configs) + partitions
    return total


def _propose(context: RequestContext, topic: CreatableTopic, validate_only: bool) -> Proposal[TopicPlan]:
    new_topic = NewTopic(
        topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        configs={config.name: config.value for config in topic.configs},
        assignments=[(a.partition_index, a.broker_ids) for a in topic.assignments],
    )
    return context.broker.controller.create_topics([new_topic], validate_only=validate_only)[0]


def _outcome(topic: CreatableTopic, proposal: Proposal[TopicPlan]) -> CreatableTopicResult:
    error = refusal(proposal, f"creating topic {topic.name!r}")
    return _created(topic, proposal.result()) if error is None else _failed(topic.name, error)


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
