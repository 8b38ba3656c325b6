"""Fetch: v4–v17 (consumers; topic ids from v13).

Reads up to the high watermark; ``isolation_level`` 1 (read_committed) up to the last stable
offset, with the aborted transactions overlapping what was read (from the ``.txnindex`` files:
producer id and first offset each, which clients use to drop those producers' records up to
the ABORT marker). Every response carries the partition's last stable offset. Per-partition ``partition_max_bytes`` and the response's ``max_bytes`` are
Kafka's (KIP-74): the first partition with data returns at least one whole batch even when it
is larger than both. Long poll: when fewer than ``min_bytes`` are readable and ``max_wait_ms``
> 0, the fetch becomes a ``DelayedFetch`` in the broker's fetch purgatory
(``replication.purgatory``), watched under its partitions: every append (``replication.append``)
tries it again, and it is answered when ``min_bytes`` are there or at ``max_wait_ms`` (no
polling). Fetch sessions (KIP-227) are kept by
``broker.fetch_session``.

Zero copy: the response is encoded with a 16-byte marker as the records of each partition that
has data; the frame is then cut at each marker, the length prefix rewritten for the real slice
(int32 before v12, unsigned varint length+1 from v12) and the frame size patched, giving
``[bytes, FetchSlice, bytes, ...]`` which the connection sends with ``os.sendfile``. The bytes
of each slice are the segment's, untouched.

Authorization (with an authorizer, as Kafka's ``handleFetchRequest``): each topic needs READ,
else its partitions answer TOPIC_AUTHORIZATION_FAILED (and the fetch returns at once, as for
any error). Without an authorizer this costs one attribute check per read.

Errors per partition (with high watermark, last stable offset and log start offset -1, as
Kafka's ``createLogReadResult``): OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH; from
v16 the first two carry the partition's current leader and the response those leaders'
endpoints (KIP-951, ``broker.leader_hints``; the field exists from v12 but Kafka fills it only
from v16, as we do); whole response: FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH.
How far a fetch reads is Kafka's ``FetchIsolation``: a replica id >= 0 (a follower) up to the
log end offset, read_committed up to the last stable offset, else up to the high watermark.

On a controller listener, Fetch is the Raft replication of ``__cluster_metadata`` (KIP-595),
answered by this node's Raft node (``broker.quorum``).

Fetch from the closest replica (KIP-392): a consumer's Fetch from v11 carries client metadata
(``rack_id``). With ``replica.selector.class`` set, the leader answers a partition such a consumer
should read elsewhere with ``preferred_read_replica`` (``replication.replica_selector``: an
in-sync follower in the client's rack holding the fetch offset), no records, and the response
goes at once (Kafka's ``findPreferredReadReplica``); -1 otherwise. A follower serves a v11+
consumer up to its own high watermark (Kafka's ``fetchOnlyFromLeader`` is false for it): an
offset between its high watermark and log end reads nothing yet, one outside its log answers
OFFSET_OUT_OF_RANGE; before v11, or for a follower's own Fetch, only the leader answers
(NOT_LEADER_OR_FOLLOWER). A follower never names a preferred read replica.

Not implemented: quotas, ``ReplicaSelector`` plug-ins other than Kafka's rack-aware one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from broker.apis import (
    CONTROLLER_LISTENER,
    ApiSpec,
    HandlerResult,
    RequestContext,
    ResponsePart,
    ZeroCopyResponse,
    listener_type,
    register,
)
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation, ResourceType
from broker.fetch_session import FetchContext, PartitionKey, RequestedPartition
from broker.leader_hints import LeaderHints
from broker.quorum import quorum_request
from protocol.codec import ZERO_UUID, write_uvarint
from protocol.errors import (
    ErrorCode,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from protocol.frames import encode_response_message
from protocol.messages.fetch_request import FetchRequest
from protocol.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from replication.partition import FetchIsolation, Partition
from replication.purgatory import DelayedOperation
from replication.replica_manager import ReplicaManager
from replication.replica_selector import preferred_read_replica
from storage.segment import FetchSlice

logger = logging.getLogger("samsa.broker.apis.fetch")

FIRST_TOPIC_ID_VERSION = 13
FIRST_FLEXIBLE_VERSION = 12
FIRST_REPLICA_STATE_VERSION = 15
FIRST_RACK_VERSION = 11
REFUSED_BEFORE_READ = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                                 ErrorCode.TOPIC_AUTHORIZATION_FAILED})
FIRST_LEADER_HINT_VERSION = 16  # KIP-951: Kafka fills current_leader and node_endpoints from v16
_LEADER_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
READ_COMMITTED = 1
_MARKER_SIZE = 16


@dataclass(slots=True)
class PartitionRead:
    key: PartitionKey
    error: KafkaError | None = None
    partition: Partition | None = None
    slice: FetchSlice | None = None
    aborted: list[AbortedTransaction] = field(default_factory=list)
    diverging: tuple[int, int] | None = None  # a follower's log diverges: (epoch, end offset)
    preferred_read_replica: int = -1  # KIP-392: the consumer should read this replica instead


@dataclass(frozen=True, slots=True)
class Fetcher:
    """Who fetches: a consumer (``replica_id`` < 0) or a follower, and the request version;
    ``client_rack`` is a consumer's ``rack_id`` from v11 (Kafka's ``ClientMetadata``; None
    without it)."""

    replica_id: int
    api_version: int
    read_committed: bool
    client_rack: str | None = None

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def isolation(self) -> FetchIsolation:
        return FetchIsolation.of(replica_id=self.replica_id, read_committed=self.read_committed)

    @property
    def only_from_leader(self) -> bool:
        """Kafka's ``fetchOnlyFromLeader``: followers, and consumers without client metadata
        (before v11, which brought ``rack_id``); a v11+ consumer may read a follower (KIP-392)
        up to that follower's high watermark."""
        return self.is_follower or self.api_version < FIRST_RACK_VERSION


