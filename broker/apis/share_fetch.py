"""ShareFetch: v1–v1 (KIP-932 share groups; the share-partition leader's side).

The share session (``broker.share.share_session``) says which partitions the fetch covers:
epoch 0 opens one with the request's Topics (a session the member had is replaced and its
acquired records released), n > 0 updates it (Topics added, ForgottenTopicsData removed) and
fetches every partition of the session, -1 fetches nothing, applies the acknowledgements and
closes the session, releasing the member's acquired records. Session errors answer the whole
request: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED,
INVALID_REQUEST (no group id, no member id or one over 36 characters, acknowledgements in an
epoch-0 request).

Piggybacked acknowledgements (``AcknowledgementBatches``: 0 Gap, 1 Accept, 2 Release,
3 Reject) are applied and persisted (``SharePersister.write_state``) before the answer; their
outcome is the partition's ``AcknowledgeErrorCode`` (INVALID_RECORD_STATE for records not
acquired by this member, INVALID_REQUEST for a malformed batch, the persister's error).

Fetching (``broker.share.partition_manager``): each share partition is loaded from the
share coordinator at first use; the log is read where the share partition next has records
to deliver (its first AVAILABLE record, else its end offset) up to the high watermark (the
last stable offset for ``share.isolation.level=read_committed``, aborted transactions' batches
left out), from the batch headers only; up to ``MaxRecords`` records (over all partitions, in
order) are acquired for the member, and each partition answers the whole log batches holding
them (``Records``, bytes as in the log) and the acquired ranges (``AcquiredRecords``, with
their delivery count). ``AcquisitionLockTimeoutMs`` is the group's
``share.record.lock.duration.ms``. Long poll: when nothing was acquired, no partition failed
and ``MaxWaitMs`` > 0, the fetch waits in the broker's fetch purgatory under its partitions:
a produce to one of them, an acknowledgement or release, or a lock expiry tries it again; at
``MaxWaitMs`` it answers what it can acquire then (nothing, usually). ``MinBytes`` is not
waited for beyond one record (as Kafka's share fetch, which answers as soon as it acquired any).

Per-partition errors: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER
(with ``CurrentLeader`` and the leaders' ``NodeEndpoints``), TOPIC_AUTHORIZATION_FAILED (with
an authorizer: READ on the topic; READ on the group else GROUP_AUTHORIZATION_FAILED for the
whole request), the persister's errors while loading, UNKNOWN_SERVER_ERROR (logged). On an
epoch n > 0 fetch a partition with nothing to say is left out of the response, as Kafka does.

Not implemented: v2 (ShareAcquireMode record_limit, BatchSize, IsRenewAck and the RENEW
acknowledgement), quotas, waiting ``MaxWaitMs`` before answering SHARE_SESSION_LIMIT_REACHED,
checking that the member belongs to the share group (nor does Kafka at fetch time).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.leader_hints import LeaderHints
from broker.share.partition_manager import ShareFetchResult, SharePartitionManager
from broker.share.share_session import SessionPartition, SessionUpdate
from broker.share.values import AcknowledgementBatch
from protocol.errors import (
    ErrorCode,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
)
from protocol.messages.share_fetch_request import ShareFetchRequest
from protocol.messages.share_fetch_response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)
from replication.purgatory import DelayedOperation

__all__ = ["acknowledge_partition", "check_group_and_member", "manager_of"]

logger = logging.getLogger("samsa.broker.apis.share_fetch")

MAX_MEMBER_ID_LENGTH = 36  # Kafka's isMemberIdValid: a UUID's string
LEADER_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def manager_of(context: RequestContext) -> SharePartitionManager:
    manager = context.broker.share_partitions
    assert manager is not None
    return manager


def check_group_and_member(context: RequestContext, group_id: str | None, member_id: str | None) -> None:
    """Kafka's checks before the session: a group id, READ on it, a member id."""
    if not group_id:
        raise InvalidRequestError("Invalid group id in the request.")
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, group_id):
        raise GroupAuthorizationFailedError()
    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        raise InvalidRequestError("Invalid member id in the request.")


def handle(context: RequestContext, request: ShareFetchRequest) -> HandlerResult:
    manager = manager_of(context)
    try:
        check_group_and_member(context, request.group_id, request.member_id)
        added = [(topic.topic_id, p.partition_index) for topic in request.topics for p in topic.partitions]
        forgotten = [(topic.topic_id, index) for topic in request.forgotten_topics_data
                     for index in topic.partitions]
        acknowledging = any(p.acknowledgement_batches for topic in request.topics for p in topic.partitions)
        update = manager.sessions.fetch(
            str(request.group_id), str(request.member_id), request.share_session_epoch, added=added,
            forgotten=forgotten, acknowledging=acknowledging, connection_id=context.connection_id)
    except KafkaError as error:
        return error_response(request, error)
    return _serve(context, request, update)


