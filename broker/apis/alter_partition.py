"""AlterPartition: v0–v3 (controller listeners only; KIP-497, KIP-841 topic ids, KIP-903 broker
epochs in the ISR).

A partition leader asks the active controller to change its ISR (and leader recovery state);
the controller checks each partition against its committed image and proposes the changes as
one batch (``replication.controller.alter_partition``), answering once they are committed with
each partition's state after the change, or its error. A request whose broker id and epoch do
not match a registration gets STALE_BROKER_EPOCH for the whole request (top-level error, no
topics, as Kafka's ``getErrorResponse``); any node that is not the active controller answers
NOT_CONTROLLER so that the leader finds the current one. Topics are named by name before v2, by
id from v2.

Not implemented: the CLUSTER_ACTION authorization Kafka requires (as for BrokerRegistration and
BrokerHeartbeat, controller listeners here serve the cluster's own nodes). Nothing in Samsa sends
this request yet: followers join the ISR when a partition is created and leave it only when the
controller fences their broker; the replica data plane will send it.
"""

from __future__ import annotations

from collections.abc import Iterator

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.commits import refusal, when_committed
from protocol.errors import KafkaError, NotControllerError
from protocol.messages.alter_partition_request import AlterPartitionRequest
from protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from replication.controller.alter_partition import AlterPartitionResult


def handle(context: RequestContext, request: AlterPartitionRequest) -> HandlerResult:
    controller = context.broker.quorum_controller
    if controller is None:
        return error_response(request, NotControllerError())
    proposal = controller.alter_partition(request, version=context.api_version)

    def respond() -> AlterPartitionResponse:
        error = refusal(proposal, f"AlterPartition from broker {request.broker_id}")
        if error is not None:
            return error_response(request, error)
        return AlterPartitionResponse(topics=list(_topics(request, iter(proposal.result()))))

    return when_committed([proposal], respond)


def _topics(request: AlterPartitionRequest,
            results: Iterator[AlterPartitionResult]) -> Iterator[TopicData]:
    """The results, in request order, grouped as the request's topics are."""
    for topic in request.topics:
        partitions = [_partition(next(results)) for _ in topic.partitions]
        yield TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id,
                        partitions=partitions)


def _partition(result: AlterPartitionResult) -> PartitionData:
    state = result.partition
    if result.error_code or state is None:
        return PartitionData(partition_index=result.partition_index, error_code=result.error_code)
    return PartitionData(
        partition_index=result.partition_index, leader_id=state.leader,
        leader_epoch=state.leader_epoch, isr=list(state.isr),
        leader_recovery_state=state.leader_recovery_state, partition_epoch=state.partition_epoch,
    )


def error_response(request: AlterPartitionRequest, error: KafkaError) -> AlterPartitionResponse:
    return AlterPartitionResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=AlterPartitionRequest.API_KEY,
        min_version=0,
        max_version=AlterPartitionRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AlterPartition",
    )
)
