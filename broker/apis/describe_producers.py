"""DescribeProducers: v0–v0 (KIP-664, what ``kafka-transactions describe-producers`` and
``find-hanging`` ask).

Per partition, as Kafka's ``KafkaApis.handleDescribeProducersRequest`` and
``Partition.activeProducerState``: every producer the partition's producer state holds (not yet
expired by ``producer.id.expiration.ms``) with its epoch, last sequence, last timestamp,
coordinator epoch and the first offset of its open transaction (-1: none). Any replica that hosts
the partition answers, leader or follower, as Kafka's (the admin client asks the leader unless
told a broker id).

Errors: an invalid topic name -> INVALID_TOPIC_EXCEPTION, a topic the image lacks ->
UNKNOWN_TOPIC_OR_PARTITION, for all of its partitions; a partition this node does not host ->
NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION when the topic has no such partition).

Authorization (with an authorizer): each topic needs READ, else its partitions answer
TOPIC_AUTHORIZATION_FAILED.

State: read from the partitions' logs on the broker's event loop, which owns them.
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
    UnknownTopicOrPartitionError,
)
from protocol.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
from protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from replication.metadata.controller import validate_topic_name
from storage.producer_state import ProducerStateEntry

logger = logging.getLogger("samsa.broker.apis.describe_producers")

NO_TRANSACTION = -1


def handle(context: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(topics=[_topic(context, topic) for topic in request.topics])


def _topic(context: RequestContext, topic: TopicRequest) -> TopicResponse:
    error = _topic_error(context, topic.name)
    if error is not None:
        return _failed_topic(topic, error)
    return TopicResponse(name=topic.name, partitions=[
        _partition(context, topic.name, index) for index in topic.partition_indexes])


def _topic_error(context: RequestContext, name: str) -> KafkaError | None:
    """Kafka's order: the name's validity, then READ, then the topic's existence."""
    try:
        validate_topic_name(name)
    except KafkaError as error:
        return error
    if not authorize(context, AclOperation.READ, ResourceType.TOPIC, name):
        return TopicAuthorizationFailedError()
    if context.broker.replica_manager.topic_by_name(name) is None:
        return UnknownTopicOrPartitionError()
    return None


def _partition(context: RequestContext, topic: str, index: int) -> PartitionResponse:
    try:
        partition = context.broker.replica_manager.partition_or_error(topic, index)
        producers = partition.log.producer_state.producers.values()
        return PartitionResponse(partition_index=index,
                                 active_producers=[_described(entry) for entry in producers])
    except KafkaError as error:
        return _failed(index, error)
    except Exception:
        logger.exception("describing the producers of %s-%d failed", topic, index)
        return _failed(index, UnknownServerError())


def _described(entry: ProducerStateEntry) -> ProducerState:
    first_offset = entry.current_txn_first_offset
    return ProducerState(
        producer_id=entry.producer_id,
        producer_epoch=entry.producer_epoch,
        last_sequence=entry.last_sequence,
        last_timestamp=entry.last_timestamp,
        coordinator_epoch=entry.coordinator_epoch,
        current_txn_start_offset=first_offset if first_offset >= 0 else NO_TRANSACTION,
    )


def _failed(index: int, error: KafkaError) -> PartitionResponse:
    return PartitionResponse(partition_index=index, error_code=error.code,
                             error_message=str(error) or None)


def _failed_topic(topic: TopicRequest, error: KafkaError) -> TopicResponse:
    return TopicResponse(name=topic.name,
                         partitions=[_failed(index, error) for index in topic.partition_indexes])


def error_response(request: DescribeProducersRequest, error: KafkaError) -> DescribeProducersResponse:
    return DescribeProducersResponse(topics=[_failed_topic(topic, error) for topic in request.topics])


SPEC = register(
    ApiSpec(
        api_key=DescribeProducersRequest.API_KEY,
        min_version=0,
        max_version=DescribeProducersRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeProducers",
    )
)
