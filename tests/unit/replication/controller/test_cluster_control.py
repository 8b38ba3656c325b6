"""Registration, heartbeats, fencing, controlled shutdown and unregistration (Kafka's
``ClusterControlManager`` / ``BrokerHeartbeatManager`` rules), case by case."""

from __future__ import annotations

import uuid

import pytest

from protocol.errors import (
    BrokerIdNotRegisteredError,
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    StaleBrokerEpochError,
    UnsupportedVersionError,
)
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_registration_request import BrokerRegistrationRequest, Feature
from protocol.messages.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.register_broker_record import RegisterBrokerRecord
from protocol.messages.metadata.unregister_broker_record import UnregisterBrokerRecord
from replication.controller.cluster_control import (
    plan_broker_heartbeat,
    plan_fence_stale_broker,
    plan_register_broker,
    plan_unregister_broker,
)
from tests.unit.replication.controller.cluster import CLUSTER_ID, Cluster

# -- registration -------------------------------------------------------------------------------


def test_a_new_broker_gets_the_offset_of_its_record_as_epoch_and_starts_fenced() -> None:
    cluster = Cluster()
    cluster.add_topic("warmup", [[]], isrs=[[]])  # so the registration is not at offset 0
    expected = cluster.next_offset
    epoch = cluster.register(1, rack="r1")
    registration = cluster.image.brokers.by_id[1]
    assert epoch == expected == registration.epoch
    assert cluster.image.brokers.registration_offsets[1] == expected
    assert registration.fenced and not registration.in_controlled_shutdown
    assert registration.rack == "r1"
    assert registration.listeners[0].host == "broker1"


def test_the_same_incarnation_amends_and_keeps_epoch_and_state() -> None:
    cluster = Cluster()
    cluster.start_brokers([1])
    epoch = cluster.image.brokers.by_id[1].epoch
    assert cluster.register(1, rack="moved") == epoch
    registration = cluster.image.brokers.by_id[1]
    assert registration.rack == "moved" and not registration.fenced


def test_another_incarnation_with_a_live_session_is_a_duplicate() -> None:
    cluster = Cluster()
    cluster.start_brokers([1])
    with pytest.raises(DuplicateBrokerRegistrationError):
        cluster.register(1, incarnation=uuid.uuid4())


def test_another_incarnation_after_the_session_expired_gets_a_fresh_epoch_fenced() -> None:
    cluster = Cluster()
    cluster.start_brokers([1])
    old_epoch = cluster.image.brokers.by_id[1].epoch
    cluster.now_ms += 9001
    new_epoch = cluster.register(1, incarnation=uuid.uuid4())
    assert new_epoch > old_epoch
    assert cluster.image.brokers.by_id[1].fenced


def test_a_fenced_broker_may_come_back_as_a_new_incarnation_at_once() -> None:
    cluster = Cluster()
    cluster.register(1)  # fenced: no session
    cluster.register(1, incarnation=uuid.uuid4())


@pytest.mark.parametrize(("request_fields", "error"), [
    ({"cluster_id": "other"}, InconsistentClusterIdError),
    ({"is_migrating_zk_broker": True}, BrokerIdNotRegisteredError),
    ({"features": [Feature("metadata.version", 1, 7)]}, UnsupportedVersionError),
    ({"features": []}, UnsupportedVersionError),
])
def test_registration_refusals(request_fields: dict[str, object], error: type[Exception]) -> None:
    cluster = Cluster()
    fields: dict[str, object] = {"broker_id": 1, "cluster_id": CLUSTER_ID,
                                 "incarnation_id": uuid.uuid4()}
    fields.update(request_fields)
    with pytest.raises(error):
        plan_register_broker(cluster.image, cluster.heartbeats,
                             BrokerRegistrationRequest(**fields),  # type: ignore[arg-type]
                             cluster_id=CLUSTER_ID, next_offset=0, now_ms=0,
                             finalized_features={"metadata.version": 21})


def test_supported_features_register() -> None:
    request = BrokerRegistrationRequest(broker_id=1, cluster_id=CLUSTER_ID,
                                        incarnation_id=uuid.uuid4(),
                                        features=[Feature("metadata.version", 1, 21)])
    cluster = Cluster()
    plan = plan_register_broker(cluster.image, cluster.heartbeats, request,
                                cluster_id=CLUSTER_ID, next_offset=5, now_ms=0,
                                finalized_features={"metadata.version": 21})
    (record,) = plan.records
    assert isinstance(record, RegisterBrokerRecord) and record.broker_epoch == 5


# -- heartbeats ---------------------------------------------------------------------------------


def test_a_fenced_broker_is_unfenced_once_caught_up_with_its_registration() -> None:
    cluster = Cluster()
    cluster.register(1)
    offset = cluster.image.brokers.registration_offsets[1]
    behind = cluster.heartbeat(1, current_metadata_offset=offset - 1)
    assert behind.is_fenced and not behind.is_caught_up and behind.records == ()
    caught_up = cluster.heartbeat(1, current_metadata_offset=offset)
    assert not caught_up.is_fenced and caught_up.is_caught_up
    assert isinstance(caught_up.records[0], BrokerRegistrationChangeRecord)
    assert caught_up.records[0].fenced == -1
    assert not cluster.image.brokers.by_id[1].fenced


def test_a_fenced_broker_that_wants_fencing_stays_fenced() -> None:
    cluster = Cluster()
    cluster.register(1)
    assert cluster.heartbeat(1, want_fence=True).is_fenced


