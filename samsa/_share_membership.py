"""A share group member: ShareGroupHeartbeat (KIP-932) in a background task.

As Kafka's ShareHeartbeatRequestManager: the member id is chosen by the client (a random
UUID in Kafka's base64 form, as ``Uuid.randomUuid().toString()``); the first heartbeat has
epoch 0 and the subscription, later ones the epoch the coordinator gave and the subscription
only when it changed. The coordinator answers with the member epoch, the heartbeat interval
and, when it changed, the assignment (topic ids and partitions; no revocation step: share
group partitions are shared, records are what is handed out exclusively). Leaving is a
heartbeat with epoch -1.

Errors: NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE (the coordinator is looked up again),
COORDINATOR_LOAD_IN_PROGRESS and a lost connection are retried with backoff;
UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH drop the assignment and rejoin with epoch 0 at once;
anything else (GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, UNSUPPORTED_VERSION, an authorization
failure) is fatal: ``error`` is set and the consumer's next ``poll()`` raises it.

State: belongs to the share consumer's event loop; ``assignment`` changes only in the
heartbeat task, which sets ``changed`` after each change.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Iterable, Iterator
from typing import Any
from uuid import UUID

from protocol.errors import ErrorCode, KafkaError, error_for_code
from protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from samsa._cluster import COORDINATOR_ERRORS, Cluster, backoff_delays
from samsa.errors import ClientError

__all__ = ["LEAVE_EPOCH", "ShareGroupMember", "new_member_id"]

log = logging.getLogger("samsa.share_consumer")

LEAVE_EPOCH = -1
DEFAULT_INTERVAL_MS = 5_000  # group.share.heartbeat.interval.ms's default, until told
REJOIN_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})
RETRY_ERRORS = COORDINATOR_ERRORS | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


def new_member_id() -> str:
    """A random UUID as Kafka writes one: URL-safe base64 of its 16 bytes, no padding (and,
    as Kafka's ``Uuid.randomUuid``, never starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class ShareGroupMember:
    """This consumer's membership of share group ``group.id`` (see the module docstring)."""

    def __init__(self, cluster: Cluster, config: dict[str, Any]) -> None:
        self.cluster = cluster
        self.group_id: str = config["group.id"]
        self.member_id = new_member_id()
        self.member_epoch = 0
        self.rack_id: str | None = config["client.rack"] or None
        self.subscription: tuple[str, ...] = ()
        self.assignment: dict[UUID, frozenset[int]] = {}
        self.interval_s = DEFAULT_INTERVAL_MS / 1000
        self.error: KafkaError | None = None
        self.changed = asyncio.Event()  # set whenever the assignment (or error) changes
        self._sent_subscription: tuple[str, ...] | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._config = config

    # --- subscription ----------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Ask for ``topics`` with the next heartbeat (sent at once); starts heartbeating."""
        self.subscription = tuple(sorted(set(topics)))
        if self.member_epoch < 0:  # left before: join again, with the same member id
            self.member_epoch = 0
            self._sent_subscription = None
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def active(self) -> bool:
        return self._task is not None and not self._task.done()

    # --- the heartbeat task ----------------------------------------------------------------

    async def _run(self) -> None:
        delays: Iterator[float] | None = None  # backoff while heartbeats fail
        while True:
            try:
                await self.heartbeat()
                delays = None
                wait = self.interval_s
            except KafkaError as exc:
                if exc.code in REJOIN_ERRORS:
                    self._rejoin(exc)
                    continue
                if not (exc.retriable or exc.code in RETRY_ERRORS):
                    self._fail(exc)
                    return
                if exc.code in COORDINATOR_ERRORS or isinstance(exc, ClientError):
                    self.cluster.forget_coordinator(self.group_id)
                if delays is None:
                    delays = iter(backoff_delays(self._config["retry.backoff.ms"],
                                                 self._config["retry.backoff.max.ms"]))
                wait = next(delays)
                log.debug("share group heartbeat failed (%s); again in %.2f s", exc, wait)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _rejoin(self, error: KafkaError) -> None:
        log.info("share group member %s rejoins group %s: %s", self.member_id, self.group_id,
                 error)
        self.member_epoch = 0
        self._sent_subscription = None
        self._set_assignment({})

    def _fail(self, error: KafkaError) -> None:
        log.error("share group %s: the heartbeat failed for good: %s", self.group_id, error)
        self.error = error
        self.changed.set()

    async def heartbeat(self) -> None:
        """One ShareGroupHeartbeat to the coordinator; raises the answer's error."""
        subscription = None
        if self.member_epoch == 0 or self._sent_subscription != self.subscription:
            subscription = list(self.subscription)
        request = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            rack_id=self.rack_id if self.member_epoch == 0 else None,
            subscribed_topic_names=subscription)
        response: ShareGroupHeartbeatResponse = await self._send(request)
        if response.error_code:
            raise error_for_code(response.error_code)(response.error_message or None)
        if subscription is not None:
            self._sent_subscription = tuple(subscription)
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.interval_s = response.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            self._set_assignment({
                entry.topic_id: frozenset(entry.partitions)
                for entry in response.assignment.topic_partitions})

    async def _send(self, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
        node_id = await self.cluster.coordinator(self.group_id)
        connection = await self.cluster.connection(node_id)
        return await connection.request(request, connection.version_for(type(request)))

    def _set_assignment(self, assignment: dict[UUID, frozenset[int]]) -> None:
        if assignment != self.assignment:
            log.debug("share group %s: assignment %s", self.group_id, assignment)
            self.assignment = assignment
        self.changed.set()

    # --- leaving ---------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop heartbeating (no leave)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (a heartbeat with epoch -1), if joined."""
        await self.stop()
        if self.member_epoch <= 0 and not self._sent_subscription:
            return
        request = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH)
        try:
            response = await self._send(request)
            if response.error_code:
                log.debug("leaving share group %s: error %d", self.group_id, response.error_code)
        except KafkaError as exc:
            log.debug("leaving share group %s failed: %s", self.group_id, exc)
        self.member_epoch = LEAVE_EPOCH
        self._set_assignment({})