@dataclass(slots=True)
class _Outcome:
    """What the response says of one partition."""

    error: KafkaError | None = None
    acknowledge_error: KafkaError | None = None
    acknowledged: bool = False
    fetched: ShareFetchResult | None = None


@dataclass(slots=True)
class _Fetch:
    context: RequestContext
    request: ShareFetchRequest
    update: SessionUpdate
    group_id: str
    member_id: str
    outcomes: dict[SessionPartition, _Outcome] = field(default_factory=dict)
    names: dict[UUID, str] = field(default_factory=dict)

    def outcome(self, key: SessionPartition) -> _Outcome:
        return self.outcomes.setdefault(key, _Outcome())


async def _serve(context: RequestContext, request: ShareFetchRequest, update: SessionUpdate) -> ShareFetchResponse:
    manager = manager_of(context)
    fetch = _Fetch(context, request, update, str(request.group_id), str(request.member_id))
    if update.replaced is not None:
        await manager.release_member(fetch.group_id, fetch.member_id)
    denied = _denied_topics(context, request, update)
    for topic in request.topics:
        for partition in topic.partitions:
            if partition.acknowledgement_batches:
                key = (topic.topic_id, partition.partition_index)
                outcome = fetch.outcome(key)
                outcome.acknowledged = True
                outcome.acknowledge_error = (
                    TopicAuthorizationFailedError() if topic.topic_id in denied else await acknowledge_partition(
                        manager, fetch.group_id, fetch.member_id, key,
                        [(b.first_offset, b.last_offset, b.acknowledge_types)
                         for b in partition.acknowledgement_batches]))
    if update.closing:
        manager.sessions.close(fetch.group_id, fetch.member_id)
        await manager.release_member(fetch.group_id, fetch.member_id)
        return _response(fetch)
    entries = await _load(manager, fetch, denied)
    _acquire_all(manager, fetch, entries)
    if _can_answer(fetch, entries):
        return _response(fetch)
    return await _long_poll(manager, fetch, entries)


def _denied_topics(context: RequestContext, request: ShareFetchRequest, update: SessionUpdate) -> set[UUID]:
    authorizer = context.broker.authorizer
    if authorizer is None:
        return set()
    manager = context.broker.replica_manager
    denied = set()
    topic_ids = {topic_id for topic_id, _ in update.partitions} | {topic.topic_id for topic in request.topics}
    for topic_id in topic_ids:
        image = manager.topic_by_id(topic_id)
        if image is not None and not authorizer.authorize(
                context.principal, context.client_host, AclOperation.READ, ResourceType.TOPIC, image.name):
            denied.add(topic_id)
    return denied


async def acknowledge_partition(
    manager: SharePartitionManager, group_id: str, member_id: str, key: SessionPartition,
    batches: list[tuple[int, int, list[int]]],
) -> KafkaError | None:
    """Apply and persist one partition's acknowledgements; the error to answer, if any."""
    try:
        entry = await manager.share_partition(group_id, key[0], key[1])
        await manager.acknowledge(entry, member_id, [
            AcknowledgementBatch(first, last, tuple(types)) for first, last, types in batches])
    except KafkaError as error:
        return error
    except Exception:
        logger.exception("acknowledging %s of %s failed", key, group_id)
        return UnknownServerError()
    return None


async def _load(manager: SharePartitionManager, fetch: _Fetch, denied: set[UUID]) -> dict[SessionPartition, Any]:
    entries = {}
    for key in fetch.update.partitions:
        topic_id, index = key
        if topic_id in denied:
            fetch.outcome(key).error = TopicAuthorizationFailedError()
            continue
        try:
            entry = await manager.share_partition(fetch.group_id, topic_id, index)
        except KafkaError as error:
            fetch.outcome(key).error = error
            continue
        except Exception:
            logger.exception("loading share partition %s of %s failed", key, fetch.group_id)
            fetch.outcome(key).error = UnknownServerError()
            continue
        entries[key] = entry
        fetch.names[topic_id] = entry.topic
    return entries


def _acquire_all(manager: SharePartitionManager, fetch: _Fetch, entries: dict[SessionPartition, Any]) -> None:
    records_left = fetch.request.max_records if fetch.request.max_records > 0 else None
    bytes_left = max(fetch.request.max_bytes, 1)
    for key, entry in entries.items():
        if records_left == 0 or bytes_left <= 0:
            break
        outcome = fetch.outcome(key)
        try:
            result = manager.acquire(entry, fetch.member_id, max_records=records_left or 0, max_bytes=bytes_left)
        except KafkaError as error:
            outcome.error = error
            continue
        except Exception:
            logger.exception("share fetch from %s-%d failed", entry.topic, entry.index)
            outcome.error = UnknownServerError()
            continue
        outcome.fetched = result
        bytes_left -= len(result.records)
        if records_left is not None:
            records_left -= sum(each.last_offset - each.first_offset + 1 for each in result.acquired)


def _acquired_any(fetch: _Fetch) -> bool:
    return any(outcome.fetched is not None and outcome.fetched.acquired for outcome in fetch.outcomes.values())


