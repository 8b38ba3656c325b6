"""DeleteShareGroupState: v0–v0 (KIP-932; what Kafka 4.3.1 serves).

The group coordinator deletes share partitions' state (a share group deleted, or its offsets
deleted) with the share coordinator (``broker.share.coordinator_service``): tombstones,
answered per share partition once committed; a share partition with no state is answered
NONE with nothing written (as Kafka). Errors: ``broker.share.state_requests``.

Not as Kafka: two tombstones, one per record type (Kafka writes the snapshot key's only: it
deletes its topic's records instead of compacting them); the topic id is not checked against
the metadata.
"""

from __future__ import annotations

import itertools

from broker.apis import ApiSpec, RequestContext, register
from broker.share.coordinator_service import ShareCoordinatorService
from broker.share.state_records import SharePartitionKey
from broker.share.state_requests import each_share_partition, error_results
from protocol.errors import KafkaError
from protocol.messages.delete_share_group_state_request import DeleteShareGroupStateRequest
from protocol.messages.delete_share_group_state_response import (
    DeleteShareGroupStateResponse,
    DeleteStateResult,
    PartitionResult,
)


async def delete(coordinator: ShareCoordinatorService, key: SharePartitionKey, position: int) -> None:
    await coordinator.delete_state(key)


async def handle(context: RequestContext, request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    outcomes = await each_share_partition(
        context, request.group_id,
        [(topic.topic_id, data.partition) for topic in request.topics for data in topic.partitions], delete)
    return DeleteShareGroupStateResponse(
        results=error_results(request.topics, outcomes, DeleteStateResult, PartitionResult))


def error_response(request: DeleteShareGroupStateRequest, error: KafkaError) -> DeleteShareGroupStateResponse:
    return DeleteShareGroupStateResponse(results=error_results(
        request.topics, itertools.repeat(error), DeleteStateResult, PartitionResult))


SPEC = register(
    ApiSpec(
        api_key=DeleteShareGroupStateRequest.API_KEY,
        min_version=0,
        max_version=DeleteShareGroupStateRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DeleteShareGroupState",
    )
)
