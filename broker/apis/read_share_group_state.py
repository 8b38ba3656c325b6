"""ReadShareGroupState: v0–v0 (KIP-932; what Kafka 4.3.1 serves).

A share partition's new leader reads the share partition's state from the share coordinator
(``broker.share.coordinator_service``) and fences older leaders at its leader epoch (in
memory, as Kafka). Per share partition: the state epoch, start offset and state batches; a
share partition with no state: INVALID_REQUEST with ``UNINITIALIZED_READ_MESSAGE`` (Kafka's
answer); FENCED_LEADER_EPOCH below the highest leader epoch seen; the other errors:
``broker.share.state_requests``. The answer waits until what it reports is committed.

Not as Kafka: the topic id is not checked against the metadata (Kafka answers
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition it does not know).
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.share.coordinator_service import ShareCoordinatorService
from broker.share.state_records import SharePartitionKey
from broker.share.state_requests import (
    UNINITIALIZED_READ_MESSAGE,
    each_share_partition,
    error_fields,
)
from broker.share.values import ShareSnapshot
from protocol.errors import InvalidRequestError, KafkaError
from protocol.messages.read_share_group_state_request import ReadShareGroupStateRequest
from protocol.messages.read_share_group_state_response import (
    PartitionResult,
    ReadShareGroupStateResponse,
    ReadStateResult,
    StateBatch,
)


async def handle(context: RequestContext, request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    entries = [(topic.topic_id, partition) for topic in request.topics for partition in topic.partitions]

    async def read(coordinator: ShareCoordinatorService, key: SharePartitionKey, position: int) -> ShareSnapshot:
        snapshot = await coordinator.read_state(key, leader_epoch=entries[position][1].leader_epoch)
        if snapshot is None:
            raise InvalidRequestError(UNINITIALIZED_READ_MESSAGE)
        return snapshot

    outcomes = await each_share_partition(
        context, request.group_id, [(topic_id, data.partition) for topic_id, data in entries], read)
    response = ReadShareGroupStateResponse()
    position = 0
    for topic in request.topics:
        result = ReadStateResult(topic_id=topic.topic_id)
        for data in topic.partitions:
            outcome = outcomes[position]
            code, message = error_fields(outcome)
            answer = PartitionResult(partition=data.partition, error_code=code, error_message=message)
            if isinstance(outcome, ShareSnapshot):
                answer.state_epoch = outcome.state_epoch
                answer.start_offset = outcome.start_offset
                answer.state_batches = [StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                   delivery_state=b.delivery_state,
                                                   delivery_count=b.delivery_count)
                                        for b in outcome.state_batches]
            else:
                answer.state_epoch, answer.start_offset = 0, -1
            result.partitions.append(answer)
            position += 1
        response.results.append(result)
    return response


def error_response(request: ReadShareGroupStateRequest, error: KafkaError) -> ReadShareGroupStateResponse:
    return ReadShareGroupStateResponse(results=[
        ReadStateResult(topic_id=topic.topic_id, partitions=[
            PartitionResult(partition=data.partition, error_code=error.code, error_message=error.message or None,
                            state_epoch=0, start_offset=-1)
            for data in topic.partitions])
        for topic in request.topics])


SPEC = register(
    ApiSpec(
        api_key=ReadShareGroupStateRequest.API_KEY,
        min_version=0,
        max_version=ReadShareGroupStateRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ReadShareGroupState",
    )
)
