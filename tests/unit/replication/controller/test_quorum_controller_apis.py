"""AlterPartition, ElectLeaders, partition reassignment and the periodic elections through a
``QuorumController`` whose proposals commit through a real one-voter Raft node: every change is
a record in the metadata log, and the image the tests read is what the log committed."""

from __future__ import annotations

import pytest

from protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    NotControllerError,
    StaleBrokerEpochError,
)
from protocol.messages.alter_partition_request import AlterPartitionRequest
from replication.controller.elections import ElectionType
from replication.metadata.image import NO_LEADER, RECOVERING, TOPIC_RESOURCE_TYPE
from replication.metadata.records import decode_metadata_record
from tests.unit.replication.controller.quorum_node import SESSION_TIMEOUT_MS, QuorumNode

BROKERS = (1, 2, 3)


def started(**settings: object) -> QuorumNode:
    node = QuorumNode(**settings).start()
    node.start_brokers(BROKERS)
    return node


def fence(node: QuorumNode, broker_id: int) -> None:
    """Broker ``broker_id`` stops heartbeating; the others go on until the tick fences it."""
    alive = [b for b in BROKERS if b != broker_id]
    node.pass_time(SESSION_TIMEOUT_MS + 2000, alive=alive)
    assert node.image.brokers.by_id[broker_id].fenced


def committed_change_records(node: QuorumNode) -> int:
    count = 0
    for _, _, values, is_control in node.log.batches_from(0):
        for value in values:
            if not is_control and value is not None:
                record, _ = decode_metadata_record(value)
                count += type(record).__name__ == "PartitionChangeRecord"
    return count


# -- before the controller is active ------------------------------------------------------------

def test_an_inactive_controller_refuses_with_not_controller() -> None:
    node = QuorumNode()  # the Raft node has not elected itself yet
    for proposal in (node.controller.elect_leaders(0, None),
                     node.controller.alter_partition_reassignments([("t", [(0, [1])])]),
                     node.controller.alter_partition(
                         AlterPartitionRequest(broker_id=1, broker_epoch=0), version=3)):
        assert isinstance(proposal.exception(), NotControllerError)


# -- AlterPartition -----------------------------------------------------------------------------

def test_alter_partition_shrinks_and_expands_the_isr_through_the_log() -> None:
    node = started()
    node.create_topic("t", [[1, 2, 3]])
    [result] = node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [1, 2]), version=3))
    assert result.error_code == ErrorCode.NONE
    assert result.partition is not None and result.partition.isr == (1, 2)
    assert node.partition("t").isr == (1, 2)
    assert node.partition("t").partition_epoch == result.partition.partition_epoch
    [result] = node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [1, 2, 3]), version=3))
    assert node.partition("t").isr == (1, 2, 3) and node.partition("t").leader == 1


def test_alter_partition_from_a_stale_broker_epoch_is_refused_whole() -> None:
    node = started()
    node.create_topic("t", [[1, 2, 3]])
    request = node.alter_isr("t", 0, [1, 2])
    request.broker_epoch -= 1
    proposal = node.controller.alter_partition(request, version=3)
    node.run_until(proposal.done)
    assert isinstance(proposal.exception(), StaleBrokerEpochError)
    assert node.partition("t").isr == (1, 2, 3)


def test_alter_partition_with_an_old_partition_epoch_is_refused_per_partition() -> None:
    node = started()
    node.create_topic("t", [[1, 2, 3]])
    stale = node.alter_isr("t", 0, [1, 3])
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [1, 2]), version=3))
    [result] = node.commit(node.controller.alter_partition(stale, version=3))
    assert result.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert node.partition("t").isr == (1, 2)


# -- ElectLeaders -------------------------------------------------------------------------------

def test_a_preferred_election_gives_the_partition_back_to_its_first_replica() -> None:
    node = started()
    node.create_topic("t", [[1, 2, 3]])
    fence(node, 1)
    assert node.partition("t").leader == 2 and node.partition("t").isr == (2, 3)
    [result] = node.commit(node.controller.elect_leaders(ElectionType.PREFERRED, [("t", [0])]))
    assert result.error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # fenced, out of ISR
    node.heartbeat(1)  # back: unfenced, but not in the ISR until the leader adds it
    assert not node.image.brokers.by_id[1].fenced
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [2, 3, 1]), version=3))
    [result] = node.commit(node.controller.elect_leaders(ElectionType.PREFERRED, [("t", [0])]))
    assert result.error_code == ErrorCode.NONE
    assert node.partition("t").leader == 1
    [result] = node.commit(node.controller.elect_leaders(ElectionType.PREFERRED, [("t", [0])]))
    assert result.error_code == ErrorCode.ELECTION_NOT_NEEDED


