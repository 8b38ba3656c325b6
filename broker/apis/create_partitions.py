"""CreatePartitions: v0–v3.

Per topic, as Kafka's controller (``ReplicationControlManager.createPartitions``): a name given
twice -> INVALID_REQUEST "Duplicate topic name."; a missing topic -> UNKNOWN_TOPIC_OR_PARTITION;
a count equal to or below the current one -> INVALID_PARTITIONS (increase only); manual
assignments must name one new partition each, and on this single node each must be exactly
``[node.id]`` -> INVALID_REPLICA_ASSIGNMENT otherwise, with Kafka's messages. The new
PartitionRecords are fsynced in the metadata log, then the new partitions' logs are created, so
Metadata shows them at once. ``validate_only`` checks everything and writes nothing.

Not implemented: quotas (THROTTLING_QUOTA_EXCEEDED), ACLs; ``timeout_ms`` is not needed (the
change is complete when the response is sent).

Authorization (with an authorizer): ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import (
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
)
from protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

logger = logging.getLogger("samsa.broker.apis.create_partitions")


def handle(context: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    names = [topic.name for topic in request.topics]
    duplicates = {name for name in names if names.count(name) > 1}
    response = CreatePartitionsResponse()
    for name in sorted(duplicates):
        response.results.append(_result(name, InvalidRequestError("Duplicate topic name.")))
    for topic in request.topics:
        if topic.name not in duplicates:
            response.results.append(_create(context, topic, request.validate_only))
    return response


def _create(
    context: RequestContext, topic: CreatePartitionsTopic, validate_only: bool
) -> CreatePartitionsTopicResult:
    if not authorize(context, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
        return _result(topic.name, TopicAuthorizationFailedError())
    assignments = None
    if topic.assignments is not None:
        assignments = [list(assignment.broker_ids) for assignment in topic.assignments]
    try:
        context.broker.replica_manager.create_partitions(
            topic.name, topic.count, assignments=assignments, validate_only=validate_only
        )
    except KafkaError as error:
        return _result(topic.name, error)
    except Exception:
        logger.exception("creating partitions of %r failed", topic.name)
        return _result(topic.name, UnknownServerError())
    return _result(topic.name, None)


def _result(name: str, error: KafkaError | None) -> CreatePartitionsTopicResult:
    return CreatePartitionsTopicResult(
        name=name,
        error_code=0 if error is None else error.code,
        error_message=None if error is None else error.message or None,
    )


def error_response(request: CreatePartitionsRequest, error: KafkaError) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(results=[_result(t.name, error) for t in request.topics])


SPEC = register(
    ApiSpec(
        api_key=CreatePartitionsRequest.API_KEY,
        min_version=0,
        max_version=CreatePartitionsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="CreatePartitions",
    )
)
