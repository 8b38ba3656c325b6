"""ReadShareGroupStateSummary: v0–v1 (KIP-932; what Kafka 4.3.1 serves).

The group coordinator's view of share partitions' state (DescribeShareGroupOffsets): per
share partition its state epoch, leader epoch and start offset (v1: the delivery-complete
count) from the share coordinator (``broker.share.coordinator_service``); no fence is checked
or moved. A share partition with no state: start offset -1, epochs 0, count -1 (Kafka's
answer). Errors: ``broker.share.state_requests``.

Not as Kafka: the topic id is not checked against the metadata.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.share.coordinator_service import ShareCoordinatorService
from broker.share.persister import ShareStateSummary
from broker.share.state_records import SharePartitionKey
from broker.share.state_requests import each_share_partition, error_fields
from protocol.errors import KafkaError
from protocol.messages.read_share_group_state_summary_request import (
    ReadShareGroupStateSummaryRequest,
)
from protocol.messages.read_share_group_state_summary_response import (
    PartitionResult,
    ReadShareGroupStateSummaryResponse,
    ReadStateSummaryResult,
)

UNINITIALIZED = ShareStateSummary(state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1)


async def handle(
    context: RequestContext, request: ReadShareGroupStateSummaryRequest
) -> ReadShareGroupStateSummaryResponse:
    entries = [(topic.topic_id, partition) for topic in request.topics for partition in topic.partitions]

    async def summary(coordinator: ShareCoordinatorService, key: SharePartitionKey, position: int) -> ShareStateSummary:
        found = await coordinator.read_summary(key, leader_epoch=entries[position][1].leader_epoch)
        return UNINITIALIZED if found is None else found

    outcomes = await each_share_partition(
        context, request.group_id, [(topic_id, data.partition) for topic_id, data in entries], summary)
    response = ReadShareGroupStateSummaryResponse()
    position = 0
    for topic in request.topics:
        result = ReadStateSummaryResult(topic_id=topic.topic_id)
        for data in topic.partitions:
            outcome = outcomes[position]
            code, message = error_fields(outcome)
            found = outcome if isinstance(outcome, ShareStateSummary) else UNINITIALIZED
            result.partitions.append(PartitionResult(
                partition=data.partition, error_code=code, error_message=message,
                state_epoch=found.state_epoch, leader_epoch=found.leader_epoch,
                start_offset=found.start_offset, delivery_complete_count=found.delivery_complete_count))
            position += 1
        response.results.append(result)
    return response


def error_response(
    request: ReadShareGroupStateSummaryRequest, error: KafkaError
) -> ReadShareGroupStateSummaryResponse:
    return ReadShareGroupStateSummaryResponse(results=[
        ReadStateSummaryResult(topic_id=topic.topic_id, partitions=[
            PartitionResult(partition=data.partition, error_code=error.code, error_message=error.message or None,
                            start_offset=-1)
            for data in topic.partitions])
        for topic in request.topics])


SPEC = register(
    ApiSpec(
        api_key=ReadShareGroupStateSummaryRequest.API_KEY,
        min_version=0,
        max_version=ReadShareGroupStateSummaryRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ReadShareGroupStateSummary",
    )
)
