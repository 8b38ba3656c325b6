"""Broker registration, heartbeats, fencing and unregistration: Kafka's ``ClusterControlManager``
with the broker parts of ``ReplicationControlManager``, as planners that return records.

Registration (``plan_register_broker``, Kafka's ``registerBroker``):
- a request for another cluster id is INCONSISTENT_CLUSTER_ID; a migrating ZooKeeper broker is
  BROKER_ID_NOT_REGISTERED; a feature the cluster has finalized at a level outside the broker's
  supported range (or not listed by the broker, level above 0) is UNSUPPORTED_VERSION;
- while the id's current registration has a valid session, only the same incarnation id may
  register again (DUPLICATE_BROKER_REGISTRATION otherwise);
- a new incarnation gets a fresh broker epoch, the offset the RegisterBrokerRecord will have
  (``next_offset``), and starts fenced; the same incarnation amends its registration and keeps
  its epoch, fencing and controlled-shutdown state;
- a new incarnation first takes the old one out of every ISR and leadership (Kafka's
  ``handleBrokerShutdown``), so a restarted broker never leads with a log that lost
  acknowledged records; with KIP-966 ELR on and an unclean shutdown (the request's
  ``previous_broker_epoch``, read from ``.kafka_cleanshutdown``, is not the registered epoch)
  out of every ELR too, and it is no candidate in that batch.

Heartbeats (``plan_broker_heartbeat``, Kafka's ``processBrokerHeartbeat``): a broker unknown or
with another epoch is STALE_BROKER_EPOCH; its next state (``heartbeats.BrokerHeartbeatManager``)
decides the records: to FENCED or SHUTDOWN_NOW the fencing records, to UNFENCED the unfencing
ones, to CONTROLLED_SHUTDOWN the controlled-shutdown ones. The reply says whether the broker
has caught up with its registration, is fenced, is in controlled shutdown, should shut down.

Records a broker event writes (records of one plan are one atomic batch, in this order):
- fence: PartitionChangeRecords taking it out of every ISR and leadership, then a
  BrokerRegistrationChangeRecord(fenced=1);
- unfence: BrokerRegistrationChangeRecord(fenced=-1), then leaders for leaderless partitions
  it (or another active broker) can lead;
- controlled shutdown: BrokerRegistrationChangeRecord(in_controlled_shutdown=1) unless already,
  then PartitionChangeRecords taking it out of every ISR and leadership;
- unregister: the same ISR (and ELR) removal, then UnregisterBrokerRecord.

The heartbeat manager is mutated by the heartbeat and session planners (sessions are soft state,
as in Kafka); the image is only read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.codec import Message
from protocol.errors import (
    BrokerIdNotRegisteredError,
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    StaleBrokerEpochError,
    UnsupportedVersionError,
)
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_registration_request import BrokerRegistrationRequest
from protocol.messages.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from protocol.messages.metadata.unregister_broker_record import UnregisterBrokerRecord
from replication.controller.heartbeats import BrokerControlState, BrokerHeartbeatManager
from replication.controller.partition_change import (
    elr_enabled,
    has_leaderships,
    isr_and_leader_updates,
    partitions_where,
)
from replication.metadata.brokers import FENCE, IN_CONTROLLED_SHUTDOWN, UNFENCE, BrokerRegistration
from replication.metadata.image import NO_LEADER, MetadataImage, PartitionImage

__all__ = [
    "HeartbeatPlan",
    "RegistrationPlan",
    "plan_broker_heartbeat",
    "plan_controlled_shutdown",
    "plan_fence_broker",
    "plan_fence_stale_broker",
    "plan_register_broker",
    "plan_unfence_broker",
    "plan_unregister_broker",
]


@dataclass(frozen=True, slots=True)
class RegistrationPlan:
    broker_epoch: int
    records: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class HeartbeatPlan:
    """The BrokerHeartbeat response fields and the records to propose."""

    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool
    records: tuple[Message, ...]


def plan_register_broker(
    image: MetadataImage,
    heartbeats: BrokerHeartbeatManager,
    request: BrokerRegistrationRequest,
    *,
    cluster_id: str,
    next_offset: int,
    now_ms: int,
    finalized_features: Mapping[str, int] | None = None,
) -> RegistrationPlan:
    """Register (or re-register) ``request.broker_id``; ``next_offset`` is the offset the
    record will be written at, the new incarnation's broker epoch."""
    if request.cluster_id != cluster_id:
        raise InconsistentClusterIdError(
            f"Expected cluster ID {cluster_id}, but got cluster ID {request.cluster_id}")
    existing = image.brokers.get(request.broker_id)
    new_incarnation = existing is None or existing.incarnation_id != request.incarnation_id
    if (existing is not None and new_incarnation
            and heartbeats.has_valid_session(request.broker_id, now_ms)):
        raise DuplicateBrokerRegistrationError("Another broker is registered with that broker id.")
    if request.is_migrating_zk_broker:
        raise BrokerIdNotRegisteredError("Controller does not support registering ZK brokers.")
    _check_features(request, finalized_features or {})
    records: list[Message] = []
    if new_incarnation:
        clean = existing is not None and existing.epoch == request.previous_broker_epoch
        records += _previous_incarnation_updates(image, request.broker_id, clean=clean)
    record = _registration_record(request)
    if existing is None or new_incarnation:
        record.broker_epoch = next_offset + len(records)
    else:
        record.broker_epoch = existing.epoch
        record.fenced = existing.fenced
        record.in_controlled_shutdown = existing.in_controlled_shutdown
    if new_incarnation:
        heartbeats.remove(request.broker_id)  # the old incarnation's session ends
    heartbeats.register(request.broker_id, record.fenced, now_ms)
    records.append(record)
    return RegistrationPlan(record.broker_epoch, tuple(records))