def handle(context: RequestContext, request: FetchRequest) -> HandlerResult:
    if listener_type(context.broker.config, context.listener_name) == CONTROLLER_LISTENER:
        return quorum_request(context.broker, request)  # the metadata log's Raft fetch (KRaft)
    requested, forgotten = _requested(context, request)
    session = context.broker.fetch_sessions.new_context(
        session_id=request.session_id, session_epoch=request.session_epoch,
        partitions=requested, forgotten=forgotten,
    )
    if session.error is not None:
        return FetchResponse(error_code=session.error.code, session_id=0)
    reads = _read_all(context, session, request.max_bytes, fetcher_of(context, request))
    if _can_answer(request, reads):
        return _response(context, request, session, reads)
    return _long_poll(context, request, session)


def fetcher_of(context: RequestContext, request: FetchRequest) -> Fetcher:
    """The replica id moved into ``replica_state`` in v15."""
    replica_id = (request.replica_state.replica_id if context.api_version >= FIRST_REPLICA_STATE_VERSION
                  else request.replica_id)
    client_rack = (request.rack_id if context.api_version >= FIRST_RACK_VERSION and replica_id < 0
                   else None)
    return Fetcher(replica_id, context.api_version, request.isolation_level == READ_COMMITTED,
                   client_rack)


def fetch_isolation(context: RequestContext, request: FetchRequest) -> FetchIsolation:
    """Kafka's ``FetchIsolation.of``."""
    return fetcher_of(context, request).isolation


def _requested(
    context: RequestContext, request: FetchRequest
) -> tuple[list[RequestedPartition], list[PartitionKey]]:
    by_id = context.api_version >= FIRST_TOPIC_ID_VERSION
    manager = context.broker.replica_manager
    requested = []
    for topic in request.topics:
        key_topic = _key_topic(manager, topic.topic, topic.topic_id, by_id)
        requested += [
            RequestedPartition((*key_topic, p.partition), p.fetch_offset, p.partition_max_bytes,
                               p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset)
            for p in topic.partitions
        ]
    forgotten = [
        (*_key_topic(manager, topic.topic, topic.topic_id, by_id), index)
        for topic in request.forgotten_topics_data
        for index in topic.partitions
    ]
    return requested, forgotten


def _key_topic(
    manager: ReplicaManager, name: str, topic_id: UUID, by_id: bool
) -> tuple[UUID, str]:
    """The (topic id, name) part of a session key: by name before v13, by id from v13."""
    if not by_id:
        return (ZERO_UUID, name)
    image = manager.topic_by_id(topic_id)
    return (topic_id, image.name if image is not None else "")


