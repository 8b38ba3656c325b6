"""InitializeShareGroupState: v0–v0 (KIP-932; what Kafka 4.3.1 serves).

The group coordinator creates (or, with a higher state epoch, resets) a share partition's
state at a start offset (-1: not known yet) with the share coordinator
(``broker.share.coordinator_service``): a snapshot with no in-flight records, answered per
share partition once committed. FENCED_STATE_EPOCH below the recorded state epoch; the other
errors: ``broker.share.state_requests``.

Not as Kafka: the topic id is not checked against the metadata (Kafka answers
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition it does not know), and the snapshot keeps
the leader epoch recorded before (Kafka's is -1).
"""

from __future__ import annotations

import itertools

from broker.apis import ApiSpec, RequestContext, register
from broker.share.coordinator_service import ShareCoordinatorService
from broker.share.state_records import SharePartitionKey
from broker.share.state_requests import each_share_partition, error_results
from protocol.errors import KafkaError
from protocol.messages.initialize_share_group_state_request import InitializeShareGroupStateRequest
from protocol.messages.initialize_share_group_state_response import (
    InitializeShareGroupStateResponse,
    InitializeStateResult,
    PartitionResult,
)


async def handle(
    context: RequestContext, request: InitializeShareGroupStateRequest
) -> InitializeShareGroupStateResponse:
    entries = [(topic.topic_id, partition) for topic in request.topics for partition in topic.partitions]

    async def initialize(coordinator: ShareCoordinatorService, key: SharePartitionKey, position: int) -> None:
        data = entries[position][1]
        await coordinator.initialize_state(key, state_epoch=data.state_epoch, start_offset=data.start_offset)

    outcomes = await each_share_partition(
        context, request.group_id, [(topic_id, data.partition) for topic_id, data in entries], initialize)
    return InitializeShareGroupStateResponse(
        results=error_results(request.topics, outcomes, InitializeStateResult, PartitionResult))


def error_response(
    request: InitializeShareGroupStateRequest, error: KafkaError
) -> InitializeShareGroupStateResponse:
    return InitializeShareGroupStateResponse(results=error_results(
        request.topics, itertools.repeat(error), InitializeStateResult, PartitionResult))


SPEC = register(
    ApiSpec(
        api_key=InitializeShareGroupStateRequest.API_KEY,
        min_version=0,
        max_version=InitializeShareGroupStateRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="InitializeShareGroupState",
    )
)
