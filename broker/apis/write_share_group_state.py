"""WriteShareGroupState: v0–v1 (KIP-932; what Kafka 4.3.1 serves).

A share partition's leader persists a change of a share partition's state (its start offset,
the state batches that changed; v1: the delivery-complete count) with the share coordinator,
the leader of the share partition's ``__share_group_state`` partition
(``broker.share.coordinator_service``). Answered per share partition once the record is
committed; errors: ``broker.share.state_requests`` (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST,
CLUSTER_AUTHORIZATION_FAILED).

Not as Kafka: a write to a share partition never initialized creates its state (Kafka answers
INVALID_REQUEST), and the topic id is not checked against the metadata (Kafka answers
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition it does not know).
"""

from __future__ import annotations

import itertools

from broker.apis import ApiSpec, RequestContext, register
from broker.share.coordinator_service import ShareCoordinatorService
from broker.share.state_records import SharePartitionKey
from broker.share.state_requests import each_share_partition, error_results
from broker.share.values import StateBatch
from protocol.errors import KafkaError
from protocol.messages.write_share_group_state_request import WriteShareGroupStateRequest
from protocol.messages.write_share_group_state_response import (
    PartitionResult,
    WriteShareGroupStateResponse,
    WriteStateResult,
)


async def handle(context: RequestContext, request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    entries = [(topic.topic_id, partition) for topic in request.topics for partition in topic.partitions]

    async def write(coordinator: ShareCoordinatorService, key: SharePartitionKey, position: int) -> None:
        data = entries[position][1]
        await coordinator.write_state(
            key, state_epoch=data.state_epoch, leader_epoch=data.leader_epoch,
            start_offset=data.start_offset,
            state_batches=tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                for b in data.state_batches),
            delivery_complete_count=data.delivery_complete_count if context.api_version >= 1 else -1,
        )

    outcomes = await each_share_partition(
        context, request.group_id, [(topic_id, data.partition) for topic_id, data in entries], write)
    return WriteShareGroupStateResponse(
        results=error_results(request.topics, outcomes, WriteStateResult, PartitionResult))


def error_response(request: WriteShareGroupStateRequest, error: KafkaError) -> WriteShareGroupStateResponse:
    return WriteShareGroupStateResponse(results=error_results(
        request.topics, itertools.repeat(error), WriteStateResult, PartitionResult))


SPEC = register(
    ApiSpec(
        api_key=WriteShareGroupStateRequest.API_KEY,
        min_version=0,
        max_version=WriteShareGroupStateRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="WriteShareGroupState",
    )
)
