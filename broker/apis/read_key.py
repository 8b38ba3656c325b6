"""SamsaReadKey: v0–v0.

Samsa's own API (key 10002, schema in ``protocol/schemas/``): the records of one key in one
partition ("an entity's stream"), read through the per-segment key indexes
(``storage.log_keys``) instead of from the start of the partition. Answered by the partition's
leader only, from ``start_offset`` up to the high watermark (``isolation_level`` 0) or the last
stable offset (1, read_committed: batches of aborted transactions are left out here, by their
producer id and the aborted range, since a key read never carries the ABORT markers a client
would need to do it). ``records`` holds whole batches that may also hold other keys' records
(and, for a 64-bit hash collision, none of this key's): the client keeps the records whose key
equals ``key`` and whose offset is at least ``start_offset``. ``next_offset`` is where the next
read starts: all of the key's records in [start_offset, next_offset) were returned.

Long poll: when nothing of the key is readable and ``max_wait_ms`` > 0, the read waits in the
broker's fetch purgatory under its partition (every append and high watermark move tries it
again) until a batch of the key is readable or ``max_wait_ms`` passes (then it answers with no
records and ``next_offset`` at the limit reached). This is what makes a live subscription to
one key cheap.

Key indexes of sealed segments that are not loaded yet are loaded or built on a worker thread
before the read (the first key read of a big log scans it once); the read itself, and the
active segment's key map, stay on the event loop, which owns the log's appends.

Errors (``error_code``, with the offsets -1): UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (``current_leader_epoch``), OFFSET_OUT_OF_RANGE
(``start_offset`` outside [log start offset, log end offset]), KAFKA_STORAGE_ERROR,
TOPIC_AUTHORIZATION_FAILED (with an authorizer, the topic needs READ). Kafka clients skip the
unknown key in ApiVersions. Not implemented: quotas.
"""

from __future__ import annotations

import asyncio
import logging

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import (
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.samsa_read_key_request import SamsaReadKeyRequest
from protocol.messages.samsa_read_key_response import SamsaReadKeyResponse
from protocol.records import read_batch_header
from replication.partition import FetchIsolation, Partition
from replication.purgatory import DelayedOperation
from storage.transaction_index import AbortedTxn

logger = logging.getLogger("samsa.broker.apis.read_key")

READ_COMMITTED = 1


def handle(context: RequestContext, request: SamsaReadKeyRequest) -> HandlerResult:
    return _serve(context, request)


async def _serve(context: RequestContext, request: SamsaReadKeyRequest) -> SamsaReadKeyResponse:
    try:
        partition = _leader_partition(context, request)
        log = partition.log
        if not log.key_reads_prepared(request.start_offset):
            # The first key read of a log (or of new segments) builds indexes: off the loop.
            await asyncio.get_running_loop().run_in_executor(
                None, log.prepare_key_reads, request.start_offset)
    except KafkaError as error:
        return SamsaReadKeyResponse(error_code=error.code)
    except Exception:
        logger.exception("preparing a key read of %s-%d failed", request.topic, request.partition)
        return SamsaReadKeyResponse(error_code=UnknownServerError.code)
    response = read(context, request)
    if response.records is not None or response.error_code or request.max_wait_ms <= 0:
        return response
    answer: asyncio.Future[SamsaReadKeyResponse] = asyncio.get_running_loop().create_future()
    context.broker.fetch_reaper.watch(DelayedKeyRead(context, request, answer),
                                      [(request.topic, request.partition)])
    return await answer


def _leader_partition(context: RequestContext, request: SamsaReadKeyRequest) -> Partition:
    if not authorize(context, AclOperation.READ, ResourceType.TOPIC, request.topic):
        raise TopicAuthorizationFailedError()
    partition = context.broker.replica_manager.partition(request.topic, request.partition)
    if partition is None:
        raise UnknownTopicOrPartitionError()
    partition.check_current_leader_epoch(request.current_leader_epoch)
    partition.check_leader()
    return partition


def read(context: RequestContext, request: SamsaReadKeyRequest) -> SamsaReadKeyResponse:
    """One read of the key now; the records are None when there is nothing of the key."""
    try:
        return _read_or_raise(context, request)
    except KafkaError as error:
        return SamsaReadKeyResponse(error_code=error.code)
    except Exception:
        logger.exception("reading key of %s-%d failed", request.topic, request.partition)
        return SamsaReadKeyResponse(error_code=UnknownServerError.code)


def _read_or_raise(context: RequestContext, request: SamsaReadKeyRequest) -> SamsaReadKeyResponse:
    partition = _leader_partition(context, request)
    committed = request.isolation_level == READ_COMMITTED
    limit = partition.fetch_limit(
        FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK)
    found = partition.log.read_key(request.key, request.start_offset, max(request.max_bytes, 0),
                                   max_offset=limit)
    batches = list(found.batches)
    if committed and batches:
        batches = _without_aborted(batches, partition.log.aborted_transactions_between(
            request.start_offset, found.next_offset))
    return SamsaReadKeyResponse(
        high_watermark=partition.high_watermark,
        last_stable_offset=partition.last_stable_offset,
        log_start_offset=partition.log_start_offset,
        next_offset=found.next_offset,
        records=b"".join(batches) if batches else None,
    )


def _without_aborted(batches: list[bytes], aborted: list[AbortedTxn]) -> list[bytes]:
    """Drop the transactional batches inside an aborted transaction of their producer."""
    if not aborted:
        return batches
    kept = []
    for data in batches:
        header = read_batch_header(data)
        if not header.is_transactional or not any(
            txn.producer_id == header.producer_id
            and txn.first_offset <= header.base_offset <= txn.last_offset
            for txn in aborted
        ):
            kept.append(data)
    return kept


class DelayedKeyRead(DelayedOperation):
    """A long-poll key read in the fetch purgatory: it completes when a re-read finds a batch
    of the key (or an error, or the broker stopping), or at ``max_wait_ms`` with a last read."""

    def __init__(self, context: RequestContext, request: SamsaReadKeyRequest,
                 answer: asyncio.Future[SamsaReadKeyResponse]) -> None:
        super().__init__(request.max_wait_ms)
        self.context = context
        self.request = request
        self.answer: asyncio.Future[SamsaReadKeyResponse] | None = answer
        self._response: SamsaReadKeyResponse | None = None

    def try_complete(self) -> bool:
        response = read(self.context, self.request)
        if response.records is None and not response.error_code and not self.context.broker.stopping:
            return False
        self._response = response
        return self.force_complete()

    def on_complete(self) -> None:
        response = self._response if self._response is not None else read(self.context, self.request)
        answer, self.answer, self._response = self.answer, None, None
        if answer is not None and not answer.done():  # done: the connection went away
            answer.set_result(response)


def error_response(request: SamsaReadKeyRequest, error: KafkaError) -> SamsaReadKeyResponse:
    return SamsaReadKeyResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=SamsaReadKeyRequest.API_KEY,
        min_version=0,
        max_version=SamsaReadKeyRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="SamsaReadKey",
    )
)