def _read_all(
    context: RequestContext, session: FetchContext, max_bytes: int, fetcher: Fetcher
) -> list[PartitionRead]:
    manager = context.broker.replica_manager
    remaining = max_bytes
    min_one_message = True
    reads = []
    denied = _denied_topics(context, session, fetcher)
    moved: list[tuple[str, int]] = []
    for requested in session.partitions:
        topic_id, name, index = requested.key
        read = PartitionRead(requested.key)
        reads.append(read)
        if name in denied:
            read.error = TopicAuthorizationFailedError()
            continue
        if not name:
            read.error = UnknownTopicIdError() if topic_id != ZERO_UUID else (
                UnknownTopicOrPartitionError())
            continue
        try:  # a partition of the image not hosted here: NOT_LEADER_OR_FOLLOWER (Kafka's)
            partition = manager.partition_or_error(name, index)
        except KafkaError as error:
            read.error = error
            continue
        read.partition = partition
        try:
            if _read_one(context, read, requested, fetcher, min(requested.max_bytes, remaining),
                         min_one_message):
                moved.append((name, index))
        except KafkaError as error:
            read.error = error
        except Exception:
            logger.exception("fetch from %s-%d failed", name, index)
            read.error = UnknownServerError()
        if read.slice is not None:
            remaining = max(0, remaining - read.slice.length)
            min_one_message = False
    if moved:  # a follower's fetch moved high watermarks: acks=all produces may be answered
        context.broker.high_watermarks_moved(moved)
    return reads


def _read_one(
    context: RequestContext, read: PartitionRead, requested: RequestedPartition,
    fetcher: Fetcher, max_bytes: int, min_one_message: bool,
) -> bool:
    """Read one partition into ``read`` (Kafka's ``Partition.fetchRecords``); a follower's
    through ``Partition.fetch_for_follower``. True when the leader's high watermark moved."""
    partition = read.partition
    assert partition is not None
    if fetcher.is_follower:
        served = partition.fetch_for_follower(
            fetcher.replica_id, fetch_offset=requested.fetch_offset,
            last_fetched_epoch=requested.last_fetched_epoch,
            current_leader_epoch=requested.current_leader_epoch,
            log_start_offset=requested.log_start_offset, max_bytes=max_bytes,
            now_ms=context.broker.clock.milliseconds(), min_one_message=min_one_message)
        read.slice, read.diverging = served.slice, served.diverging
        if served.isr_change is not None:
            context.broker.propose_isr_change(partition, served.isr_change)
        return served.high_watermark_moved or served.log_start_moved
    partition.check_current_leader_epoch(requested.current_leader_epoch)
    preferred = _preferred_read_replica(context, partition, fetcher, requested.fetch_offset)
    if preferred is not None:  # Kafka skips the read: the consumer goes to that replica
        read.preferred_read_replica = preferred
        return False
    if fetcher.only_from_leader:
        partition.check_leader()
    read.slice = partition.read(requested.fetch_offset, max_bytes,
                                min_one_message=min_one_message, isolation=fetcher.isolation)
    if read.slice is not None and fetcher.isolation is FetchIsolation.TXN_COMMITTED:
        read.aborted = _aborted(partition, requested.fetch_offset)
    return False


def _preferred_read_replica(context: RequestContext, partition: Partition, fetcher: Fetcher,
                            fetch_offset: int) -> int | None:
    """KIP-392 (``replication.replica_selector``): only with ``replica.selector.class`` set,
    only for a consumer that sent client metadata (v11+) and a rack, only on the leader."""
    if (fetcher.client_rack is None or not fetcher.client_rack or not partition.is_leader
            or not context.broker.config.kraft.replica.replica_selector_class):
        return None
    racks = {broker_id: rack for broker_id, _, _, rack
             in context.broker.live_brokers(context.listener_name)}
    return preferred_read_replica(partition, client_rack=fetcher.client_rack, racks=racks,
                                  fetch_offset=fetch_offset,
                                  now_ms=context.broker.clock.milliseconds())


