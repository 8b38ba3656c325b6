"""The local controller: proposals are planned from the image, committed to the metadata log
and applied to the hosted partitions before they are handed back; refusals write nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import (
    InvalidPartitionsError,
    InvalidRequestError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from replication.controller.interface import NewPartitions, NewTopic, TopicToDelete
from replication.controller.local import PRODUCER_ID_BLOCK_SIZE
from replication.controller.proposal import Proposal
from replication.metadata.acls import StandardAcl
from replication.metadata.image import TOPIC_RESOURCE_TYPE
from storage.clock import ManualClock
from tests.unit.replication.controller.node import NODE_ID, Node


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    started = Node.start(tmp_path, ManualClock(1000))
    yield started
    started.shutdown()


def end_offset(node: Node) -> int:
    assert node.replica_manager.metadata_log is not None
    return node.replica_manager.metadata_log.log.log_end_offset


def test_a_created_topic_is_committed_and_hosted_when_the_proposal_returns(node: Node) -> None:
    proposal = node.controller.create_topics([NewTopic("t", num_partitions=2)])[0]
    assert proposal.done() and proposal.exception() is None
    plan = proposal.result()
    assert node.controller.image.topics_by_name["t"].topic_id == plan.topic_id
    assert sorted(node.replica_manager.partitions) == [("t", 0), ("t", 1)]
    assert node.log_manager.get_log("t", 1) is not None


def test_refusals_resolve_with_the_kafka_error_and_write_nothing(node: Node) -> None:
    node.controller.create_topics([NewTopic("t")])
    before = end_offset(node)
    again, internal = node.controller.create_topics([NewTopic("t"), NewTopic("__cluster_metadata")])
    assert isinstance(again.exception(), TopicAlreadyExistsError)
    assert isinstance(internal.exception(), InvalidRequestError)
    shrink = node.controller.create_partitions([NewPartitions("t", 1)])[0]
    assert isinstance(shrink.exception(), InvalidPartitionsError)
    gone = node.controller.delete_topics([TopicToDelete(name="nope")])[0]
    assert isinstance(gone.exception(), UnknownTopicOrPartitionError)
    with pytest.raises(TopicAlreadyExistsError):
        again.result()
    assert end_offset(node) == before


def test_validate_only_plans_but_writes_nothing(node: Node) -> None:
    before = end_offset(node)
    plan = node.controller.create_topics([NewTopic("t", num_partitions=3)], validate_only=True)[0]
    assert plan.result().num_partitions == 3
    assert "t" not in node.controller.image.topics_by_name and node.replica_manager.partitions == {}
    assert end_offset(node) == before


def test_deleting_and_growing_reach_the_hosted_partitions(node: Node) -> None:
    node.controller.create_topics([NewTopic("t", num_partitions=1)])
    assert node.controller.create_partitions([NewPartitions("t", 3)])[0].exception() is None
    assert sorted(node.replica_manager.partitions) == [("t", 0), ("t", 1), ("t", 2)]
    deleted = node.controller.delete_topics([TopicToDelete(name="t")])[0].result()
    assert deleted.name == "t"
    assert node.replica_manager.partitions == {} and node.log_manager.get_log("t", 0) is None


def test_config_changes_reach_the_live_logs(node: Node) -> None:
    node.controller.create_topics([NewTopic("t")])
    proposal = node.controller.alter_configs(TOPIC_RESOURCE_TYPE, "t", {"retention.ms": "1234"})
    assert proposal.exception() is None
    assert node.replica_manager.partitions[("t", 0)].log.config.retention_ms == 1234


def test_producer_id_blocks_follow_each_other_and_survive_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(1000)
    node = Node.start(tmp_path, clock)
    first = node.controller.allocate_producer_ids(NODE_ID, -1).result()
    second = node.controller.allocate_producer_ids(NODE_ID, -1).result()
    assert (first.first_producer_id, second.first_producer_id) == (0, PRODUCER_ID_BLOCK_SIZE)
    node.shutdown()
    restarted = Node.start(tmp_path, clock)
    third = restarted.controller.allocate_producer_ids(NODE_ID, -1).result()
    assert third.first_producer_id == 2 * PRODUCER_ID_BLOCK_SIZE
    restarted.shutdown()


def test_acls_go_through_the_controller_as_one_batch(node: Node) -> None:
    acl = StandardAcl(resource_type=2, resource_name="t", pattern_type=3, principal="User:a",
                      host="*", operation=3, permission_type=3)
    bad = StandardAcl(resource_type=2, resource_name="", pattern_type=3, principal="User:a",
                      host="*", operation=3, permission_type=3)
    before = end_offset(node)
    results = node.controller.create_acls([acl, bad]).result()
    assert results[0] is None and isinstance(results[1], InvalidRequestError)
    assert end_offset(node) == before + 1 and node.controller.image.acls.contains(acl)


def test_a_partition_change_record_bumps_the_live_leader_epoch(node: Node) -> None:
    plan = node.controller.create_topics([NewTopic("t")])[0].result()
    partition = node.replica_manager.partitions[("t", 0)]
    assert partition.leader_epoch == 0
    change = PartitionChangeRecord(partition_id=0, topic_id=plan.topic_id, leader=NODE_ID)
    assert node.controller.propose([change]).exception() is None
    assert node.replica_manager.partitions[("t", 0)] is partition
    assert partition.leader_epoch == 1
    assert node.controller.image.topics_by_name["t"].partitions[0].leader_epoch == 1


def test_a_pending_proposal_is_awaited_until_it_resolves() -> None:
    async def scenario() -> tuple[int, str]:
        proposal: Proposal[int] = Proposal()
        waiter = asyncio.ensure_future(_await(proposal))
        await asyncio.sleep(0)
        assert not waiter.done()
        proposal.resolve(7)
        refused: Proposal[int] = Proposal.refused(InvalidRequestError("no"))
        try:
            await refused
        except InvalidRequestError as error:
            return await waiter, str(error.message)
        raise AssertionError("a refused proposal raises when awaited")

    assert asyncio.run(scenario()) == (7, "no")


async def _await(proposal: Proposal[int]) -> int:
    return await proposal


def test_a_proposal_resolves_once() -> None:
    proposal: Proposal[None] = Proposal.committed(None)
    with pytest.raises(RuntimeError):
        proposal.fail(InvalidRequestError())
    with pytest.raises(RuntimeError):
        Proposal().result()


def test_a_partition_whose_log_cannot_be_created_does_not_stop_the_others(
        tmp_path: Path, node: Node) -> None:
    (tmp_path / "t-0").write_bytes(b"not a log directory")
    proposal = node.controller.create_topics([NewTopic("t", num_partitions=2)])[0]
    assert proposal.exception() is None  # committed: the image has both partitions
    assert sorted(node.controller.image.topics_by_name["t"].partitions) == [0, 1]
    assert sorted(node.replica_manager.partitions) == [("t", 1)]
