"""SamsaConditionalProduce: v0–v0.

Samsa's own API (key 10001, schema in ``protocol/schemas/``): a produce whose partitions each
carry conditions the append must meet — optimistic concurrency for event sourcing. Per
partition, ``expected_end_offset`` (-1: none) is the log end offset the partition must have, and
``condition_key`` (null: none) with ``expected_key_offset`` names where the last record with
that key must be (-1: no record may have it; ``storage.log_keys``). The leader checks them in
the same synchronous call that appends (``Log.append_as_leader``, on the event loop that owns
the log, after validation and the idempotent producer's duplicate check, before offsets are
handed out), so two appends expecting the same offset never both succeed; when a condition
does not hold the partition answers OFFSET_CONFLICT (10000, Samsa's own code) with
``current_offset``, the actual log end offset or the actual offset of the key's last record,
and nothing is written. A retried idempotent batch that was already appended answers its
original offsets, not a conflict: an append is decided once.

Everything else is Produce's flow (``broker.apis.produce``): authorization, the append entry
point (validation, idempotence, transaction verification as Produce v11), ``flush.messages``,
and acks=-1 waiting in the produce purgatory until the ISR has the append — followers
replicate it like any batch, so a conditional append acknowledged with acks=-1 survives a
failover, and only the leader decides (NOT_LEADER_OR_FOLLOWER elsewhere). Errors are Produce's,
per partition. acks must be 1 or -1 (INVALID_REQUIRED_ACKS for 0: a conflict must be answered).
Kafka clients skip the unknown key in ApiVersions.

A key condition looks the key up through the partition's key indexes (``storage.log_keys``);
the first lookup of a log loads or builds them, which the handler does on a worker thread
before the append, as SamsaReadKey does.

Not implemented: leader hints (KIP-951) in the answer; quotas (throttle_time_ms is 0).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.apis.produce import Appended, append_and_answer, denied_topics
from protocol.errors import (
    InvalidRequiredAcksError,
    KafkaError,
    OffsetConflictError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from protocol.messages.samsa_conditional_produce_request import (
    ConditionalProducePartitionData,
    SamsaConditionalProduceRequest,
)
from protocol.messages.samsa_conditional_produce_response import (
    ConditionalProducePartitionResponse,
    ConditionalProduceTopicResponse,
    SamsaConditionalProduceResponse,
)
from replication.append import PartitionAppend, TopicPartition
from storage.log import AppendCondition, Log

logger = logging.getLogger("samsa.broker.apis.conditional_produce")

# The Produce version whose transaction errors this API answers (TRANSACTION_ABORTABLE).
PRODUCE_VERSION = 11


def handle(context: RequestContext, request: SamsaConditionalProduceRequest) -> HandlerResult:
    if request.acks not in (-1, 1):
        return error_response(request, InvalidRequiredAcksError(
            f"acks {request.acks}: a conditional produce needs acks 1 or -1"))
    try:
        denied = denied_topics(context, request)
    except TransactionalIdAuthorizationFailedError as error:
        return error_response(request, error)

    def build(appended: Appended,
              errors: dict[TopicPartition, KafkaError | None]) -> SamsaConditionalProduceResponse:
        return _build(request, denied, appended, errors)

    conditions = [_condition(data) for topic in request.topic_data if topic.name not in denied
                  for data in topic.partition_data]
    unprepared = _unprepared_logs(context, request, denied)
    if not unprepared:
        return append_and_answer(context, request, denied, build,
                                 produce_version=PRODUCE_VERSION, conditions=conditions)
    return _prepare_then_append(unprepared, lambda: append_and_answer(
        context, request, denied, build, produce_version=PRODUCE_VERSION, conditions=conditions))


def _unprepared_logs(context: RequestContext, request: SamsaConditionalProduceRequest,
                     denied: set[str]) -> list[Log]:
    """The logs of this node's partitions with a key condition whose key indexes are not all
    loaded: the first key lookup of a log builds them, which is done off the loop first."""
    logs = []
    for topic in request.topic_data:
        if topic.name in denied:
            continue
        for data in topic.partition_data:
            if data.condition_key is None:
                continue
            partition = context.broker.replica_manager.partition(topic.name, data.index)
            if partition is not None and not partition.log.key_reads_prepared():
                logs.append(partition.log)
    return logs


async def _prepare_then_append(
    logs: list[Log], append: Callable[[], SamsaConditionalProduceResponse
                                      | Awaitable[SamsaConditionalProduceResponse]],
) -> SamsaConditionalProduceResponse:
    loop = asyncio.get_running_loop()
    for log in logs:
        try:
            await loop.run_in_executor(None, log.prepare_key_reads)
        except Exception:  # the append's own lookup builds what is missing, or answers the error
            logger.exception("preparing the key indexes of %s failed", log.directory.name)
    answer = append()
    return await answer if inspect.isawaitable(answer) else answer


def _condition(data: ConditionalProducePartitionData) -> AppendCondition:
    """Any negative offset means -1 (no end offset condition; no record with the key)."""
    return AppendCondition(
        expected_end_offset=max(data.expected_end_offset, -1),
        key=data.condition_key,
        expected_key_offset=max(data.expected_key_offset, -1),
    )


def _build(
    request: SamsaConditionalProduceRequest, denied: set[str], appended: Appended,
    errors: dict[TopicPartition, KafkaError | None],
) -> SamsaConditionalProduceResponse:
    outcomes = iter(appended)
    response = SamsaConditionalProduceResponse()
    for topic in request.topic_data:
        answers = ConditionalProduceTopicResponse(name=topic.name)
        for data in topic.partition_data:
            if topic.name in denied:
                answer = _failed(data.index, TopicAuthorizationFailedError())
            else:
                key, outcome = next(outcomes)
                error = errors.get(key)
                answer = _answer(data.index, outcome) if error is None else _failed(data.index, error)
            answers.partition_responses.append(answer)
        response.responses.append(answers)
    return response


def _answer(index: int, outcome: PartitionAppend) -> ConditionalProducePartitionResponse:
    if outcome.error is not None:
        return _failed(index, outcome.error)
    result = outcome.result
    assert result is not None
    return ConditionalProducePartitionResponse(
        index=index, base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time_ms, log_start_offset=result.log_start_offset)


def _failed(index: int, error: KafkaError) -> ConditionalProducePartitionResponse:
    current = error.current_offset if isinstance(error, OffsetConflictError) else -1
    return ConditionalProducePartitionResponse(
        index=index, error_code=error.code, error_message=error.message or None,
        current_offset=current)


def error_response(
    request: SamsaConditionalProduceRequest, error: KafkaError
) -> SamsaConditionalProduceResponse:
    return SamsaConditionalProduceResponse(responses=[
        ConditionalProduceTopicResponse(
            name=topic.name,
            partition_responses=[_failed(data.index, error) for data in topic.partition_data])
        for topic in request.topic_data
    ])


SPEC = register(
    ApiSpec(
        api_key=SamsaConditionalProduceRequest.API_KEY,
        min_version=0,
        max_version=SamsaConditionalProduceRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="SamsaConditionalProduce",
    )
)