def _previous_incarnation_updates(
    image: MetadataImage, broker_id: int, *, clean: bool
) -> list[PartitionChangeRecord]:
    """Kafka's ``handleBrokerShutdown`` for a new incarnation: out of every ISR and leadership;
    with ELR on and an unclean shutdown (the broker's previous epoch is not the registered
    one), out of every ELR too, and never the last known leader to elect."""
    if elr_enabled(image) and not clean:
        return isr_and_leader_updates(
            image, partitions_where(image, lambda p: _in_isr_or_elr(p, broker_id)),
            broker_with_unclean_shutdown=broker_id)
    return isr_and_leader_updates(
        image, partitions_where(image, lambda p: broker_id in p.isr), broker_to_remove=broker_id)


def _in_isr_or_elr(partition: PartitionImage, broker_id: int) -> bool:
    return broker_id in partition.isr or broker_id in partition.eligible_leader_replicas


def _registration_record(request: BrokerRegistrationRequest) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=request.broker_id, incarnation_id=request.incarnation_id,
        end_points=[BrokerEndpoint(listener.name, listener.host, listener.port,
                                   listener.security_protocol) for listener in request.listeners],
        features=[BrokerFeature(f.name, f.min_supported_version, f.max_supported_version)
                  for f in request.features],
        rack=request.rack, fenced=True, in_controlled_shutdown=False,
    )


def _check_features(request: BrokerRegistrationRequest, finalized: Mapping[str, int]) -> None:
    """Every finalized feature level must be in the broker's supported range (a feature the
    broker does not list counts as supporting level 0 only)."""
    supported = {f.name: (f.min_supported_version, f.max_supported_version)
                 for f in request.features}
    for name, level in sorted(finalized.items()):
        low, high = supported.get(name, (0, 0))
        if not low <= level <= high:
            raise UnsupportedVersionError(
                f"Unable to register because the broker does not support finalized version "
                f"{level} of {name}. The broker wants a version between {low} and {high}, "
                "inclusive.")


def _registration(image: MetadataImage, broker_id: int, epoch: int) -> BrokerRegistration:
    """Kafka's ``checkBrokerEpoch``."""
    registration = image.brokers.get(broker_id)
    if registration is None:
        raise StaleBrokerEpochError(f"No broker registration found for broker id {broker_id}")
    if registration.epoch != epoch:
        raise StaleBrokerEpochError(
            f"Expected broker epoch {registration.epoch}, but got broker epoch {epoch}")
    return registration


