"""``BrokerLifecycleManager``: this broker's registration and heartbeats with the active
controller (Kafka's ``BrokerLifecycleManager``, KIP-631).

States, in order: STARTING (registering: BrokerRegistration with a fresh incarnation id per
process, retried with backoff until the controller answers), RECOVERY (registered and fenced:
heartbeats ask to stay fenced until the controller says the broker's metadata has caught up
with its registration; these heartbeats go every ``retry_backoff_ms``, not every interval, so a
starting broker is unfenced as soon as it has caught up), RUNNING (heartbeats ask to be unfenced; the controller unfences), then
on a controlled stop PENDING_CONTROLLED_SHUTDOWN (heartbeats ask to shut down until the
controller has moved this broker's leaderships away and answers ``should_shut_down``), and
SHUTTING_DOWN. Heartbeats go every ``broker.heartbeat.interval.ms`` and carry the offset of the
last metadata record this broker applied.

A heartbeat that is refused with STALE_BROKER_EPOCH or that the controller no longer knows
(the session expired and the broker was fenced, or the controller lost its state) makes the
broker register again, as Kafka's does.

Transport: ``send`` delivers a request to the active controller and returns its response, or
None when there is none or it cannot be reached (``broker.quorum``). Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence

from protocol.codec import Message
from protocol.errors import ErrorCode
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
)
from protocol.messages.broker_registration_request import (
    Listener as RegisteredListener,
)
from protocol.messages.broker_registration_response import BrokerRegistrationResponse
from replication.events import EVENTS

__all__ = ["BrokerLifecycleManager", "BrokerState"]

logger = logging.getLogger("samsa.broker.lifecycle")

# A controlled shutdown with no controller answering (the quorum lost its majority, as when a
# whole cluster stops) goes ahead after this many unanswered heartbeats: nothing can move the
# leaderships then, and waiting would only delay the stop.
UNANSWERED_BEFORE_GIVING_UP = 3

Send = Callable[[Message], Awaitable[Message | None]]


class BrokerState(enum.Enum):
    STARTING = "starting"
    RECOVERY = "recovery"
    RUNNING = "running"
    PENDING_CONTROLLED_SHUTDOWN = "pending_controlled_shutdown"
    SHUTTING_DOWN = "shutting_down"


class BrokerLifecycleManager:
    def __init__(
        self,
        *,
        node_id: int,
        cluster_id: Callable[[], str],
        listeners: Sequence[RegisteredListener],
        rack: str | None,
        features: Sequence[Feature],
        send: Send,
        metadata_offset: Callable[[], int],
        heartbeat_interval_ms: int = 2000,
        retry_backoff_ms: int = 100,
        previous_broker_epoch: int = -1,
    ) -> None:
        self.node_id = node_id
        self.incarnation_id = uuid.uuid4()
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        # The epoch the last clean stop wrote in .kafka_cleanshutdown (-1: none): the first
        # registration's proof of a clean shutdown (KIP-966); later ones send this process's own.
        self._previous_broker_epoch = previous_broker_epoch
        self.fenced = True
        self._cluster_id = cluster_id
        self._listeners = list(listeners)
        self._rack = rack
        self._features = list(features)
        self._send = send
        self._metadata_offset = metadata_offset
        self._interval_s = heartbeat_interval_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._caught_up = asyncio.Event()
        self._unfenced = asyncio.Event()
        self._shut_down_allowed = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._unanswered = 0  # heartbeats in a row with no answer

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="broker-lifecycle")

    async def stop(self) -> None:
        self.state = BrokerState.SHUTTING_DOWN
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait_unfenced(self) -> None:
        await self._unfenced.wait()

    async def wait_caught_up(self) -> None:
        """Registered, and the controller says this broker's metadata has caught up (Kafka's
        ``initialCatchUpFuture``)."""
        await self._caught_up.wait()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away; True once it agreed."""
        if self.state in (BrokerState.STARTING, BrokerState.SHUTTING_DOWN):
            return False
        self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        self._wake.set()
        try:
            await asyncio.wait_for(self._shut_down_allowed.wait(), timeout_s)
        except TimeoutError:
            logger.warning("controlled shutdown not confirmed within %.1f s", timeout_s)
            return False
        return True

    async def _run(self) -> None:
        while self.state is not BrokerState.SHUTTING_DOWN:
            if self.state is BrokerState.STARTING:
                if not await self._register():
                    await asyncio.sleep(self._backoff_s)
                continue
            await self._heartbeat()
            self._wake.clear()
            # Catching up (RECOVERY) asks again soon: unfencing waits on it, not on the interval.
            interval_s = self._backoff_s if self.state is BrokerState.RECOVERY else self._interval_s
            timer = asyncio.get_running_loop().call_later(interval_s, self._wake.set)
            await self._wake.wait()  # the interval, or a state change that must be told now
            timer.cancel()

    async def _register(self) -> bool:
        previous = self.broker_epoch if self.broker_epoch >= 0 else self._previous_broker_epoch
        request = BrokerRegistrationRequest(
            broker_id=self.node_id, cluster_id=self._cluster_id(),
            incarnation_id=self.incarnation_id, listeners=self._listeners,
            features=self._features, rack=self._rack, previous_broker_epoch=previous,
        )
        response = await self._send(request)
        if not isinstance(response, BrokerRegistrationResponse):
            return False
        if response.error_code != ErrorCode.NONE:
            logger.info("registration refused: %s", ErrorCode(response.error_code).name)
            return False
        self.broker_epoch = response.broker_epoch
        self.state = BrokerState.RECOVERY
        logger.info("registered broker %d with epoch %d", self.node_id, self.broker_epoch)
        return True

    async def _heartbeat(self) -> None:
        request = BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self._metadata_offset(),
            want_fence=self.state is BrokerState.RECOVERY,
            want_shut_down=self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN,
        )
        response = await self._send(request)
        if isinstance(response, BrokerHeartbeatResponse):
            self._unanswered = 0
            self._on_heartbeat_response(response)
            return
        self._unanswered += 1
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN and \
                self._unanswered >= UNANSWERED_BEFORE_GIVING_UP:
            logger.warning("no controller answers: shutting down without moving leaderships")
            self._shut_down_allowed.set()
        elif self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            await asyncio.sleep(self._backoff_s)  # try the next controller soon
            self._wake.set()

    def _on_heartbeat_response(self, response: BrokerHeartbeatResponse) -> None:
        if response.error_code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            logger.info("heartbeat refused (%s): registering again",
                        ErrorCode(response.error_code).name)
            self.state = BrokerState.STARTING
            if not self.fenced:
                EVENTS.emit("fenced", why=ErrorCode(response.error_code).name)
            self.fenced = True
            self._unfenced.clear()
            return
        if response.error_code != ErrorCode.NONE:
            return  # NOT_CONTROLLER and the like: the next heartbeat goes to the new controller
        was_fenced, self.fenced = self.fenced, response.is_fenced
        if was_fenced != self.fenced:
            EVENTS.emit("fenced" if self.fenced else "unfenced")
        if self.state is BrokerState.RECOVERY and response.is_caught_up:
            self.state = BrokerState.RUNNING
            self._caught_up.set()
            self._wake.set()  # ask to be unfenced at once
        if was_fenced and not self.fenced:
            logger.info("broker %d unfenced", self.node_id)
            self._unfenced.set()
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN and response.should_shut_down:
            self._shut_down_allowed.set()