def _can_answer(fetch: _Fetch, entries: dict[SessionPartition, Any], *, stopping: bool = False) -> bool:
    if stopping or fetch.request.max_wait_ms <= 0 or not entries or _acquired_any(fetch):
        return True
    return any(outcome.error is not None for outcome in fetch.outcomes.values())


class DelayedShareFetch(DelayedOperation):
    """A ShareFetch that acquired nothing, waiting (Kafka's ``DelayedShareFetch``): tried again
    when one of its partitions may have records (append, release, expiry), answered with what
    it acquires then, or at ``MaxWaitMs``."""

    def __init__(self, manager: SharePartitionManager, fetch: _Fetch, entries: dict[SessionPartition, Any],
                 answer: asyncio.Future[ShareFetchResponse]) -> None:
        super().__init__(fetch.request.max_wait_ms)
        self.manager = manager
        self.fetch = fetch
        self.entries = entries
        self.answer: asyncio.Future[ShareFetchResponse] | None = answer

    def try_complete(self) -> bool:
        if self.fetch.context.broker.stopping or any(
                self.manager.has_records(entry) for entry in self.entries.values()):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        answer, self.answer = self.answer, None
        if answer is None or answer.done():  # done: the connection went away
            return
        try:
            _acquire_all(self.manager, self.fetch, self.entries)
            answer.set_result(_response(self.fetch))
        except Exception as error:  # never lose the answer
            logger.exception("completing a share fetch failed")
            answer.set_exception(error)


def _long_poll(
    manager: SharePartitionManager, fetch: _Fetch, entries: dict[SessionPartition, Any]
) -> Coroutine[Any, Any, ShareFetchResponse]:
    answer: asyncio.Future[ShareFetchResponse] = asyncio.get_running_loop().create_future()
    keys = [(entry.topic, entry.index) for entry in entries.values()]
    fetch.context.broker.fetch_reaper.watch(DelayedShareFetch(manager, fetch, entries, answer), keys)
    return _await(answer)


async def _await(answer: asyncio.Future[ShareFetchResponse]) -> ShareFetchResponse:
    return await answer


def _response(fetch: _Fetch) -> ShareFetchResponse:
    context = fetch.context
    manager = manager_of(context)
    response = ShareFetchResponse(
        error_code=0,
        acquisition_lock_timeout_ms=manager.settings(fetch.group_id).record_lock_duration_ms)
    full = fetch.request.share_session_epoch == 0
    keys = list(dict.fromkeys([*fetch.update.partitions, *fetch.outcomes]))
    hints = LeaderHints(context.broker, context.listener_name)
    topics: dict[UUID, ShareFetchableTopicResponse] = {}
    for key in keys:
        outcome = fetch.outcomes.get(key, _Outcome())
        has_data = outcome.fetched is not None and bool(outcome.fetched.acquired)
        if not (full or has_data or outcome.error is not None or outcome.acknowledged):
            continue
        data = _partition_data(key[1], outcome)
        if data.error_code in LEADER_HINT_ERRORS:
            leader = hints.current_leader(_topic_name(context, fetch, key[0]), key[1])
            data.current_leader = LeaderIdAndEpoch(leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)
        topic = topics.get(key[0])
        if topic is None:
            topic = topics[key[0]] = ShareFetchableTopicResponse(topic_id=key[0])
            response.responses.append(topic)
        topic.partitions.append(data)
    response.node_endpoints = [NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
                               for node_id, host, port, rack in hints.hinted_endpoints()]
    return response


def _topic_name(context: RequestContext, fetch: _Fetch, topic_id: UUID) -> str:
    name = fetch.names.get(topic_id)
    if name is None:
        image = context.broker.replica_manager.topic_by_id(topic_id)
        name = "" if image is None else image.name
    return name


def _partition_data(index: int, outcome: _Outcome) -> PartitionData:
    data = PartitionData(partition_index=index, records=b"")
    if outcome.error is not None:
        data.error_code, data.error_message = outcome.error.code, str(outcome.error) or None
    if outcome.acknowledge_error is not None:
        data.acknowledge_error_code = outcome.acknowledge_error.code
        data.acknowledge_error_message = str(outcome.acknowledge_error) or None
    if outcome.fetched is not None and outcome.fetched.acquired:
        data.records = outcome.fetched.records
        data.acquired_records = [AcquiredRecords(first_offset=each.first_offset, last_offset=each.last_offset,
                                                 delivery_count=each.delivery_count)
                                 for each in outcome.fetched.acquired]
    return data


def error_response(request: ShareFetchRequest, error: KafkaError) -> ShareFetchResponse:
    return ShareFetchResponse(error_code=error.code, error_message=str(error) or None)


SPEC = register(
    ApiSpec(
        api_key=ShareFetchRequest.API_KEY,
        min_version=1,
        max_version=1,
        handle=handle,
        error_response=error_response,
        name="ShareFetch",
    )
)
