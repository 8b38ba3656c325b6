"""Broker sessions on the active controller: Kafka's ``BrokerHeartbeatManager``, sans-IO.

State, per registered broker (soft state: not in the metadata log; the active controller rebuilds
it with ``activate`` when it takes over, giving every broker a fresh session, as Kafka does):
- ``last_contact_ms``: when the controller last heard from it (registration, heartbeat, or a
  replayed change of its registration);
- ``metadata_offset``: the ``current_metadata_offset`` of its last heartbeat (-1: none yet);
- ``fenced``: whether the controller treats it as fenced;
- ``controlled_shutdown_offset``: -1, or the end offset of the batch that moved it into
  controlled shutdown; it may shut down once every active broker's metadata reaches it.

Invariants: a session is valid while ``last_contact_ms + session_timeout_ms >= now_ms`` and the
broker is unfenced (a fenced broker has no session); a fenced broker is never in controlled
shutdown (fencing clears the offset); ``lowest_active_offset`` is over unfenced brokers not in
controlled shutdown.

Time is passed in (``now_ms``) by the caller; nothing here reads a clock. The manager is owned
by the active controller's event loop (one task).

The controller keeps it in step with the log by calling ``replay`` for every committed broker
record (Kafka's ``ClusterControlManager.replay`` hooks), and ``touch`` / ``fence`` from its
heartbeat and session-expiry planners (``replication.controller.cluster_control``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from protocol.codec import Message
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.metadata.register_broker_record import RegisterBrokerRecord
from protocol.messages.metadata.unregister_broker_record import UnregisterBrokerRecord
from replication.metadata.brokers import BROKER_RECORD_TYPES, broker_id_of
from replication.metadata.image import MetadataImage

__all__ = [
    "DEFAULT_SESSION_TIMEOUT_MS",
    "BrokerControlState",
    "BrokerHeartbeatManager",
    "BrokerSession",
]

DEFAULT_SESSION_TIMEOUT_MS = 9000  # Kafka's broker.session.timeout.ms


class BrokerControlState(Enum):
    """Kafka's ``BrokerControlState``: (fenced, should shut down)."""

    FENCED = (True, False)
    UNFENCED = (False, False)
    CONTROLLED_SHUTDOWN = (False, False, "controlled")  # third item keeps the value distinct
    SHUTDOWN_NOW = (True, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def should_shut_down(self) -> bool:
        return self.value[1]

    @property
    def in_controlled_shutdown(self) -> bool:
        return self is BrokerControlState.CONTROLLED_SHUTDOWN


@dataclass(slots=True)
class BrokerSession:
    broker_id: int
    last_contact_ms: int = 0
    metadata_offset: int = -1
    fenced: bool = True
    controlled_shutdown_offset: int = -1

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.sessions: dict[int, BrokerSession] = {}

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """Start tracking every registered broker afresh (a new active controller)."""
        self.sessions.clear()
        for registration in image.brokers.by_id.values():
            self.register(registration.broker_id, registration.fenced, now_ms)

    # -- keeping in step with the log ----------------------------------------------------------

    def replay(self, record: Message, image: MetadataImage, now_ms: int) -> None:
        """Note a committed broker record; ``image`` has it applied."""
        if not isinstance(record, BROKER_RECORD_TYPES):
            return
        if isinstance(record, UnregisterBrokerRecord):
            self.remove(record.broker_id)
            return
        broker_id = broker_id_of(record)
        registration = image.brokers.get(broker_id)
        if registration is None:
            return
        if isinstance(record, RegisterBrokerRecord):
            self.remove(broker_id)
        self.register(broker_id, registration.fenced, now_ms)

    def register(self, broker_id: int, fenced: bool, now_ms: int) -> None:
        """Track ``broker_id`` as (un)fenced, contacted now. Its last metadata offset is kept
        only across a change of fencing (Kafka's ``register``)."""
        session = self.sessions.get(broker_id)
        metadata_offset = -1
        if session is None:
            self.sessions[broker_id] = BrokerSession(broker_id)
        elif session.fenced != fenced:
            metadata_offset = session.metadata_offset
        self.touch(broker_id, fenced, metadata_offset, now_ms)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int, now_ms: int) -> None:
        session = self._session(broker_id)
        session.last_contact_ms = now_ms
        session.metadata_offset = metadata_offset
        session.fenced = fenced
        if fenced:  # a fenced broker leaves controlled shutdown: its next heartbeat shuts it down
            session.controlled_shutdown_offset = -1

    def fence(self, broker_id: int) -> None:
        session = self.sessions.get(broker_id)
        if session is not None:
            session.fenced = True

    def remove(self, broker_id: int) -> None:
        self.sessions.pop(broker_id, None)

    def maybe_update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        """Record the end offset of the batch that moved ``broker_id`` into controlled shutdown
        (the first one only)."""
        session = self._session(broker_id)
        if session.fenced:
            raise ValueError(f"fenced broker {broker_id} cannot enter controlled shutdown")
        if session.controlled_shutdown_offset < 0:
            session.controlled_shutdown_offset = offset

    # -- questions -------------------------------------------------------------------------------

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        session = self.sessions.get(broker_id)
        return session is not None and self._valid(session, now_ms)

    def _valid(self, session: BrokerSession, now_ms: int) -> bool:
        return not session.fenced and session.last_contact_ms + self.session_timeout_ms >= now_ms

    def find_one_stale_broker(self, now_ms: int) -> int | None:
        """The unfenced broker heard from longest ago, if its session has expired."""
        unfenced = [s for s in self.sessions.values() if not s.fenced]
        if not unfenced:
            return None
        oldest = min(unfenced, key=lambda s: (s.last_contact_ms, s.broker_id))
        return None if self._valid(oldest, now_ms) else oldest.broker_id

    def next_check_time_ms(self) -> int | None:
        """When the next session could expire (None: no unfenced broker)."""
        unfenced = [s.last_contact_ms for s in self.sessions.values() if not s.fenced]
        return min(unfenced) + self.session_timeout_ms if unfenced else None

    def lowest_active_offset(self) -> int | None:
        """The lowest metadata offset of the unfenced brokers not shutting down (None: none)."""
        offsets = [s.metadata_offset for s in self.sessions.values()
                   if not s.fenced and not s.shutting_down]
        return min(offsets) if offsets else None

    def current_state(self, broker_id: int) -> BrokerControlState:
        session = self._session(broker_id)
        if session.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if session.fenced else BrokerControlState.UNFENCED

    def next_state(
        self, broker_id: int, request: BrokerHeartbeatRequest, registration_offset: int,
        *, has_leaderships: bool,
    ) -> tuple[BrokerControlState, BrokerControlState]:
        """(current, next) state of ``broker_id`` after heartbeat ``request`` (KIP-631, Kafka's
        ``calculateNextBrokerState``)."""
        current = self.current_state(broker_id)
        if current is BrokerControlState.FENCED:
            return current, _from_fenced(request, registration_offset)
        if current is BrokerControlState.UNFENCED:
            return current, _from_unfenced(request, has_leaderships=has_leaderships)
        if has_leaderships:
            return current, current  # leaderships still to move
        lowest = self.lowest_active_offset()
        offset = self.sessions[broker_id].controlled_shutdown_offset
        if lowest is None or offset <= lowest:
            return current, BrokerControlState.SHUTDOWN_NOW
        return current, current

    def _session(self, broker_id: int) -> BrokerSession:
        session = self.sessions.get(broker_id)
        if session is None:
            raise KeyError(f"broker {broker_id} is not registered")
        return session


def _from_fenced(request: BrokerHeartbeatRequest, registration_offset: int) -> BrokerControlState:
    if request.want_shut_down:
        return BrokerControlState.SHUTDOWN_NOW
    if not request.want_fence and request.current_metadata_offset >= registration_offset:
        return BrokerControlState.UNFENCED  # caught up with its own registration
    return BrokerControlState.FENCED


def _from_unfenced(request: BrokerHeartbeatRequest, *, has_leaderships: bool) -> BrokerControlState:
    if request.want_fence:
        return (BrokerControlState.SHUTDOWN_NOW if request.want_shut_down
                else BrokerControlState.FENCED)
    if request.want_shut_down:
        return (BrokerControlState.CONTROLLED_SHUTDOWN if has_leaderships
                else BrokerControlState.SHUTDOWN_NOW)
    return BrokerControlState.UNFENCED