def test_elect_leaders_reports_unknown_partitions_and_refuses_unknown_types() -> None:
    node = started()
    node.create_topic("t", [[1, 2, 3]])
    results = node.commit(node.controller.elect_leaders(
        ElectionType.UNCLEAN, [("t", [0, 7]), ("nope", [0])]))
    assert [(r.topic, r.partition_id, r.error_code) for r in results] == [
        ("t", 0, ErrorCode.ELECTION_NOT_NEEDED),
        ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert node.commit(node.controller.elect_leaders(ElectionType.PREFERRED, None)) == []
    proposal = node.controller.elect_leaders(7, None)
    node.run_until(proposal.done)
    assert isinstance(proposal.exception(), InvalidRequestError)


def test_an_unclean_election_on_request_picks_a_replica_outside_the_isr() -> None:
    node = started()
    node.create_topic("t", [[1, 2]])
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [1]), version=3))
    fence(node, 1)
    assert node.partition("t").leader == NO_LEADER and node.partition("t").isr == (1,)
    [result] = node.commit(node.controller.elect_leaders(ElectionType.UNCLEAN, [("t", [0])]))
    assert result.error_code == ErrorCode.NONE
    partition = node.partition("t")
    assert (partition.leader, partition.isr, partition.leader_recovery_state) == (2, (2,), RECOVERING)


# -- reassignment -------------------------------------------------------------------------------

def test_dropping_replicas_completes_at_once_with_a_new_leader() -> None:
    node = started()
    node.create_topic("t", [[1, 2, 3]])
    [result] = node.commit(node.controller.alter_partition_reassignments([("t", [(0, [3, 2])])]))
    assert result.error_code == ErrorCode.NONE
    partition = node.partition("t")
    assert (partition.replicas, partition.isr, partition.leader) == ((3, 2), (2, 3), 3)
    assert not partition.reassigning


def test_adding_a_replica_stays_in_progress_until_it_joins_the_isr() -> None:
    node = started()
    node.create_topic("t", [[1, 2]])
    node.commit(node.controller.alter_partition_reassignments([("t", [(0, [2, 3])])]))
    partition = node.partition("t")
    assert (partition.replicas, partition.adding_replicas, partition.removing_replicas) == (
        (2, 3, 1), (3,), (1,))
    assert partition.leader == 1  # the old leader leads until the new replicas are in sync
    [result] = node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [1, 2, 3]), version=3))
    assert result.error_code == ErrorCode.NEW_LEADER_ELECTED  # the sender is being removed
    partition = node.partition("t")
    assert (partition.replicas, partition.isr, partition.leader) == ((2, 3), (2, 3), 2)
    assert not partition.reassigning


def test_cancelling_reverts_an_addition_and_refuses_when_nothing_is_in_progress() -> None:
    node = started()
    node.create_topic("t", [[1, 2]])
    [result] = node.commit(node.controller.alter_partition_reassignments([("t", [(0, None)])]))
    assert result.error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    node.commit(node.controller.alter_partition_reassignments([("t", [(0, [1, 2, 3])])]))
    assert node.partition("t").adding_replicas == (3,)
    [result] = node.commit(node.controller.alter_partition_reassignments([("t", [(0, None)])]))
    assert result.error_code == ErrorCode.NONE
    partition = node.partition("t")
    assert (partition.replicas, partition.isr, partition.reassigning) == ((1, 2), (1, 2), False)


