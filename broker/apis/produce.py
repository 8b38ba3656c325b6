"""Produce: v3–v11.

acks 0, 1 and -1 (all): every partition goes through the broker's one append entry point
(``replication.append.ReplicaAppender``, shared with the coordinators), which checks it and
answers the long polls waiting on it. On a single node the ISR is this node, so the high
watermark reaches the log end offset in the append itself and acks=-1 answers at once; a
replicated partition's acks=-1 waits in the produce purgatory until the ISR has it (or
``timeout_ms``: REQUEST_TIMED_OUT), and is refused with NOT_ENOUGH_REPLICAS while the ISR is
smaller than ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank after the
append). A follower answers NOT_LEADER_OR_FOLLOWER, from v10 with the partition's current leader
and that leader's endpoint (KIP-951, ``broker.leader_hints``). Errors are per partition — one bad
partition never fails the others: UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (Kafka's answer
to a write to an internal topic), CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
RECORD_LIST_TOO_LARGE (more bytes than ``segment.bytes``), INVALID_TIMESTAMP,
KAFKA_STORAGE_ERROR; INVALID_REQUIRED_ACKS for the whole request. With acks=0 nothing is sent
back, and an error closes the connection (as Kafka does, so the producer notices). A failed
partition answers base offset -1 and, as Kafka's ``appendToLocalLog``, log start offset -1 for
the errors Kafka expects of an append (unknown partition, not leader, too large, corrupt,
storage) and for a failed transaction verification, else the partition's log start offset.

ApiVersions lists Produce from v0, as Kafka 4 does (KAFKA-18659): librdkafka before 2.10 (Debian's
kcat 1.7.1 has 2.0.2) compresses only if the broker lists Produce v0. A v0-v2 request is
answered UNSUPPORTED_VERSION (Kafka closes the connection instead).

Idempotent producers (``storage.producer_state``): OUT_OF_ORDER_SEQUENCE_NUMBER,
INVALID_PRODUCER_EPOCH. A retried batch (a duplicate of one of the producer's last 5) is
answered as Kafka does: error NONE with the original base offset, and nothing is appended. A
producer whose state is gone (expired) simply starts again: UNKNOWN_PRODUCER_ID is never
returned (KIP-360).

Transactional producers (KIP-890 part 1, ``transaction.partition.verification.enable``): the
first transactional batch of a transaction in a partition is appended only if the transaction
coordinator has the partition in the producer's transaction (on one node the coordinator is
asked in-process, where Kafka sends AddPartitionsToTxn v4 ``verify_only``; in a cluster, when
another broker coordinates the transactional id, the batch is not verified: no remote
verification yet); the later ones
need the transaction open in the partition at the batch's epoch. Errors, as Kafka maps them:
a partition not in the transaction → TRANSACTION_ABORTABLE (v11+; INVALID_TXN_STATE before),
a fenced epoch → INVALID_PRODUCER_EPOCH, another producer id → INVALID_PRODUCER_ID_MAPPING, a
transaction being completed → NOT_ENOUGH_REPLICAS (retried by every client), no
``transactional_id`` in the request → INVALID_TXN_STATE; a plain batch while the producer's
transaction is open → INVALID_TXN_STATE.

Authorization (with an authorizer, as Kafka's ``handleProduceRequest``): a transactional
request needs WRITE on its transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
partition); each topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED for its partitions, before
any other check). Without an authorizer this costs one attribute check per request.

Not implemented: quotas (throttle_time_ms is 0); INVALID_PRODUCER_ID_MAPPING for a request
whose transactional batches carry several producer ids (each partition is checked alone).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from broker.apis import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    ApiSpec,
    HandlerResult,
    RequestContext,
    register,
)
from broker.auth import authorize, filter_authorized
from broker.auth.acl import AclOperation, ResourceType
from broker.leader_hints import LeaderHints
from protocol.errors import (
    ErrorCode,
    InvalidRequiredAcksError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    error_for_code,
)
from protocol.messages.produce_request import ProduceRequest
from protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from protocol.records import BATCH_HEADER_SIZE, read_batch_header
from replication.append import PartitionAppend, Records, TopicPartition
from replication.partition import Partition
from storage.log import AppendCondition
from storage.producer_state import AppendOrigin

logger = logging.getLogger("samsa.broker.apis.produce")
# Kafka's ``appendToLocalLog`` answers these append errors with UNKNOWN_LOG_APPEND_INFO (log
# start offset -1); see ``_carries_log_start_offset``.
NO_LOG_START_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INVALID_TOPIC_EXCEPTION,
})
UNVERIFIED = "refused_before_append"  # the attribute marking a failed verification's error

TRANSACTION_ABORTABLE_VERSION = 11  # Produce versions above 10 take TRANSACTION_ABORTABLE
FIRST_LEADER_HINT_VERSION = 10  # KIP-951: current_leader and node_endpoints
# The hot path looks at one byte: the low byte of the first batch's int16 attributes (bytes
# 21-22 of the header), bit 4 = transactional.
_ATTRIBUTES_LOW_BYTE = 22
_TRANSACTIONAL = 0x10


def handle(context: RequestContext, request: ProduceRequest) -> HandlerResult:
    if request.acks not in (-1, 0, 1):
        return error_response(request, InvalidRequiredAcksError())
    try:
        denied = denied_topics(context, request)
    except TransactionalIdAuthorizationFailedError as error:
        return _unauthorized(request, error)

    def build(appended: Appended, errors: dict[TopicPartition, KafkaError | None]) -> ProduceResponse:
        return _build(context, request, denied, appended, errors)

    answer = append_and_answer(context, request, denied, build, produce_version=context.api_version)
    if request.acks == 0:
        assert isinstance(answer, ProduceResponse)  # acks=0 never waits
        return _acks_zero(answer)
    return answer


class PartitionData(Protocol):
    """What the produce flow reads of a partition's entry (Produce, SamsaConditionalProduce)."""

    @property
    def index(self) -> int: ...
    @property
    def records(self) -> Records | None: ...


