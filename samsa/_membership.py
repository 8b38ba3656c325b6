"""Consumer group membership with the classic protocol: the member's side of Kafka's
AbstractCoordinator / ConsumerCoordinator.

Two layers:

- ``MemberState``, sans-IO: the member id, generation, protocol and phase, stepped by the
  error codes of JoinGroup / SyncGroup / Heartbeat / OffsetCommit responses; each step returns
  what to do next. It never does I/O and is tested without sockets.
- ``GroupMember``, the asyncio shell: finds the coordinator (on a connection of its own, as
  Java's client does, so a JoinGroup parked for a whole rebalance never holds up fetches),
  joins (the member-id-required round trip of JoinGroup v4+, or a static member's
  ``group.instance.id``), runs the assignor when elected leader, syncs, heartbeats in a
  background task, commits and fetches offsets, and leaves.

Phases: UNJOINED ─join sent─▶ JOINING ─joined─▶ SYNCING ─synced─▶ STABLE, back to UNJOINED
(keeping or dropping the member id and generation) on the errors below; FATAL is final.

    JoinGroup  MEMBER_ID_REQUIRED: retry with the id given; UNKNOWN_MEMBER_ID: forget the id,
               retry; COORDINATOR_*/NOT_COORDINATOR: find the coordinator, retry;
               REBALANCE_IN_PROGRESS, COORDINATOR_LOAD_IN_PROGRESS: retry after a backoff;
               FENCED_INSTANCE_ID and the rest: fatal.
    SyncGroup  REBALANCE_IN_PROGRESS: rejoin; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION: reset
               and rejoin; coordinator errors: find it, rejoin; FENCED_INSTANCE_ID: fatal.
    Heartbeat  REBALANCE_IN_PROGRESS: rejoin on the next poll; UNKNOWN_MEMBER_ID /
               ILLEGAL_GENERATION: reset, the partitions are lost; FENCED_INSTANCE_ID: fatal.

Invariants: ``generation_id >= 0`` only with a member id; ``rejoin_needed`` is true in every
phase but STABLE; once FATAL, ``fatal`` is set and nothing changes the state again.

State: a ``GroupMember`` and its ``MemberState`` belong to the consumer's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from protocol.codec import DecodeError, Message
from protocol.errors import ErrorCode, KafkaError, error_for_code
from protocol.messages.heartbeat_request import HeartbeatRequest
from protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.join_group_response import JoinGroupResponse
from protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_commit_response import OffsetCommitResponse
from protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from protocol.messages.offset_fetch_response import OffsetFetchResponse
from protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from protocol.messages.sync_group_response import SyncGroupResponse
from samsa._cluster import Cluster, backoff_delays
from samsa._connection import BrokerConnection, connect
from samsa._sasl import sasl_credentials
from samsa.assignors import (
    Assignment,
    PartitionAssignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from samsa.errors import BrokerUnreachableError, CommitFailedError, KafkaTimeoutError
from samsa.types import OffsetAndMetadata, TopicPartition

__all__ = ["Action", "GroupMember", "MemberState", "Phase"]

log = logging.getLogger("samsa.consumer")

PROTOCOL_TYPE = "consumer"
NO_GENERATION = -1
_COORDINATOR_ERRORS = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_RESET_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION})


class Phase(Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"
    FATAL = "fatal"


class Action(Enum):
    """What the shell does after a response."""

    SYNC = "sync"                      # joined: send SyncGroup
    DONE = "done"                      # synced, or heartbeat answered: nothing to do
    RETRY = "retry"                    # send the same kind of request again now
    BACKOFF = "backoff"                # ... after a backoff
    FIND_COORDINATOR = "find"          # look the coordinator up again, then retry
    REJOIN = "rejoin"                  # start over with JoinGroup
    FATAL = "fatal"                    # raise ``MemberState.fatal``


class MemberState:
    """The member's side of one group, stepped by response error codes (sans-IO)."""

    def __init__(self, group_id: str, group_instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.phase = Phase.UNJOINED
        self.rejoin_reason = "not joined yet"
        self.fatal: KafkaError | None = None

    @property
    def rejoin_needed(self) -> bool:
        return self.phase is not Phase.STABLE

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    @property
    def has_generation(self) -> bool:
        return self.generation_id >= 0

    def join_sent(self) -> None:
        if self.phase is not Phase.FATAL:
            self.phase = Phase.JOINING

    def on_join(self, code: int, *, member_id: str = "", generation_id: int = NO_GENERATION,
                protocol_name: str | None = None, leader_id: str = "") -> Action:
        if self.phase is Phase.FATAL:
            return Action.FATAL
        if code == ErrorCode.NONE:
            self.member_id, self.generation_id = member_id, generation_id
            self.protocol_name, self.leader_id = protocol_name, leader_id
            self.phase = Phase.SYNCING
            return Action.SYNC
        self.phase = Phase.UNJOINED
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = member_id
            return Action.RETRY
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset(forget_member_id=True, reason="unknown member id")
            return Action.RETRY
        if code == ErrorCode.ILLEGAL_GENERATION:
            self.reset(forget_member_id=False, reason="illegal generation")
            return Action.RETRY
        if code in _COORDINATOR_ERRORS:
            return Action.FIND_COORDINATOR
        if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return Action.BACKOFF
        return self._fail(code, "JoinGroup")

    def on_sync(self, code: int) -> Action:
        if self.phase is Phase.FATAL:
            return Action.FATAL
        if code == ErrorCode.NONE:
            self.phase = Phase.STABLE
            return Action.DONE
        self.phase = Phase.UNJOINED
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin_reason = "the group rebalanced during SyncGroup"
            return Action.REJOIN
        if code in _RESET_ERRORS:
            self.reset(forget_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID,
                       reason=ErrorCode(code).name.lower())
            return Action.REJOIN
        if code in _COORDINATOR_ERRORS:
            return Action.FIND_COORDINATOR
        return self._fail(code, "SyncGroup")

    def on_heartbeat(self, code: int) -> Action:
        """A heartbeat's answer; one sent before a rejoin started is ignored."""
        if self.phase is Phase.FATAL:
            return Action.FATAL
        if code == ErrorCode.FENCED_INSTANCE_ID:
            return self._fail(code, "Heartbeat")
        if self.phase is not Phase.STABLE or code == ErrorCode.NONE:
            return Action.DONE
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.phase = Phase.UNJOINED
            self.rejoin_reason = "the group is rebalancing"
            return Action.REJOIN
        if code in _RESET_ERRORS:
            self.reset(forget_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID,
                       reason=ErrorCode(code).name.lower())
            return Action.REJOIN
        if code in _COORDINATOR_ERRORS:
            return Action.FIND_COORDINATOR
        return Action.DONE  # anything else: log it, keep heartbeating (Java does the same)

    def on_commit_error(self, code: int) -> Action:
        """A partition's OffsetCommit error: RETRY for retriable ones, else REJOIN (the
        commit failed for a membership reason) or FATAL."""
        if code in _COORDINATOR_ERRORS:
            return Action.FIND_COORDINATOR
        if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT):
            return Action.BACKOFF
        if code == ErrorCode.FENCED_INSTANCE_ID:
            return self._fail(code, "OffsetCommit")
        if code in _RESET_ERRORS and self.phase is not Phase.FATAL:
            self.reset(forget_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID,
                       reason=ErrorCode(code).name.lower())
            return Action.REJOIN
        if code == ErrorCode.REBALANCE_IN_PROGRESS and self.phase is Phase.STABLE:
            self.phase = Phase.UNJOINED
            self.rejoin_reason = "the group is rebalancing"
            return Action.REJOIN
        return Action.REJOIN if code == ErrorCode.REBALANCE_IN_PROGRESS else Action.FATAL

    def reset(self, *, forget_member_id: bool, reason: str) -> None:
        """Drop the generation (and the member id): the next join starts afresh."""
        if self.phase is Phase.FATAL:
            return
        self.generation_id = NO_GENERATION
        self.protocol_name = None
        self.leader_id = ""
        if forget_member_id:
            self.member_id = ""
        self.phase = Phase.UNJOINED
        self.rejoin_reason = reason

    def request_rejoin(self, reason: str) -> None:
        if self.phase is not Phase.FATAL:
            self.phase = Phase.UNJOINED
            self.rejoin_reason = reason

    def _fail(self, code: int, what: str) -> Action:
        if self.fatal is not None:  # the first fatal error is the one raised
            return Action.FATAL
        self.fatal = error_for_code(code)(f"{what} for group {self.group_id!r} failed: "
                                          f"{ErrorCode(code).name}")
        self.phase = Phase.FATAL
        return Action.FATAL


