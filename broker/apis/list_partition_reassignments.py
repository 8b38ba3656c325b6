"""ListPartitionReassignments: v0–v0 (KIP-455).

The reassignments in progress — partitions with adding or removing replicas — with their
current replicas and both lists, read from the committed metadata image
(``replication.controller.reassignment.list_partition_reassignments``): of every topic when
``topics`` is null, else of the named partitions, leaving out unknown topics, unknown partitions
and partitions not being reassigned (Kafka answers no error for them either). An empty
``topics`` list is answered with nothing. In a KRaft cluster the request is forwarded to the
active controller, which answers from its image as Kafka's controller does (a read: it needs no
commit); a single node answers from its own image, where no reassignment is ever in progress.

Authorization (with an authorizer): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.errors import ClusterAuthorizationFailedError, KafkaError
from protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from replication.controller.reassignment import list_partition_reassignments


def handle(
    context: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not authorize_cluster(context, AclOperation.DESCRIBE):
        return error_response(request, ClusterAuthorizationFailedError())
    wanted = (None if request.topics is None
              else [(topic.name, list(topic.partition_indexes)) for topic in request.topics])
    grouped: dict[str, list[OngoingPartitionReassignment]] = {}
    for ongoing in list_partition_reassignments(context.broker.controller.image, wanted):
        grouped.setdefault(ongoing.topic, []).append(OngoingPartitionReassignment(
            partition_index=ongoing.partition_index, replicas=list(ongoing.replicas),
            adding_replicas=list(ongoing.adding_replicas),
            removing_replicas=list(ongoing.removing_replicas)))
    return ListPartitionReassignmentsResponse(error_message=None, topics=[
        OngoingTopicReassignment(name=name, partitions=partitions)
        for name, partitions in grouped.items()])


def error_response(
    request: ListPartitionReassignmentsRequest, error: KafkaError
) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(
        error_code=error.code, error_message=error.message or None,
        topics=[OngoingTopicReassignment(name=topic.name, partitions=[
            OngoingPartitionReassignment(partition_index=index)
            for index in topic.partition_indexes]) for topic in request.topics or ()],
    )


SPEC = register(
    ApiSpec(
        api_key=ListPartitionReassignmentsRequest.API_KEY,
        min_version=0,
        max_version=ListPartitionReassignmentsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ListPartitionReassignments",
    )
)
