"""Unclean restarts (``replication.replica_manager``, "Unclean restarts"): a node that crashed
holds back the leaderships its metadata still names until it is unfenced, so a log cut by the
crash (or by damage found at start-up) never makes in-sync followers truncate to it."""

from __future__ import annotations

from pathlib import Path

from replication.controller.interface import NewTopic
from replication.controller.local import LocalController
from replication.metadata.delta import LocalReplicaChanges
from replication.replica_manager import ReplicaManager
from storage.clock import ManualClock
from storage.log_manager import LogManager
from tests.unit.replication.controller.node import NODE_ID, Node
from tests.unit.storage.helpers import crash


def restart(directory: Path, clock: ManualClock, *, hold_leadership: bool) -> ReplicaManager:
    log_manager = LogManager([directory], clock=clock)
    log_manager.startup()
    replica_manager = ReplicaManager(log_manager, node_id=NODE_ID, clock=clock)
    replica_manager.startup(hold_leadership=hold_leadership)  # the whole image at once
    return replica_manager


def crashed_node(directory: Path, clock: ManualClock) -> None:
    node = Node.start(directory, clock)
    node.controller.create_topics([NewTopic("orders", num_partitions=2)])[0].result()
    assert all(p.is_leader for p in node.replica_manager.partitions.values())
    for log in node.log_manager.logs.values():
        crash(log)  # kill -9: no clean-shutdown marker


def test_after_a_crash_leaderships_wait_for_the_unfencing(tmp_path: Path) -> None:
    clock = ManualClock(1000)
    crashed_node(tmp_path, clock)
    replica_manager = restart(tmp_path, clock, hold_leadership=True)
    assert replica_manager.log_manager.unclean_directories == {tmp_path}
    assert not replica_manager.leadership_allowed
    assert not any(p.is_leader for p in replica_manager.partitions.values())
    heard: list[LocalReplicaChanges] = []
    replica_manager.on_local_changes.append(heard.append)
    replica_manager.allow_leadership()
    leaders = {key for key, p in replica_manager.partitions.items() if p.is_leader}
    assert leaders == {("orders", 0), ("orders", 1)}
    assert [len(changes.leaders) for changes in heard] == [2]  # the coordinators hear of it
    replica_manager.allow_leadership()  # once only
    assert len(heard) == 1
    replica_manager.log_manager.shutdown()


def test_a_clean_restart_or_a_local_controller_leads_at_once(tmp_path: Path) -> None:
    clock = ManualClock(1000)
    node = Node.start(tmp_path, clock)
    node.controller.create_topics([NewTopic("orders")])[0].result()
    node.shutdown()
    clean = restart(tmp_path, clock, hold_leadership=True)
    assert clean.leadership_allowed and clean.partitions[("orders", 0)].is_leader
    for log in clean.log_manager.logs.values():
        crash(log)
    local = restart(tmp_path, clock, hold_leadership=False)  # no quorum controller to unfence
    assert local.leadership_allowed and local.partitions[("orders", 0)].is_leader
    local.log_manager.shutdown()


def test_local_controller_wiring_is_unchanged(tmp_path: Path) -> None:
    """The helper node (a LocalController) is what single-node brokers run: never held back."""
    clock = ManualClock(1000)
    crashed_node(tmp_path, clock)
    node = Node.start(tmp_path, clock)
    assert isinstance(node.controller, LocalController)
    assert node.replica_manager.leadership_allowed
    node.shutdown()
