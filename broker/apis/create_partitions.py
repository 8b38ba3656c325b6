"""CreatePartitions: v0–v3.

Per topic, as Kafka's controller (``ReplicationControlManager.createPartitions``): a name given
twice -> INVALID_REQUEST "Duplicate topic name."; a missing topic -> UNKNOWN_TOPIC_OR_PARTITION;
a count equal to or below the current one -> INVALID_PARTITIONS (increase only); manual
assignments must name one new partition each, and on this single node each must be exactly
``[node.id]`` -> INVALID_REPLICA_ASSIGNMENT otherwise, with Kafka's messages. A request that
would add more than ``MAX_RECORDS_PER_USER_OP`` (10,000) partitions in all is refused whole with
POLICY_VIOLATION, as Kafka's controller does. The new
PartitionRecords are fsynced in the metadata log, then the new partitions' logs are created, so
Metadata shows them at once. ``validate_only`` checks everything and writes nothing.

Not implemented: quotas (THROTTLING_QUOTA_EXCEEDED), ACLs; ``timeout_ms`` is not needed (the
change is complete when the response is sent).

Authorization (with an authorizer): ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED.

Each change is proposed to the controller (``replication.controller``); the response is sent once
they are committed (at once on a single node).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.commits import refusal, when_committed
from protocol.errors import (
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
)
from protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from replication.controller.interface import NewPartitions
from replication.controller.proposal import Proposal
from replication.metadata.controller import MAX_RECORDS_PER_USER_OP


def handle(
    context: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse | Awaitable[CreatePartitionsResponse]:
    names = [topic.name for topic in request.topics]
    duplicates = {name for name in names if names.count(name) > 1}
    refused = [_result(name, InvalidRequestError("Duplicate topic name.")) for name in sorted(duplicates)]
    if _new_partitions_at_most(context, request) > MAX_RECORDS_PER_USER_OP:
        too_large = PolicyViolationError("Unable to perform excessively large batch operation.")
        return CreatePartitionsResponse(results=refused + [
            _result(name, too_large) for name in names if name not in duplicates])
    outcomes = [(topic.name, _propose(context, topic, request.validate_only))
                for topic in request.topics if topic.name not in duplicates]
    return when_committed(
        [proposal for _, proposal in outcomes],
        lambda: CreatePartitionsResponse(
            results=refused + [_result(name, refusal(proposal, f"creating partitions of {name!r}"))
                               for name, proposal in outcomes]),
        settled=lambda: context.broker.replica_manager.settled(name for name, _ in outcomes))


def _new_partitions_at_most(context: RequestContext, request: CreatePartitionsRequest) -> int:
    """How many PartitionRecords the request writes at most: Kafka's controller bounds one
    request's records (``MAX_RECORDS_PER_USER_OP``) and refuses the whole request beyond it."""
    topics = context.broker.replica_manager.image.topics_by_name
    return sum(max(topic.count - len(topics[topic.name].partitions), 0)
               for topic in request.topics if topic.name in topics)


def _propose(
    context: RequestContext, topic: CreatePartitionsTopic, validate_only: bool
) -> Proposal[None]:
    if not authorize(context, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
        return Proposal.refused(TopicAuthorizationFailedError())
    assignments = None
    if topic.assignments is not None:
        assignments = [list(assignment.broker_ids) for assignment in topic.assignments]
    request = NewPartitions(topic.name, topic.count, assignments)
    return context.broker.controller.create_partitions([request], validate_only=validate_only)[0]


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