def test_stale_epochs_are_refused() -> None:
    cluster = Cluster()
    cluster.start_brokers([1])
    for broker_id, epoch in ((1, 999), (2, 0)):
        with pytest.raises(StaleBrokerEpochError):
            plan_broker_heartbeat(cluster.image, cluster.heartbeats,
                                  BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch),
                                  now_ms=cluster.now_ms, next_offset=cluster.next_offset)


def test_unfencing_elects_leaders_for_leaderless_partitions() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    cluster.add_topic("t", [[1, 2]])
    cluster.heartbeat(1, want_fence=True)
    cluster.heartbeat(2, want_fence=True)
    assert cluster.partition("t").leader == -1 and cluster.partition("t").isr == (2,)
    plan = cluster.heartbeat(2)
    assert any(isinstance(r, PartitionChangeRecord) for r in plan.records)
    assert cluster.partition("t").leader == 2


def test_fencing_moves_leadership_and_shrinks_the_isr() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.add_topic("t", [[1, 2, 3], [2, 3, 1]])
    epoch = cluster.partition("t").leader_epoch
    plan = cluster.heartbeat(1, want_fence=True)
    assert plan.is_fenced and not plan.should_shut_down
    assert isinstance(plan.records[-1], BrokerRegistrationChangeRecord)
    p0, p1 = cluster.partition("t", 0), cluster.partition("t", 1)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (2, (2, 3), epoch + 1)
    assert (p1.leader, p1.isr) == (2, (2, 3))


def test_session_expiry_fences_one_broker_at_a_time() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    cluster.add_topic("t", [[1, 2]])
    cluster.now_ms += 9000
    assert plan_fence_stale_broker(cluster.image, cluster.heartbeats, cluster.now_ms) == (None, [])
    cluster.now_ms += 1
    broker_id, records = plan_fence_stale_broker(cluster.image, cluster.heartbeats, cluster.now_ms)
    assert broker_id == 1
    cluster.apply(records)
    assert cluster.image.brokers.by_id[1].fenced and cluster.partition("t").leader == 2
    broker_id, records = plan_fence_stale_broker(cluster.image, cluster.heartbeats, cluster.now_ms)
    assert broker_id == 2
    cluster.apply(records)
    # the last ISR member stays in the ISR, leaderless
    assert cluster.partition("t").isr == (2,) and cluster.partition("t").leader == -1


def test_heartbeats_keep_a_session_alive() -> None:
    cluster = Cluster()
    cluster.start_brokers([1])
    for _ in range(5):
        cluster.now_ms += 5000
        cluster.heartbeat(1)
        assert plan_fence_stale_broker(cluster.image, cluster.heartbeats, cluster.now_ms)[0] is None
    assert cluster.heartbeats.next_check_time_ms() == cluster.now_ms + 9000


# -- controlled shutdown (KIP-631) --------------------------------------------------------------


def test_a_broker_without_leaderships_shuts_down_at_once() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    cluster.add_topic("t", [[2, 1]])
    plan = cluster.heartbeat(1, want_shut_down=True)
    assert plan.should_shut_down and plan.is_fenced
    assert cluster.partition("t").isr == (2,)


def test_controlled_shutdown_moves_leaders_then_waits_for_the_others_to_catch_up() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.add_topic("t", [[1, 2, 3]])
    plan = cluster.heartbeat(1, want_shut_down=True)
    assert plan.in_controlled_shutdown and not plan.should_shut_down and not plan.is_fenced
    registration = cluster.image.brokers.by_id[1]
    assert registration.in_controlled_shutdown and not registration.active
    assert cluster.partition("t").leader == 2 and 1 not in cluster.partition("t").isr
    end = cluster.image.last_offset
    # the others have not seen the batch yet
    cluster.heartbeat(2, current_metadata_offset=end - 1)
    cluster.heartbeat(3, current_metadata_offset=end - 1)
    assert not cluster.heartbeat(1, want_shut_down=True).should_shut_down
    cluster.heartbeat(2, current_metadata_offset=end)
    assert not cluster.heartbeat(1, want_shut_down=True).should_shut_down
    cluster.heartbeat(3, current_metadata_offset=end)
    final = cluster.heartbeat(1, want_shut_down=True)
    assert final.should_shut_down and final.is_fenced
    assert cluster.image.brokers.by_id[1].fenced


def test_a_fenced_broker_that_wants_to_shut_down_may() -> None:
    cluster = Cluster()
    cluster.register(1)
    assert cluster.heartbeat(1, want_shut_down=True).should_shut_down


# -- unregistration -----------------------------------------------------------------------------


def test_unregistering_removes_the_broker_from_isrs_then_the_registration() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    cluster.add_topic("t", [[1, 2]])
    records = plan_unregister_broker(cluster.image, 1)
    assert isinstance(records[-1], UnregisterBrokerRecord)
    cluster.apply(records)
    assert 1 not in cluster.image.brokers.by_id and 1 not in cluster.heartbeats.sessions
    assert cluster.partition("t").isr == (2,) and cluster.partition("t").leader == 2
    with pytest.raises(BrokerIdNotRegisteredError):
        plan_unregister_broker(cluster.image, 1)


def test_a_new_incarnation_leaves_the_isrs_of_the_old_one() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    cluster.add_topic("t", [[1, 2]])
    cluster.now_ms += 9001  # the old session expired, not yet fenced
    expected = cluster.next_offset + 1  # after the partition change
    epoch = cluster.register(1, incarnation=uuid.uuid4())
    assert epoch == expected == cluster.image.brokers.registration_offsets[1]
    part = cluster.partition("t")
    assert (part.leader, part.isr) == (2, (2,))
