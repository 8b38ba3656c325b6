"""Produce: v3–v11.

acks 0, 1 and -1 (all): on a single node the ISR is this node, so the high watermark reaches the
log end offset in the append itself and acks=-1 answers at once (the delayed produce of a
replicated partition comes with replication). Errors are per partition — one bad partition
never fails the others: UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (Kafka's answer
to a write to an internal topic), CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
RECORD_LIST_TOO_LARGE (more bytes than ``segment.bytes``), INVALID_TIMESTAMP,
KAFKA_STORAGE_ERROR; INVALID_REQUIRED_ACKS for the whole request. With acks=0 nothing is sent
back, and an error closes the connection (as Kafka does, so the producer notices).

Idempotent producers (``storage.producer_state``): OUT_OF_ORDER_SEQUENCE_NUMBER,
INVALID_PRODUCER_EPOCH, and INVALID_TXN_STATE for a transactional batch. A retried batch (a
duplicate of one of the producer's last 5) is answered as Kafka does: error NONE with the
original base offset, and nothing is appended. A producer whose state is gone (expired) simply
starts again: UNKNOWN_PRODUCER_ID is never returned (KIP-360).

Not implemented: transactions, quotas (throttle_time_ms is 0).
"""

from __future__ import annotations

import logging

from broker.apis import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    ApiSpec,
    HandlerResult,
    RequestContext,
    register,
)
from protocol.errors import (
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicExceptionError,
    KafkaError,
    RecordListTooLargeError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest
from protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from replication.metadata.controller import is_internal
from replication.partition import Waiter

logger = logging.getLogger("samsa.broker.apis.produce")


def handle(context: RequestContext, request: ProduceRequest) -> HandlerResult:
    if request.acks not in (-1, 0, 1):
        return error_response(request, InvalidRequiredAcksError())
    waiters: list[Waiter] = []
    response = ProduceResponse()
    failed = False
    for topic in request.topic_data:
        answers = TopicProduceResponse(name=topic.name)
        for data in topic.partition_data:
            answer = _append(context, topic.name, data, waiters)
            failed = failed or answer.error_code != 0
            answers.partition_responses.append(answer)
        response.responses.append(answers)
    context.broker.wake(waiters)
    if request.acks == 0:
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    return response


def _append(
    context: RequestContext, topic: str, data: PartitionProduceData, waiters: list[Waiter]
) -> PartitionProduceResponse:
    try:
        return _append_or_raise(context, topic, data, waiters)
    except KafkaError as error:
        return _failed(data.index, error)
    except Exception:
        logger.exception("produce to %s-%d failed", topic, data.index)
        return _failed(data.index, UnknownServerError())


def _append_or_raise(
    context: RequestContext, topic: str, data: PartitionProduceData, waiters: list[Waiter]
) -> PartitionProduceResponse:
    if is_internal(topic):
        raise InvalidTopicExceptionError(f"Cannot append to internal topic {topic}")
    partition = context.broker.replica_manager.partition(topic, data.index)
    if partition is None:
        raise UnknownTopicOrPartitionError()
    if data.records is None:
        raise InvalidRecordError("produce request carries no record batches")
    if len(data.records) > partition.log.config.segment_bytes:
        raise RecordListTooLargeError(
            f"{len(data.records)} bytes of records exceed segment.bytes "
            f"({partition.log.config.segment_bytes})"
        )
    result, woken = partition.append_as_leader(data.records)
    waiters += woken
    if result.flush_due:
        context.broker.flush_in_background(partition.log)
    return PartitionProduceResponse(
        index=data.index,
        error_code=0,
        base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
    )


def _failed(index: int, error: KafkaError) -> PartitionProduceResponse:
    record_errors = [
        BatchIndexAndErrorMessage(batch_index=batch_index, batch_index_error_message=message)
        for batch_index, message in getattr(error, "record_errors", ())
    ]
    return PartitionProduceResponse(
        index=index, error_code=error.code, base_offset=-1, error_message=error.message or None,
        record_errors=record_errors,
    )


def error_response(request: ProduceRequest, error: KafkaError) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=topic.name,
                partition_responses=[_failed(data.index, error) for data in topic.partition_data],
            )
            for topic in request.topic_data
        ]
    )


SPEC = register(
    ApiSpec(
        api_key=ProduceRequest.API_KEY,
        min_version=3,
        max_version=ProduceRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="Produce",
    )
)