def _denied_topics(context: RequestContext, session: FetchContext, fetcher: Fetcher) -> set[str]:
    """The fetched topics the principal may not READ (none without an authorizer). A follower's
    fetch needs CLUSTER_ACTION on the cluster (CVE-2018-1288): without it, every topic."""
    authorizer = context.broker.authorizer
    if authorizer is None:
        return set()
    names = {requested.key[1] for requested in session.partitions if requested.key[1]}
    if fetcher.is_follower:
        return set() if authorize_cluster(context, AclOperation.CLUSTER_ACTION) else names
    return {
        name for name in names
        if not authorizer.authorize(context.principal, context.client_host, AclOperation.READ,
                                    ResourceType.TOPIC, name)
    }


def _aborted(partition: Partition, fetch_offset: int) -> list[AbortedTransaction]:
    return [
        AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
        for txn in partition.aborted_transactions(fetch_offset)
    ]


def _can_answer(request: FetchRequest, reads: list[PartitionRead], *, stopping: bool = False) -> bool:
    if stopping or request.max_wait_ms <= 0 or not reads:
        return True
    if any(read.error is not None or read.diverging is not None
           or read.preferred_read_replica >= 0 for read in reads):
        return True
    return sum(read.slice.length for read in reads if read.slice) >= request.min_bytes


class DelayedFetch(DelayedOperation):
    """A long-poll Fetch in the broker's purgatory (Kafka's ``DelayedFetch``): it completes
    when a re-read finds ``min_bytes`` (or an error, or the broker stopping), or at
    ``max_wait_ms``; either way its answer is a read made at that moment."""

    def __init__(
        self, context: RequestContext, request: FetchRequest, session: FetchContext,
        answer: asyncio.Future[FetchResponse | ZeroCopyResponse],
    ) -> None:
        super().__init__(request.max_wait_ms)
        self.context = context
        self.request = request
        self.session = session
        self.answer: asyncio.Future[FetchResponse | ZeroCopyResponse] | None = answer
        self._reads: list[PartitionRead] | None = None

    def try_complete(self) -> bool:
        reads = self._read()
        if not _can_answer(self.request, reads, stopping=self.context.broker.stopping):
            return False
        self._reads = reads
        return self.force_complete()

    def on_complete(self) -> None:
        reads = self._reads if self._reads is not None else self._read()
        answer, self.answer, self._reads = self.answer, None, None  # kept by the purgatory a while
        if answer is not None and not answer.done():  # done: the connection went away
            answer.set_result(_response(self.context, self.request, self.session, reads))

    def _read(self) -> list[PartitionRead]:
        return _read_all(self.context, self.session, self.request.max_bytes,
                         fetcher_of(self.context, self.request))


def _long_poll(
    context: RequestContext, request: FetchRequest, session: FetchContext
) -> Coroutine[Any, Any, FetchResponse | ZeroCopyResponse]:
    """Park the fetch in the purgatory now, watched under its partitions (its deadline counts
    from the request's arrival); the connection awaits its answer."""
    answer: asyncio.Future[FetchResponse | ZeroCopyResponse] = (
        asyncio.get_running_loop().create_future())
    keys = [(name, index) for _, name, index in (r.key for r in session.partitions) if name]
    context.broker.fetch_reaper.watch(DelayedFetch(context, request, session, answer), keys)
    return _answer(answer)


async def _answer(
    answer: asyncio.Future[FetchResponse | ZeroCopyResponse],
) -> FetchResponse | ZeroCopyResponse:
    return await answer


def _response(
    context: RequestContext, request: FetchRequest, session: FetchContext, reads: list[PartitionRead]
) -> FetchResponse | ZeroCopyResponse:
    by_id = context.api_version >= FIRST_TOPIC_ID_VERSION
    response = FetchResponse(error_code=0, session_id=session.session_id)
    marker_base = os.urandom(_MARKER_SIZE - 4)
    slices: list[tuple[bytes, FetchSlice]] = []
    current: FetchableTopicResponse | None = None
    hints = (LeaderHints(context.broker, context.listener_name)
             if context.api_version >= FIRST_LEADER_HINT_VERSION else None)
    for read in reads:
        data = _partition_data(read, request.isolation_level)
        if hints is not None and data.error_code in _LEADER_HINT_ERRORS:
            leader = hints.current_leader(read.key[1], read.key[2])
            data.current_leader = LeaderIdAndEpoch(
                leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)
        included = session.include(
            read.key, has_records=read.slice is not None, error_code=data.error_code,
            high_watermark=data.high_watermark, last_stable_offset=data.last_stable_offset,
            log_start_offset=data.log_start_offset,
            has_preferred_read_replica=read.preferred_read_replica >= 0,
        )
        if not included:
            continue
        if read.slice is not None:
            marker = marker_base + struct.pack(">I", len(slices))
            slices.append((marker, read.slice))
            data.records = marker
        topic_id, name, _ = read.key
        if current is None or (current.topic_id, current.topic) != (
            topic_id if by_id else ZERO_UUID, "" if by_id else name
        ):
            current = FetchableTopicResponse(
                topic="" if by_id else name, topic_id=topic_id if by_id else ZERO_UUID
            )
            response.responses.append(current)
        current.partitions.append(data)
    if hints is not None:
        response.node_endpoints = [
            NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
            for node_id, host, port, rack in hints.hinted_endpoints()]
    if not slices:
        return response
    return SlicedFetchResponse(response, slices)


