"""AlterPartitionReassignments: v0–v0 (KIP-455).

Each partition names its target replicas, or null to cancel the reassignment in progress. The
controller plans every partition against its committed image
(``replication.controller.reassignment``) and writes the changes as one batch; the answer comes
once it is committed, with Kafka's per-partition errors: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (empty target, a broker named twice or not registered, a cancel that
would need an unclean election the topic does not allow), NO_REASSIGNMENT_IN_PROGRESS (cancel
with none). In a KRaft cluster the request is forwarded to the active controller.

What "completes" means today: a reassignment completes when every target replica is in the ISR.
A target that only reorders the replicas, drops replicas, or adds replicas already in the ISR
completes in the same record (the metadata follows at once: replicas = target, the dropped
replicas leave the ISR, a new leader if the old one was dropped). A target that adds a replica
not in the ISR stays in progress (ListPartitionReassignments shows it, adding/removing replicas
set, the new replica already hosts the partition) until the leader adds it to the ISR with
AlterPartition — which needs the replica data plane (followers fetching from the leader), not
built yet: until then such a reassignment stays in progress and can be cancelled.

Samsa's single node: no broker is registered, so the only valid target is [this node], which
is what the partition already has (a no-op answered NONE); any other broker is
INVALID_REPLICA_ASSIGNMENT, as Kafka answers for a broker that is not registered.

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for
every partition. An empty request is answered at once with no responses (Kafka's controller).
"""

from __future__ import annotations

from collections.abc import Iterator

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from broker.commits import refusal, when_committed
from protocol.errors import ClusterAuthorizationFailedError, KafkaError
from protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from replication.controller.reassignment import ReassignmentResult, ReassignmentTarget


def handle(context: RequestContext, request: AlterPartitionReassignmentsRequest) -> HandlerResult:
    if not authorize_cluster(context, AclOperation.ALTER):
        return error_response(request, ClusterAuthorizationFailedError())
    if not request.topics:
        return AlterPartitionReassignmentsResponse(error_message=None)
    targets: list[ReassignmentTarget] = [
        (topic.name, [(p.partition_index, p.replicas) for p in topic.partitions])
        for topic in request.topics
    ]
    proposal = context.broker.controller.alter_partition_reassignments(targets)

    def respond() -> AlterPartitionReassignmentsResponse:
        error = refusal(proposal, "AlterPartitionReassignments")
        if error is not None:
            return error_response(request, error)
        return AlterPartitionReassignmentsResponse(
            error_message=None, responses=list(_topics(request, iter(proposal.result()))))

    return when_committed([proposal], respond)


def _topics(request: AlterPartitionReassignmentsRequest,
            results: Iterator[ReassignmentResult]) -> Iterator[ReassignableTopicResponse]:
    """The results, in request order, grouped as the request's topics are."""
    for topic in request.topics:
        partitions = []
        for _ in topic.partitions:
            result = next(results)
            partitions.append(ReassignablePartitionResponse(
                partition_index=result.partition_index, error_code=result.error_code,
                error_message=result.error_message))
        yield ReassignableTopicResponse(name=topic.name, partitions=partitions)


def error_response(
    request: AlterPartitionReassignmentsRequest, error: KafkaError
) -> AlterPartitionReassignmentsResponse:
    message = error.message or None
    return AlterPartitionReassignmentsResponse(
        error_code=error.code, error_message=message,
        responses=[
            ReassignableTopicResponse(name=topic.name, partitions=[
                ReassignablePartitionResponse(partition_index=partition.partition_index,
                                              error_code=error.code, error_message=message)
                for partition in topic.partitions])
            for topic in request.topics
        ],
    )


SPEC = register(
    ApiSpec(
        api_key=AlterPartitionReassignmentsRequest.API_KEY,
        min_version=0,
        max_version=AlterPartitionReassignmentsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AlterPartitionReassignments",
    )
)