def test_invalid_targets_are_refused_per_partition_and_the_rest_commit() -> None:
    node = started()
    node.create_topic("t", [[1, 2, 3], [1, 2, 3]])
    results = node.commit(node.controller.alter_partition_reassignments([
        ("t", [(0, [1, 4]), (1, [2, 1]), (2, [1])]), ("nope", [(0, [1])]), ("t", [(0, [])])]))
    assert [(r.topic, r.partition_index, r.error_code) for r in results] == [
        ("t", 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", 1, ErrorCode.NONE),
        ("t", 2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT)]
    assert node.partition("t", 0).replicas == (1, 2, 3)
    assert node.partition("t", 1).replicas == (2, 1)


# -- periodic elections -------------------------------------------------------------------------

def rebalancing(interval_ms: int = 60_000) -> QuorumNode:
    return started(leader_imbalance_check_interval_ms=interval_ms,
                   leader_imbalance_per_broker_percentage=10)


def test_the_auto_rebalance_runs_one_interval_after_the_imbalance_appears() -> None:
    node = rebalancing()
    node.create_topic("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    fence(node, 1)
    node.heartbeat(1)
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [2, 3, 1]), version=3))
    node.commit(node.controller.alter_partition(node.alter_isr("t", 2, [3, 2, 1]), version=3))
    assert node.partition("t", 0).leader == 2  # broker 1 leads none of its 1 preferred
    seen_at = node.now_ms
    node.pass_time(30_000, alive=BROKERS)
    assert node.partition("t", 0).leader == 2  # not before the interval
    node.pass_time(40_000, alive=BROKERS)
    assert node.partition("t", 0).leader == 1
    assert node.controller.leader_balance.idle
    assert node.now_ms - seen_at >= 60_000


def test_no_rebalance_when_disabled_or_within_the_allowed_percentage() -> None:
    node = started()  # leader_imbalance_check_interval_ms None: auto.leader.rebalance.enable=false
    node.create_topic("t", [[1, 2, 3]])
    fence(node, 1)
    node.heartbeat(1)
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [2, 3, 1]), version=3))
    node.pass_time(600_000, alive=BROKERS, step_ms=5000)
    assert node.partition("t").leader == 2

    tolerant = started(leader_imbalance_check_interval_ms=1000,
                       leader_imbalance_per_broker_percentage=50)
    tolerant.create_topic("t", [[1, 2, 3], [1, 3, 2]])
    fence(tolerant, 1)
    tolerant.heartbeat(1)
    tolerant.commit(tolerant.controller.alter_partition(
        tolerant.alter_isr("t", 0, [2, 3, 1]), version=3))
    tolerant.pass_time(10_000, alive=BROKERS)
    # broker 1 leads 0 of its 2 preferred partitions: 100% > 50%, partition 0 is back (its
    # ISR has 1), partition 1 is not (1 is not in its ISR yet)
    assert tolerant.partition("t", 0).leader == 1
    assert tolerant.partition("t", 1).leader == 3


def test_unclean_elections_wait_for_the_topic_to_allow_them() -> None:
    node = started(unclean_leader_election_interval_ms=20_000)
    node.create_topic("t", [[1, 2]])
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [1]), version=3))
    fence(node, 1)
    assert node.partition("t").leader == NO_LEADER
    node.pass_time(60_000, alive=(2, 3))
    assert node.partition("t").leader == NO_LEADER  # unclean.leader.election.enable=false
    node.commit(node.controller.alter_configs(
        TOPIC_RESOURCE_TYPE, "t", {"unclean.leader.election.enable": "true"}))
    node.pass_time(30_000, alive=(2, 3))
    partition = node.partition("t")
    assert (partition.leader, partition.isr, partition.leader_recovery_state) == (2, (2,), RECOVERING)
    assert node.controller.unclean_elections.idle


def test_a_topic_allowing_unclean_elections_gets_a_leader_when_its_last_isr_member_is_fenced() -> None:
    node = started()
    node.create_topic("t", [[1, 2]], configs={"unclean.leader.election.enable": "true"})
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [1]), version=3))
    before = committed_change_records(node)
    fence(node, 1)  # the fencing batch itself elects 2 (cluster_control), no timer needed
    assert node.partition("t").leader == 2 and node.partition("t").isr == (2,)
    assert committed_change_records(node) == before + 1


def test_losing_the_leadership_cancels_the_periodic_elections() -> None:
    node = rebalancing(interval_ms=60_000)
    node.create_topic("t", [[1, 2, 3]])
    fence(node, 1)
    node.heartbeat(1)
    node.commit(node.controller.alter_partition(node.alter_isr("t", 0, [2, 3, 1]), version=3))
    node.pass_time(1000, alive=BROKERS)
    assert node.controller.leader_balance.due_ms is not None
    node.controller.on_leader_change(node.raft.epoch + 1, 2, node.log.end_offset)
    assert node.controller.leader_balance.idle and node.controller.leader_balance.due_ms is None
    with pytest.raises(NotControllerError):
        node.controller.elect_leaders(0, None).result()