class TopicData(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partition_data(self) -> Sequence[PartitionData]: ...


class ProduceShaped(Protocol):
    """A request shaped like Produce: the produce flow serves any of them."""

    @property
    def transactional_id(self) -> str | None: ...
    @property
    def acks(self) -> int: ...
    @property
    def timeout_ms(self) -> int: ...
    @property
    def topic_data(self) -> Sequence[TopicData]: ...


Appended = list[tuple[TopicPartition, PartitionAppend]]
Response = TypeVar("Response")


def denied_topics(context: RequestContext, request: ProduceShaped) -> set[str]:
    """The topics the principal may not write (with an authorizer; see the docstring); raises
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional id it may not write."""
    if context.broker.authorizer is None:
        return set()
    if request.transactional_id is not None and not authorize(
        context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        raise TransactionalIdAuthorizationFailedError()
    names = [topic.name for topic in request.topic_data]
    return set(names) - filter_authorized(context, AclOperation.WRITE, ResourceType.TOPIC, names)


def append_and_answer(
    context: RequestContext, request: ProduceShaped, denied: set[str],
    build: Callable[[Appended, dict[TopicPartition, KafkaError | None]], Response], *,
    produce_version: int, conditions: Sequence[AppendCondition | None] | None = None,
) -> Response | Awaitable[Response]:
    """The produce flow (acks already checked): append the authorized partitions (with their
    ``conditions``, one per appended partition in request order, if given), then ``build`` the
    answer with each partition's outcome and the error of a failed flush or replication — at
    once, or awaited when a flush or (acks=-1) replication is due. ``produce_version``: the
    Produce version whose transaction errors to answer."""
    appended = _append_all(context, request, denied, produce_version, conditions)
    flushes = _flushes(context, appended)
    replicated = None
    if request.acks == -1:
        replicated = _delay_until_replicated(context, request, appended)
    if replicated is None and not (flushes and request.acks != 0):
        return build(appended, {})
    return _answer_when_durable(appended, flushes, replicated, build)


def _flushes(
    context: RequestContext, appended: list[tuple[TopicPartition, PartitionAppend]],
) -> dict[TopicPartition, asyncio.Future[None]]:
    """``flush.messages`` reached by an append (or a retried batch whose original is not yet
    synced): the flush covering it (``broker.group_commit``), which its answer waits for."""
    flushes: dict[TopicPartition, asyncio.Future[None]] = {}
    for key, outcome in appended:
        result = outcome.result
        if outcome.error is not None or result is None or not (result.flush_due or result.duplicate):
            continue  # the common case: no flush due, no lookup
        partition = context.broker.replica_manager.partition(*key)
        if partition is None:
            continue
        log = partition.log
        if result.flush_due or log.unflushed_messages >= log.config.flush_messages:
            flushes[key] = context.broker.flush_until(log, result.last_offset + 1)
    return flushes


async def _answer_when_durable(
    appended: Appended, flushes: dict[TopicPartition, asyncio.Future[None]],
    replicated: asyncio.Future[dict[TopicPartition, KafkaError | None]] | None,
    build: Callable[[Appended, dict[TopicPartition, KafkaError | None]], Response],
) -> Response:
    """The answer once every flush and (acks=-1) the replication it waits for are done; a
    failed flush answers KAFKA_STORAGE_ERROR for its partition."""
    errors: dict[TopicPartition, KafkaError | None] = {}
    for key, flushed in flushes.items():
        try:
            await flushed
        except KafkaError as error:
            errors[key] = error
    if replicated is not None:
        for key, replication_error in (await replicated).items():
            if replication_error is not None:
                errors.setdefault(key, replication_error)
    return build(appended, errors)


def _delay_until_replicated(
    context: RequestContext, request: ProduceShaped,
    appended: list[tuple[TopicPartition, PartitionAppend]],
) -> asyncio.Future[dict[TopicPartition, KafkaError | None]] | None:
    """acks=-1 with partitions whose high watermark is short of the append: a DelayedProduce
    in the produce purgatory (``replication.append``), answered when they are replicated or at
    the request's ``timeout_ms``; None when nothing needs to wait."""
    answers: list[asyncio.Future[dict[TopicPartition, KafkaError | None]]] = []

    def done(outcomes: dict[TopicPartition, KafkaError | None]) -> None:
        if not answers[0].done():
            answers[0].set_result(outcomes)

    operation = context.broker.appender.delay_until_replicated(
        appended, timeout_ms=max(request.timeout_ms, 0), done=done)
    if operation is None:
        return None
    answer = asyncio.get_running_loop().create_future()
    answers.append(answer)
    context.broker.produce_reaper.watch(operation, list(operation.required))
    return answer


def _acks_zero(response: ProduceResponse) -> HandlerResult:
    """acks=0: no answer, or a closed connection when a partition failed."""
    failed = any(answer.error_code != 0 for topic in response.responses
                 for answer in topic.partition_responses)
    return CLOSE_CONNECTION if failed else NO_RESPONSE


def _build(
    context: RequestContext, request: ProduceRequest, denied: set[str],
    appended: list[tuple[TopicPartition, PartitionAppend]],
    replicated: dict[TopicPartition, KafkaError | None],
) -> ProduceResponse:
    outcomes = iter(appended)
    response = ProduceResponse()
    for topic in request.topic_data:
        answers = TopicProduceResponse(name=topic.name)
        for data in topic.partition_data:
            if topic.name in denied:
                answer = _failed(data.index, TopicAuthorizationFailedError())
            else:
                key, outcome = next(outcomes)
                error = replicated.get(key)
                answer = (_answer(context, key, outcome) if error is None
                          else _failed(data.index, error))
            answers.partition_responses.append(answer)
        response.responses.append(answers)
    if context.api_version >= FIRST_LEADER_HINT_VERSION:
        _add_leader_hints(context, response)
    return response


def _add_leader_hints(context: RequestContext, response: ProduceResponse) -> None:
    """KIP-951 (``broker.leader_hints``): each partition answered NOT_LEADER_OR_FOLLOWER
    names its current leader, and the response carries those leaders' endpoints."""
    hints: LeaderHints | None = None
    for topic in response.responses:
        for answer in topic.partition_responses:
            if answer.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            if hints is None:
                hints = LeaderHints(context.broker, context.listener_name)
            leader = hints.current_leader(topic.name, answer.index)
            answer.current_leader = LeaderIdAndEpoch(
                leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)
    if hints is not None:
        response.node_endpoints = [
            NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
            for node_id, host, port, rack in hints.hinted_endpoints()]


def _unauthorized(request: ProduceRequest, error: KafkaError) -> HandlerResult:
    return CLOSE_CONNECTION if request.acks == 0 else error_response(request, error)


def _append_all(
    context: RequestContext, request: ProduceShaped, denied: set[str], produce_version: int,
    conditions: Sequence[AppendCondition | None] | None,
) -> Appended:
    """The authorized partitions, in request order, through the broker's one append entry
    point (``replication.append``); with their outcomes in the same order."""
    def verify(partition: Partition, records: Records) -> bool:
        return _verify_transaction(
            context, request.transactional_id, partition, records, produce_version)

    entries = [((topic.name, data.index), data.records) for topic in request.topic_data
               if topic.name not in denied for data in topic.partition_data]
    outcomes = context.broker.appender.append_records(
        entries, required_acks=request.acks, origin=AppendOrigin.CLIENT, verify=verify,
        conditions=conditions)
    return [(key, outcome) for (key, _), outcome in zip(entries, outcomes, strict=True)]


def _answer(
    context: RequestContext, key: TopicPartition, outcome: PartitionAppend
) -> PartitionProduceResponse:
    if outcome.error is not None:
        answer = _failed(key[1], outcome.error)
        if _carries_log_start_offset(outcome.error):
            partition = context.broker.replica_manager.partition(*key)
            answer.log_start_offset = -1 if partition is None else partition.log_start_offset
        return answer
    result = outcome.result
    assert result is not None
    return PartitionProduceResponse(
        index=key[1],
        error_code=0,
        base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
    )


def _carries_log_start_offset(error: KafkaError) -> bool:
    """Kafka's ``appendToLocalLog``: the errors it expects of an append, and a failed
    verification (refused before the append), answer log start offset -1 (its
    ``UNKNOWN_LOG_APPEND_INFO``); any other error of an append (a sequence or epoch error, an
    invalid record, too few in-sync replicas...) the partition's log start offset."""
    return error.code not in NO_LOG_START_ERRORS and not getattr(error, UNVERIFIED, False)


def _unverified(code: ErrorCode, message: str) -> KafkaError:
    """The mapped error of a failed verification, marked as refused before the append."""
    error = error_for_code(code)(message)
    setattr(error, UNVERIFIED, True)
    return error


def _verify_transaction(
    context: RequestContext, transactional_id: str | None, partition: Partition, records: Records,
    produce_version: int,
) -> bool:
    """True when the coordinator vouches that this partition is in the transaction of the
    first batch's producer; raises the mapped error when it does not (see the docstring).
    False when there is nothing to verify (not transactional, or already open here)."""
    if len(records) < BATCH_HEADER_SIZE or not records[_ATTRIBUTES_LOW_BYTE] & _TRANSACTIONAL:
        return False  # not transactional (or too short: the log's validation answers)
    header = read_batch_header(records)
    if not header.is_transactional or header.producer_id < 0 or (
        partition.has_ongoing_transaction(header.producer_id, header.producer_epoch)
    ):
        return False
    transactions = context.broker.transactions
    if not transactions.config.transaction_partition_verification_enable:
        return True
    if transactional_id is None:
        raise _unverified(ErrorCode.INVALID_TXN_STATE,
                          "transactional records without a transactional id")
    if transactions.coordinator.ownership_error(transactional_id) is ErrorCode.NOT_COORDINATOR:
        # A cluster: another broker coordinates this id. Kafka asks it (AddPartitionsToTxn
        # verify_only through its AddPartitionsToTxnManager); not built yet, so the append goes
        # on unverified, as with transaction.partition.verification.enable=false.
        return True
    key = (partition.topic, partition.partition)
    verified = transactions.coordinator.verify_partitions(
        transactional_id, header.producer_id, header.producer_epoch, [key])[key]
    if verified is ErrorCode.NONE:
        return True
    raise _unverified(_produce_error(verified, produce_version), (
        f"partition {partition.topic}-{partition.partition} could not be verified in the "
        f"transaction of {transactional_id}: {verified.name}"))


def _produce_error(error: ErrorCode, api_version: int) -> ErrorCode:
    """Kafka's translation of a verification error into a produce error."""
    if error is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error is ErrorCode.TRANSACTION_ABORTABLE and api_version <= TRANSACTION_ABORTABLE_VERSION - 1:
        return ErrorCode.INVALID_TXN_STATE
    if error in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                 ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return error


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
        advertised_min_version=0,  # KAFKA-18659: v0-v2 listed, answered UNSUPPORTED_VERSION
    )
)