def plan_broker_heartbeat(
    image: MetadataImage,
    heartbeats: BrokerHeartbeatManager,
    request: BrokerHeartbeatRequest,
    *,
    now_ms: int,
    next_offset: int,
) -> HeartbeatPlan:
    """Handle one heartbeat; ``next_offset`` is where the plan's records will start. A broker
    entering controlled shutdown waits for every active broker to reach the end of this
    plan's batch before it may shut down."""
    _registration(image, request.broker_id, request.broker_epoch)
    registration_offset = image.brokers.registration_offsets[request.broker_id]
    if request.broker_id not in heartbeats.sessions:
        heartbeats.register(request.broker_id, image.brokers.by_id[request.broker_id].fenced,
                            now_ms)
    current, following = heartbeats.next_state(
        request.broker_id, request, registration_offset,
        has_leaderships=has_leaderships(image, request.broker_id))
    records = _transition_records(image, request.broker_id, current, following)
    heartbeats.touch(request.broker_id, following.fenced, request.current_metadata_offset, now_ms)
    if following.in_controlled_shutdown:
        heartbeats.maybe_update_controlled_shutdown_offset(
            request.broker_id, next_offset + len(records) - 1)
    return HeartbeatPlan(
        is_caught_up=request.current_metadata_offset >= registration_offset,
        is_fenced=following.fenced, in_controlled_shutdown=following.in_controlled_shutdown,
        should_shut_down=following.should_shut_down, records=tuple(records),
    )


def _transition_records(
    image: MetadataImage, broker_id: int, current: BrokerControlState,
    following: BrokerControlState,
) -> list[Message]:
    if current is following:
        return []
    if following in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW):
        return plan_fence_broker(image, broker_id)
    if following is BrokerControlState.UNFENCED:
        return plan_unfence_broker(image, broker_id)
    return plan_controlled_shutdown(image, broker_id)


def _require(image: MetadataImage, broker_id: int) -> BrokerRegistration:
    registration = image.brokers.get(broker_id)
    if registration is None:
        raise BrokerIdNotRegisteredError(f"Broker ID {broker_id} is not currently registered")
    return registration


def plan_fence_broker(image: MetadataImage, broker_id: int) -> list[Message]:
    """Kafka's ``handleBrokerFenced``: out of every ISR and leadership, then fenced."""
    registration = _require(image, broker_id)
    records: list[Message] = list(isr_and_leader_updates(
        image, partitions_where(image, lambda p: broker_id in p.isr), broker_to_remove=broker_id))
    records.append(BrokerRegistrationChangeRecord(
        broker_id=broker_id, broker_epoch=registration.epoch, fenced=FENCE))
    return records


def plan_unfence_broker(image: MetadataImage, broker_id: int) -> list[Message]:
    """Kafka's ``handleBrokerUnfenced``: unfenced, then leaders for leaderless partitions."""
    registration = _require(image, broker_id)
    records: list[Message] = [BrokerRegistrationChangeRecord(
        broker_id=broker_id, broker_epoch=registration.epoch, fenced=UNFENCE)]
    # A broker still marked in controlled shutdown (it was told to shut down and did not
    # re-register) is unfenced but not active: it must not be elected (Kafka would elect it).
    to_add = NO_LEADER if registration.in_controlled_shutdown else broker_id
    records += isr_and_leader_updates(
        image, partitions_where(image, lambda p: p.leader == NO_LEADER), broker_to_add=to_add)
    return records


def plan_controlled_shutdown(image: MetadataImage, broker_id: int) -> list[Message]:
    """Kafka's ``handleBrokerInControlledShutdown``: marked, then out of ISRs and leadership."""
    registration = _require(image, broker_id)
    records: list[Message] = []
    if not registration.in_controlled_shutdown:
        records.append(BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=registration.epoch,
            in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN))
    records += isr_and_leader_updates(
        image, partitions_where(image, lambda p: broker_id in p.isr), broker_to_remove=broker_id)
    return records


def plan_unregister_broker(image: MetadataImage, broker_id: int) -> list[Message]:
    """Kafka's ``unregisterBroker``: out of ISRs and leadership, then unregistered."""
    registration = _require(image, broker_id)
    records: list[Message] = list(isr_and_leader_updates(
        image, partitions_where(image, lambda p: _in_isr_or_elr(p, broker_id)),
        broker_to_remove=broker_id))
    records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=registration.epoch))
    return records


def plan_fence_stale_broker(
    image: MetadataImage, heartbeats: BrokerHeartbeatManager, now_ms: int
) -> tuple[int | None, list[Message]]:
    """Kafka's ``maybeFenceOneStaleBroker``: fence the one broker whose session expired longest
    ago (one per call, so each fencing's effect is in the image before the next). Call again
    while it returns a broker; ``heartbeats.next_check_time_ms()`` says when to call next."""
    broker_id = heartbeats.find_one_stale_broker(now_ms)
    if broker_id is None:
        return None, []
    heartbeats.fence(broker_id)
    if image.brokers.get(broker_id) is None:
        heartbeats.remove(broker_id)
        return None, []
    return broker_id, plan_fence_broker(image, broker_id)