@dataclass(frozen=True, slots=True)
class JoinResult:
    generation_id: int
    protocol_name: str
    assignment: Assignment


class GroupMember:
    """The asyncio shell around ``MemberState`` (see the module docstring)."""

    def __init__(self, cluster: Cluster, config: Mapping[str, Any],
                 assignors: Sequence[PartitionAssignor], ready: asyncio.Event) -> None:
        self._cluster = cluster
        self._config = config
        self.assignors = list(assignors)
        self.state = MemberState(config["group.id"], config["group.instance.id"])
        self._connection: BrokerConnection | None = None
        self._connect_lock = asyncio.Lock()
        self._coordinator_id: int | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._ready = ready  # set when the consumer's poll() has something to do
        self.last_poll = time.monotonic()
        self.assigned_topics_snapshot: dict[str, int] = {}

    @property
    def group_id(self) -> str:
        return self.state.group_id

    # --- the coordinator connection ---

    async def _coordinator(self) -> BrokerConnection:
        if self._connection is not None and self._connection.connected:
            return self._connection
        async with self._connect_lock:  # heartbeats and commits may both get here first
            if self._connection is not None and self._connection.connected:
                return self._connection
            return await self._connect_to_coordinator()

    async def _connect_to_coordinator(self) -> BrokerConnection:
        node_id = await self._cluster.coordinator(self.group_id)
        broker = self._cluster.brokers[node_id]
        config = self._config
        self._connection = await connect(
            broker.host, broker.port, node_id=node_id, client_id=self._cluster.client_id,
            request_timeout_ms=config["request.timeout.ms"],
            setup_timeout_ms=config["socket.connection.setup.timeout.ms"],
            max_response_bytes=config["receive.message.max.bytes"],
            sasl=sasl_credentials(config))
        self._coordinator_id = node_id
        return self._connection

    def _forget_coordinator(self) -> None:
        self._cluster.forget_coordinator(self.group_id)
        if self._connection is not None:
            self._connection.close_soon()
            self._connection = None

    async def _send(self, request: Message, *, timeout: float | None = None) -> Any:
        try:
            connection = await self._coordinator()
            return await connection.request(request, timeout=timeout)
        except (BrokerUnreachableError, KafkaTimeoutError):
            self._forget_coordinator()
            raise

    async def _retrying(self, operation: Callable[[], Awaitable[Any]], what: str) -> Any:
        """Run ``operation``, finding the coordinator again after connection failures."""
        return await self._cluster.retrying(operation, what=what)

    # --- joining ---

    async def join(self, topics: Sequence[str], owned: Sequence[TopicPartition]) -> JoinResult:
        """Join (or rejoin) the group and sync; the assignment this member got."""
        delays = iter(backoff_delays(self._config["retry.backoff.ms"],
                                     self._config["retry.backoff.max.ms"]))
        self.stop_heartbeats()
        while True:
            action, response = await self._join_once(topics, owned)
            if action is Action.SYNC:
                assert response is not None
                action, assignment = await self._sync(response, topics)
                if action is Action.DONE:
                    self.start_heartbeats()
                    return JoinResult(self.state.generation_id, self.state.protocol_name or "",
                                      assignment)
            if action is Action.FATAL:
                assert self.state.fatal is not None
                raise self.state.fatal
            if action is Action.FIND_COORDINATOR:
                self._forget_coordinator()
            if action in (Action.BACKOFF, Action.FIND_COORDINATOR):
                await asyncio.sleep(next(delays))

    def _join_request(self, topics: Sequence[str], owned: Sequence[TopicPartition]) -> JoinGroupRequest:
        state, config = self.state, self._config
        protocols = []
        for assignor in self.assignors:
            subscription = Subscription(
                tuple(topics), tuple(owned), state.generation_id,
                assignor.subscription_user_data(topics, state.generation_id),
                config["client.rack"] or None)
            protocols.append(JoinGroupRequestProtocol(assignor.name,
                                                      encode_subscription(subscription)))
        return JoinGroupRequest(
            group_id=state.group_id, session_timeout_ms=config["session.timeout.ms"],
            rebalance_timeout_ms=config["max.poll.interval.ms"], member_id=state.member_id,
            group_instance_id=state.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocols=protocols, reason=state.rejoin_reason)

    async def _join_once(self, topics: Sequence[str], owned: Sequence[TopicPartition]
                         ) -> tuple[Action, JoinGroupResponse | None]:
        request = self._join_request(topics, owned)
        # The coordinator parks a JoinGroup until the rebalance ends (Java's join timeout).
        timeout = max(self._config["request.timeout.ms"],
                      self._config["max.poll.interval.ms"] + 5_000) / 1000
        self.state.join_sent()
        try:
            response: JoinGroupResponse = await self._send(request, timeout=timeout)
        except (BrokerUnreachableError, KafkaTimeoutError) as exc:
            log.info("JoinGroup for %r failed: %s", self.group_id, exc)
            self.state.request_rejoin("JoinGroup failed")
            return Action.FIND_COORDINATOR, None
        except KafkaError as exc:
            if not exc.retriable:
                raise
            return Action.BACKOFF, None
        action = self.state.on_join(
            response.error_code, member_id=response.member_id,
            generation_id=response.generation_id, protocol_name=response.protocol_name,
            leader_id=response.leader)
        log.debug("JoinGroup %r: error %d, generation %d, member %s -> %s", self.group_id,
                  response.error_code, response.generation_id, response.member_id, action)
        return action, response

    async def _sync(self, joined: JoinGroupResponse, topics: Sequence[str]
                    ) -> tuple[Action, Assignment]:
        state = self.state
        assignments: list[SyncGroupRequestAssignment] = []
        if state.is_leader:
            assignments = await self._assign(joined)
        request = SyncGroupRequest(
            group_id=state.group_id, generation_id=state.generation_id,
            member_id=state.member_id, group_instance_id=state.group_instance_id,
            protocol_type=PROTOCOL_TYPE, protocol_name=state.protocol_name,
            assignments=assignments)
        try:
            response: SyncGroupResponse = await self._send(request)
        except (BrokerUnreachableError, KafkaTimeoutError):
            state.request_rejoin("SyncGroup failed")
            return Action.FIND_COORDINATOR, Assignment(())
        action = state.on_sync(response.error_code)
        if action is not Action.DONE:
            return action, Assignment(())
        try:
            return action, decode_assignment(response.assignment)
        except DecodeError as exc:
            state.request_rejoin("undecodable assignment")
            log.warning("group %r: undecodable assignment (%s), rejoining", self.group_id, exc)
            return Action.BACKOFF, Assignment(())

    async def _assign(self, joined: JoinGroupResponse) -> list[SyncGroupRequestAssignment]:
        """As leader: run the chosen assignor over every member's subscription."""
        name = joined.protocol_name or ""
        assignor = next((a for a in self.assignors if a.name == name), None)
        if assignor is None:
            raise KafkaError(f"the group chose assignor {name!r}, which this consumer lacks")
        subscriptions: dict[str, Subscription] = {}
        for member in joined.members:
            try:
                subscriptions[member.member_id] = decode_subscription(
                    member.metadata, member.group_instance_id)
            except DecodeError as exc:
                log.warning("member %s sent undecodable metadata: %s", member.member_id, exc)
                subscriptions[member.member_id] = Subscription(())
        all_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        await self._cluster.refresh_metadata(all_topics)
        counts = {t: len(self._cluster.topics[t].partitions) for t in all_topics
                  if t in self._cluster.topics}
        self.assigned_topics_snapshot = counts
        result = assignor.assign(counts, subscriptions)
        log.debug("group %r generation %d: %s assigned %s", self.group_id,
                  self.state.generation_id, name, result)
        return [SyncGroupRequestAssignment(member_id, encode_assignment(assignment))
                for member_id, assignment in result.items()]

    # --- heartbeats ---

    def start_heartbeats(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeats())

    def stop_heartbeats(self) -> None:
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None and task is not asyncio.current_task():  # it may be leaving itself
            task.cancel()

    async def _heartbeats(self) -> None:
        interval = self._config["heartbeat.interval.ms"] / 1000
        max_poll_interval = self._config["max.poll.interval.ms"] / 1000
        while self.state.phase is Phase.STABLE:
            await asyncio.sleep(interval)
            if self.state.phase is not Phase.STABLE:
                return
            if time.monotonic() - self.last_poll > max_poll_interval:
                log.warning("group %r: poll() not called within max.poll.interval.ms; leaving"
                            " the group", self.group_id)
                await self.leave("consumer poll timeout has expired")
                self._ready.set()
                return
            await self._heartbeat_once()

    async def _heartbeat_once(self) -> None:
        state = self.state
        request = HeartbeatRequest(group_id=state.group_id, generation_id=state.generation_id,
                                   member_id=state.member_id,
                                   group_instance_id=state.group_instance_id)
        try:
            response = await self._send(request)
        except KafkaError as exc:
            log.debug("heartbeat for %r failed: %s", self.group_id, exc)
            return
        action = state.on_heartbeat(response.error_code)
        if action is Action.FIND_COORDINATOR:
            self._forget_coordinator()
        elif action in (Action.REJOIN, Action.FATAL):
            log.info("group %r: heartbeat answered %s, rejoining", self.group_id,
                     ErrorCode(response.error_code).name)
            self._ready.set()

    # --- leaving ---

    async def leave(self, reason: str) -> None:
        """LeaveGroup for a dynamic member (a static one stays until its session expires, as
        Java's does), then forget the generation."""
        state = self.state
        self.stop_heartbeats()
        if state.member_id and state.group_instance_id is None and state.phase is not Phase.FATAL:
            try:
                await self._send_leave(reason)
            except KafkaError as exc:
                log.info("LeaveGroup for %r failed: %s", self.group_id, exc)
        state.reset(forget_member_id=True, reason=reason)

    async def _send_leave(self, reason: str) -> None:
        state = self.state
        connection = await self._coordinator()
        if connection.version_for(LeaveGroupRequest) >= 3:  # v3+: a batch of members
            request = LeaveGroupRequest(group_id=state.group_id, members=[
                MemberIdentity(state.member_id, state.group_instance_id, reason)])
        else:
            request = LeaveGroupRequest(group_id=state.group_id, member_id=state.member_id)
        response = await self._send(request)
        codes = [response.error_code, *(m.error_code for m in response.members)]
        if any(codes):
            log.info("LeaveGroup for %r answered %s", self.group_id, codes)

    async def close(self) -> None:
        self.stop_heartbeats()
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    # --- offsets ---

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                     use_generation: bool) -> None:
        """OffsetCommit; ``use_generation`` for a group-managed assignment (else -1, as a
        consumer with ``assign()`` commits). CommitFailedError after a membership change."""
        if not offsets:
            return
        await self._retrying(lambda: self._commit_once(offsets, use_generation), "OffsetCommit")

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                           use_generation: bool) -> None:
        state = self.state
        generation = state.generation_id if use_generation else NO_GENERATION
        member_id = state.member_id if use_generation else ""
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, meta in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=meta.offset,
                committed_leader_epoch=meta.leader_epoch, committed_metadata=meta.metadata))
        request = OffsetCommitRequest(
            group_id=state.group_id, generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=state.group_instance_id if use_generation else None,
            topics=[OffsetCommitRequestTopic(t, p) for t, p in topics.items()])
        response: OffsetCommitResponse = await self._send(request)
        codes = {p.error_code for t in response.topics for p in t.partitions} - {0}
        for code in sorted(codes):
            self._commit_failed(code)

    def _commit_failed(self, code: int) -> None:
        action = self.state.on_commit_error(code)
        error = error_for_code(code)
        if action is Action.FIND_COORDINATOR:
            self._forget_coordinator()
        if action in (Action.FIND_COORDINATOR, Action.BACKOFF):
            raise error(f"OffsetCommit for group {self.group_id!r}")
        if action is Action.REJOIN:
            self._ready.set()
            raise CommitFailedError(
                f"commit failed for group {self.group_id!r}: {ErrorCode(code).name}; the group"
                " rebalanced and the partitions may now belong to another member")
        raise error(f"OffsetCommit for group {self.group_id!r} failed: {ErrorCode(code).name}")

    async def fetch_committed(self, partitions: Sequence[TopicPartition]
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offset of each partition (None where there is none)."""
        if not partitions:
            return {}
        result: dict[TopicPartition, OffsetAndMetadata | None] = await self._retrying(
            lambda: self._fetch_committed_once(partitions), "OffsetFetch")
        return result

    async def _fetch_committed_once(self, partitions: Sequence[TopicPartition]
                                    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        connection = await self._coordinator()
        version = connection.version_for(OffsetFetchRequest)
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(set(partitions)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        if version >= 8:
            request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
                group_id=self.group_id,
                topics=[OffsetFetchRequestTopics(t, p) for t, p in by_topic.items()])],
                require_stable=True)
        else:
            request = OffsetFetchRequest(
                group_id=self.group_id, require_stable=version >= 7,
                topics=[OffsetFetchRequestTopic(t, p) for t, p in by_topic.items()])
        response: OffsetFetchResponse = await self._send(request)
        if version >= 8:
            group = response.groups[0]
            code, topics = group.error_code, group.topics
        else:
            code, topics = response.error_code, response.topics  # type: ignore[assignment]
        self._raise_fetch_error(code)
        result: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for topic in topics:
            for p in topic.partitions:
                self._raise_fetch_error(p.error_code)
                tp = TopicPartition(topic.name, p.partition_index)
                result[tp] = (None if p.committed_offset < 0 else OffsetAndMetadata(
                    p.committed_offset, p.metadata or "", p.committed_leader_epoch))
        return result

    def _raise_fetch_error(self, code: int) -> None:
        if not code:
            return
        if code in _COORDINATOR_ERRORS:
            self._forget_coordinator()
        raise error_for_code(code)(f"OffsetFetch for group {self.group_id!r}")
