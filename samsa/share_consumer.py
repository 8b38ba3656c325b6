"""The share consumer: a member of a share group (KIP-932, "queues for Kafka"), with Kafka's
KafkaShareConsumer semantics and config names.

    from samsa import ShareConsumer, AcknowledgeType

    with ShareConsumer("jobs", bootstrap_servers="localhost:9092", group_id="workers",
                       share_acknowledgement_mode="explicit") as consumer:
        for record in consumer.poll(1.0):
            ok = handle(record.value)
            consumer.acknowledge(record, AcknowledgeType.ACCEPT if ok else AcknowledgeType.RELEASE)
        consumer.commit_sync()

The members of a share group share the partitions of the topics they subscribe to; the
brokers hand each record to one member at a time (acquired with a time-limited lock) and count
its deliveries (``ShareConsumerRecord.delivery_count``). A record is done when a member
acknowledges it ACCEPT (processed) or REJECT (archived, never again); RELEASE, or a lock that
lapses, makes it available again.

Two layers, as ``samsa.consumer``: ``AsyncShareConsumer``, the asyncio core (membership in
``samsa._share_membership``, share sessions and decoding in ``samsa._share_fetch``,
acknowledgement bookkeeping in ``samsa._share_acks``), and ``ShareConsumer``, the blocking
facade on its own event loop thread (``samsa._loop``).

Semantics (Kafka 4.3's ShareConsumerImpl):

- ``share.acknowledgement.mode=implicit`` (the default): every record a ``poll()`` returned is
  acknowledged ACCEPT by the next ``poll()``, ``commit_sync()``, ``commit_async()`` or
  ``close()``; ``acknowledge()`` is not allowed. ``explicit``: the application acknowledges
  each record; ``poll()`` raises ``IllegalStateError`` while a record of the previous poll is
  unacknowledged.
- Acknowledgements ride on the next ShareFetch to the broker that delivered the records
  (``poll()``), or go at once in a ShareAcknowledge (``commit_sync()`` waits for the answers
  and returns each partition's error or None; ``commit_async()`` does not wait).
- ``poll()`` fetches only when it has no records left to hand out: ShareFetch v1 to the leader
  of each assigned partition, in a share session per broker, waiting up to ``fetch.max.wait.ms``
  (and no longer than the poll's timeout); it returns at most ``max.poll.records`` records.
- ``close()`` acknowledges (implicit mode), closes each share session with a ShareAcknowledge
  of epoch -1 (what is unacknowledged is released by the broker) and leaves the group.

Not implemented: ``share.acquire.mode`` (ShareFetch v2's record_limit), RENEW acknowledgements,
the acknowledgement commit callback (failed piggybacked acknowledgements are logged), metrics.

State: an ``AsyncShareConsumer`` belongs to one event loop; a ``ShareConsumer`` may be used
from one thread at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Collection, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar
from uuid import UUID

from protocol.errors import ErrorCode, KafkaError, error_for_code
from protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from protocol.messages.share_acknowledge_response import ShareAcknowledgeResponse
from protocol.messages.share_fetch_request import ShareFetchRequest
from protocol.messages.share_fetch_response import ShareFetchResponse
from samsa._cluster import METADATA_ERRORS, Cluster
from samsa._decoding import Decoders
from samsa._loop import LoopThread
from samsa._share_acks import AcknowledgeType, InFlightRecords
from samsa._share_fetch import FetchSettings, SharedRecords, ShareSession, share_records
from samsa._share_membership import ShareGroupMember
from samsa.config import parse_config
from samsa.errors import BrokerUnreachableError, ClientClosedError, IllegalStateError
from samsa.types import ConsumerRecord, ShareConsumerRecord, TopicPartition

__all__ = ["AcknowledgeType", "AsyncShareConsumer", "ShareConsumer"]

log = logging.getLogger("samsa.share_consumer")

T = TypeVar("T")
SHARE_API_VERSION = 1  # ShareFetch / ShareAcknowledge v1 (Kafka 4.1's, the first stable)
DEFAULT_CLOSE_TIMEOUT_S = 30.0
EARLY_ANSWER_S = 0.02
CommitResult = dict[TopicPartition, KafkaError | None]


class AsyncShareConsumer:
    """The asyncio core of ``ShareConsumer`` (same methods, awaited); create it in the loop."""

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None,
                 **settings: Any) -> None:
        self.config = parse_config("share_consumer", config, settings)
        self._cluster = Cluster(self.config)
        self._member = ShareGroupMember(self._cluster, self.config)
        self._explicit = self.config["share.acknowledgement.mode"] == "explicit"
        self._in_flight = InFlightRecords()
        self._sessions: dict[int, ShareSession] = {}
        self._node_locks: dict[int, asyncio.Lock] = {}
        self._buffer: deque[SharedRecords] = deque()
        self._decoders = Decoders({**self.config, "isolation.level": "read_uncommitted"})
        self._settings = FetchSettings(
            max_wait_ms=self.config["fetch.max.wait.ms"], min_bytes=self.config["fetch.min.bytes"],
            max_bytes=self.config["fetch.max.bytes"], max_records=self.config["max.poll.records"])
        self._commit_tasks: set[asyncio.Task[CommitResult]] = set()
        self._closed = False
        if topics:
            self.subscribe(topics)

    @property
    def member_id(self) -> str:
        return self._member.member_id

    # --- subscription ---

    def subscribe(self, topics: Sequence[str]) -> None:
        """Join the share group (``group.id``) for ``topics`` (replacing any earlier ones)."""
        self._check_open()
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise ValueError("subscribe() needs at least one topic (use unsubscribe())")
        self._member.subscribe(names)

    def subscription(self) -> set[str]:
        return set(self._member.subscription)

    async def unsubscribe(self) -> None:
        """Acknowledge what is due (implicit mode), close the share sessions (the brokers
        release every record still acquired: buffered ones too), leave the group."""
        self._check_open()
        await self._close_sessions()
        await self._member.leave()
        self._member.subscription = ()

    # --- poll ---

    async def poll(self, timeout: float = 1.0) -> list[ShareConsumerRecord]:
        """Up to ``max.poll.records`` records, waiting up to ``timeout`` seconds for the
        first; an empty list when none came. Acknowledges the previous poll's records first
        (implicit mode), or checks that they are (explicit mode)."""
        self._check_open()
        if not self._member.subscription:
            raise IllegalStateError("the share consumer is not subscribed to any topic")
        self._finish_delivery()
        deadline = time.monotonic() + max(timeout, 0)
        while True:
            if self._member.error is not None:
                raise self._member.error
            records = self._take(self.config["max.poll.records"])
            if records:
                return records
            remaining = deadline - time.monotonic()
            assigned = await self._assigned_partitions()
            if assigned or self._in_flight.pending_nodes():
                started = time.monotonic()
                await self._fetch_round(assigned, max(0, int(remaining * 1000)))
                if not self._buffer and time.monotonic() - started < EARLY_ANSWER_S:
                    # an error, not a long poll: back off before asking again
                    await asyncio.sleep(min(max(remaining, 0), self.config["retry.backoff.ms"] / 1000))
            elif remaining > 0:
                self._member.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._member.changed.wait(), remaining)
            if not self._buffer and time.monotonic() >= deadline:
                return []

    def _finish_delivery(self) -> None:
        """The previous poll's records: acknowledged ACCEPT (implicit) or checked (explicit);
        acknowledged ones move to the pending acknowledgements."""
        if self._explicit:
            missing = self._in_flight.unacknowledged
            if missing:
                raise IllegalStateError(
                    f"all records must be acknowledged in explicit acknowledgement mode "
                    f"({missing} of the previous poll are not)")
        else:
            self._in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        self._in_flight.settle()

    def _take(self, limit: int) -> list[ShareConsumerRecord]:
        out: list[ShareConsumerRecord] = []
        while self._buffer and len(out) < limit:
            shared = self._buffer[0]
            taken = shared.records[shared.index:shared.index + limit - len(out)]
            shared.index += len(taken)
            self._in_flight.deliver(shared.tp, shared.node_id, [r.offset for r in taken],
                                    shared.gaps)
            shared.gaps = []
            out.extend(taken)
            if shared.exhausted:
                self._buffer.popleft()
        return out

    # --- acknowledging ---

    def acknowledge(self, record: ConsumerRecord,
                    type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge a record of the latest poll (explicit mode): ACCEPT (processed),
        RELEASE (deliver it again) or REJECT (never again). Sent with the next poll or commit."""
        self._check_open()
        if not self._explicit:
            raise IllegalStateError("acknowledge() needs share.acknowledgement.mode=explicit "
                                    "(implicit acknowledgement is being used)")
        self._in_flight.acknowledge(TopicPartition(record.topic, record.partition),
                                    record.offset, AcknowledgeType(type))

    async def commit_sync(self) -> CommitResult:
        """Send the acknowledgements due now (ShareAcknowledge) and wait for the answers: each
        partition's error, or None where they were taken. NOT_LEADER_OR_FOLLOWER "no share
        session to carry the acknowledgements": never sent; ``BrokerUnreachableError``: no
        answer came (lost connection, timeout), so they may or may not have been applied."""
        self._check_open()
        if not self._explicit:
            self._in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        self._in_flight.settle()
        pending = self._in_flight.take_all()
        results = await asyncio.gather(*(self._acknowledge(node_id, acks)
                                         for node_id, acks in pending.items()))
        merged: CommitResult = {}
        for result in results:
            merged.update(result)
        return merged

    def commit_async(self) -> None:
        """``commit_sync()`` without waiting (failures are logged)."""
        task = asyncio.get_running_loop().create_task(self._logged_commit())
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)

    async def _logged_commit(self) -> CommitResult:
        result = await self.commit_sync()
        for tp, error in result.items():
            if error is not None:
                log.warning("acknowledgements of %s-%d failed: %s", tp.topic, tp.partition, error)
        return result

    # --- the wire ---

    def _node_lock(self, node_id: int) -> asyncio.Lock:
        return self._node_locks.setdefault(node_id, asyncio.Lock())

    def _session(self, node_id: int) -> ShareSession:
        session = self._sessions.get(node_id)
        if session is None:
            session = ShareSession(node_id, self._member.group_id, self._member.member_id)
            self._sessions[node_id] = session
        return session

    async def _topic_ids(self, wanted: Collection[UUID] = ()) -> dict[str, UUID]:
        """Topic name -> id for the subscribed topics (metadata refreshed when one of
        ``wanted`` is unknown, or when stale)."""
        def known() -> dict[str, UUID]:
            return {name: UUID(info.topic_id) for name, info in self._cluster.topics.items()
                    if info.topic_id and name in self._member.subscription}
        found = known()
        if self._cluster.metadata_is_stale or not set(wanted) <= set(found.values()):
            await self._cluster.refresh_metadata(self._member.subscription)
            found = known()
        return found

    async def _assigned_partitions(self) -> dict[int, dict[TopicPartition, UUID]]:
        """The assignment by leader: node -> {partition: topic id}."""
        assignment = self._member.assignment
        if not assignment:
            return {}
        names = {topic_id: name for name, topic_id in
                 (await self._topic_ids(set(assignment))).items()}
        by_node: dict[int, dict[TopicPartition, UUID]] = {}
        for topic_id, partitions in assignment.items():
            name = names.get(topic_id)
            info = self._cluster.topics.get(name) if name is not None else None
            if info is None:
                continue
            for partition in partitions:
                leader = info.partitions.get(partition)
                if leader is not None and leader.leader >= 0:
                    by_node.setdefault(leader.leader, {})[TopicPartition(name, partition)] = topic_id  # type: ignore[arg-type]
        return by_node

    async def _fetch_round(self, assigned: dict[int, dict[TopicPartition, UUID]],
                           wait_ms: int) -> None:
        nodes = set(assigned) | set(self._in_flight.pending_nodes())
        topic_ids = await self._topic_ids()
        settings = FetchSettings(
            max_wait_ms=min(self._settings.max_wait_ms, wait_ms), min_bytes=self._settings.min_bytes,
            max_bytes=self._settings.max_bytes, max_records=self._settings.max_records)
        await asyncio.gather(*(self._fetch_from(node_id, assigned.get(node_id, {}), topic_ids,
                                                settings) for node_id in sorted(nodes)))

    async def _fetch_from(self, node_id: int, wanted: dict[TopicPartition, UUID],
                          topic_ids: dict[str, UUID], settings: FetchSettings) -> None:
        async with self._node_lock(node_id):
            session = self._session(node_id)
            acknowledgements = self._in_flight.take(node_id)
            request, failed = session.fetch_request(wanted, acknowledgements, topic_ids, settings)
            for tp in failed:
                log.warning("acknowledgements of %s-%d could not be sent (a new share session): "
                            "the broker will deliver those records again", tp.topic, tp.partition)
            if not wanted and not request.topics and not request.forgotten_topics_data:
                return  # nothing to fetch, acknowledge or forget at this broker
            log.debug("%s: ShareFetch to node %d: epoch %d, %d topics, %d forgotten, wait %d ms",
                      session.member_id, node_id, request.share_session_epoch,
                      len(request.topics), len(request.forgotten_topics_data), request.max_wait_ms)
            response = await self._send(node_id, request, session)
            if response is None:
                return
            self._fetched(node_id, response)
            log.debug("%s: ShareFetch answered: error %d, %d partitions buffered",
                      session.member_id, response.error_code, len(self._buffer))

    async def _send(self, node_id: int, request: ShareFetchRequest | ShareAcknowledgeRequest,
                    session: ShareSession) -> Any:
        try:
            connection = await self._cluster.connection(node_id)
            version = connection.version_for(type(request), max_version=SHARE_API_VERSION)
            response = await connection.request(request, version)
        except (BrokerUnreachableError, KafkaError) as exc:
            log.debug("share request to node %d failed: %s", node_id, exc)
            session.reset()
            self._cluster.invalidate_metadata()  # leaders may have moved
            return None
        session.answered(response.error_code)
        if response.error_code:
            log.debug("share request to node %d: error %d", node_id, response.error_code)
            if response.error_code in METADATA_ERRORS:
                self._cluster.invalidate_metadata()
        return response

    def _fetched(self, node_id: int, response: ShareFetchResponse) -> None:
        names = {UUID(info.topic_id): name for name, info in self._cluster.topics.items()
                 if info.topic_id}
        for topic in response.responses:
            name = names.get(topic.topic_id)
            if name is None:
                continue
            for data in topic.partitions:
                tp = TopicPartition(name, data.partition_index)
                if data.acknowledge_error_code:
                    log.warning("acknowledgements of %s-%d failed: %s", name, data.partition_index,
                                error_for_code(data.acknowledge_error_code).__name__)
                if data.error_code:
                    if data.error_code in METADATA_ERRORS:
                        self._cluster.invalidate_metadata()
                    continue
                shared = share_records(tp, node_id, data, self._decoders)
                if shared.records or shared.gaps:
                    self._buffer.append(shared)

    async def _acknowledge(self, node_id: int, acknowledgements: dict[TopicPartition, dict[int, int]],
                           *, close: bool = False) -> CommitResult:
        """One ShareAcknowledge to ``node_id`` (closing its session with ``close``)."""
        async with self._node_lock(node_id):
            session = self._session(node_id)
            topic_ids = {tp.topic: topic_id for tp, topic_id in session.partitions.items()}
            topic_ids.update(await self._topic_ids())
            request = session.acknowledge_request(acknowledgements, topic_ids, close=close)
            not_sent = error_for_code(ErrorCode.NOT_LEADER_OR_FOLLOWER)(
                "no share session to carry the acknowledgements")
            if request is None:
                return dict.fromkeys(acknowledgements, not_sent)
            response: ShareAcknowledgeResponse | None = await self._send(node_id, request, session)
        if response is None:  # sent, or perhaps sent: the broker may have applied them
            no_answer = BrokerUnreachableError(
                f"node {node_id}", "no answer to the ShareAcknowledge: its acknowledgements may "
                "or may not have been applied")
            return dict.fromkeys(acknowledgements, no_answer)
        if response.error_code:
            error = error_for_code(response.error_code)(response.error_message or None)
            return dict.fromkeys(acknowledgements, error)
        names = {topic_id: tp.topic for tp, topic_id in session.partitions.items()}
        names.update({topic_id: name for name, topic_id in topic_ids.items()})
        result: CommitResult = dict.fromkeys(acknowledgements)
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(names.get(topic.topic_id, str(topic.topic_id)),
                                    data.partition_index)
                result[tp] = (error_for_code(data.error_code)(data.error_message or None)
                              if data.error_code else None)
        return result

    # --- closing ---

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the share consumer is closed")

    async def _close_sessions(self) -> None:
        """Acknowledge what is due (every delivered record in implicit mode), then close each
        share session (ShareAcknowledge, epoch -1); buffered records are dropped (the brokers
        release them with the session)."""
        if not self._explicit:
            self._in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        self._in_flight.settle()
        pending = self._in_flight.take_all()
        self._in_flight.forget({shared.tp for shared in self._buffer}
                               | {tp for session in self._sessions.values()
                                  for tp in session.partitions})
        self._buffer.clear()
        nodes = {n for n, s in self._sessions.items() if not s.is_new} | set(pending)
        await asyncio.gather(*(self._acknowledge(node_id, pending.get(node_id, {}), close=True)
                               for node_id in nodes), return_exceptions=True)

    async def close(self) -> None:
        """Acknowledge (implicit mode), close the share sessions, leave the group."""
        if self._closed:
            return
        try:
            await asyncio.gather(*self._commit_tasks, return_exceptions=True)
            await self._close_sessions()
            await self._member.leave()
        finally:
            self._closed = True
            await self._member.stop()
            await self._cluster.close()

    async def __aenter__(self) -> AsyncShareConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class ShareConsumer:
    """A blocking share consumer (see the module docstring). Configuration: ``config``
    (Kafka's dotted names) and/or keyword arguments (underscores for dots); ``group.id`` is
    required; topics given here are subscribed to."""

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None,
                 **settings: Any) -> None:
        parse_config("share_consumer", config, settings)  # fail before any thread starts
        self._closed = False
        self._loop = LoopThread("samsa-share-consumer")
        try:
            self._core: AsyncShareConsumer = self._loop.run(self._create(topics, config, settings))
        except BaseException:
            self._loop.close()
            raise

    @staticmethod
    async def _create(topics: Sequence[str], config: Mapping[str, Any] | None,
                      settings: Mapping[str, Any]) -> AsyncShareConsumer:
        return AsyncShareConsumer(*topics, config=config, **settings)

    @property
    def config(self) -> dict[str, Any]:
        return self._core.config

    @property
    def member_id(self) -> str:
        return self._core.member_id

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coroutine)

    def _call(self, function: Any, *args: Any) -> Any:
        async def call() -> Any:
            return function(*args)
        return self._loop.run(call())

    def subscribe(self, topics: Sequence[str]) -> None:
        self._call(self._core.subscribe, [topics] if isinstance(topics, str) else list(topics))

    def subscription(self) -> set[str]:
        return self._call(self._core.subscription)

    def unsubscribe(self) -> None:
        self._run(self._core.unsubscribe())

    def poll(self, timeout: float = 1.0) -> list[ShareConsumerRecord]:
        """Up to ``max.poll.records`` records, waiting up to ``timeout`` seconds for the first."""
        return self._run(self._core.poll(timeout))

    def __iter__(self) -> Iterator[ShareConsumerRecord]:
        """Every record as it arrives; never ends (break out of it, then ``close()``)."""
        while True:
            yield from self.poll(1.0)

    def acknowledge(self, record: ConsumerRecord,
                    type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        self._call(self._core.acknowledge, record, type)

    def commit_sync(self, timeout: float | None = None) -> CommitResult:
        """Send the due acknowledgements and wait (up to ``timeout`` s, default
        ``default.api.timeout.ms``); each partition's error, or None."""
        limit = self.config["default.api.timeout.ms"] / 1000 if timeout is None else timeout
        return self._loop.run(self._core.commit_sync(), limit)

    def commit_async(self) -> None:
        self._call(self._core.commit_async)

    def close(self, timeout: float | None = None) -> None:
        """Acknowledge, close the share sessions and leave the group; waits up to ``timeout``
        seconds (default 30), then closes the connections regardless."""
        if self._closed:
            return
        self._closed = True
        limit = DEFAULT_CLOSE_TIMEOUT_S if timeout is None else timeout
        try:
            self._loop.run(asyncio.wait_for(self._core.close(), limit))
        except (TimeoutError, KafkaError) as exc:
            log.warning("the share consumer did not close cleanly: %s", exc)
        finally:
            self._loop.close()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