def _partition_data(read: PartitionRead, isolation_level: int) -> PartitionData:
    index = read.key[2]
    aborted: list[AbortedTransaction] | None = [] if isolation_level == READ_COMMITTED else None
    if read.partition is None or read.error is not None:
        # Kafka's createLogReadResult(e): a partition that failed (offset out of range
        # included) carries no offsets, whatever the partition knows, and no aborted
        # transactions (null); one refused before any read (unknown, not authorized: Kafka's
        # ``FetchResponse.partitionResponse``) has the field's default, an empty list.
        assert read.error is not None
        refused = read.partition is None and read.error.code in REFUSED_BEFORE_READ
        return PartitionData(
            partition_index=index, error_code=read.error.code, high_watermark=-1,
            last_stable_offset=-1, log_start_offset=-1,
            aborted_transactions=[] if refused else None, records=b"",
        )
    partition = read.partition
    if aborted is not None:
        aborted = read.aborted
    diverging = EpochEndOffset()
    if read.diverging is not None:
        diverging = EpochEndOffset(epoch=read.diverging[0], end_offset=read.diverging[1])
    return PartitionData(
        diverging_epoch=diverging,
        partition_index=index,
        error_code=0,
        high_watermark=partition.high_watermark,
        last_stable_offset=partition.last_stable_offset,
        log_start_offset=partition.log_start_offset,
        aborted_transactions=aborted,
        preferred_read_replica=read.preferred_read_replica,
        records=b"",
    )


class SlicedFetchResponse(ZeroCopyResponse):
    """A FetchResponse whose records are file slices (see the module docstring)."""

    def __init__(self, response: FetchResponse, slices: list[tuple[bytes, FetchSlice]]) -> None:
        self.response = response
        self.slices = slices

    def frame_parts(self, correlation_id: int, header_version: int, api_version: int) -> list[ResponsePart]:
        frame = encode_response_message(correlation_id, header_version, self.response, api_version)
        flexible = api_version >= FIRST_FLEXIBLE_VERSION
        old_prefix = 1 if flexible else 4  # uvarint(16 + 1) is one byte
        parts: list[ResponsePart] = []
        position = 0
        growth = 0
        for marker, piece in self.slices:
            found = frame.find(marker, position)
            if found < 0:
                raise AssertionError("fetch marker missing from the encoded response")
            prefix = bytearray()
            if flexible:
                write_uvarint(prefix, piece.length + 1)
            else:
                prefix += struct.pack(">i", piece.length)
            parts.append(bytes(frame[position : found - old_prefix]) + prefix)
            parts.append(piece)
            position = found + _MARKER_SIZE
            growth += piece.length - _MARKER_SIZE + len(prefix) - old_prefix
        parts.append(bytes(frame[position:]))
        size = struct.unpack_from(">i", frame, 0)[0] + growth
        first = parts[0]
        assert isinstance(first, bytes)
        parts[0] = struct.pack(">i", size) + first[4:]
        return parts


def error_response(request: FetchRequest, error: KafkaError) -> FetchResponse:
    return FetchResponse(
        error_code=error.code,
        responses=[
            FetchableTopicResponse(
                topic=topic.topic, topic_id=topic.topic_id,
                partitions=[
                    PartitionData(partition_index=p.partition, error_code=error.code,
                                  high_watermark=-1, records=b"")
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


SPEC = register(
    ApiSpec(
        api_key=FetchRequest.API_KEY,
        min_version=4,
        max_version=FetchRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="Fetch",
    )
)
