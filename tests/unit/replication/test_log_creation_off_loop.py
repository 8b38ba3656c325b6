"""Partition creation and deletion (issue 18): O(what changes), and off the event loop.

Costs are counted, not timed: the file-system calls a creation makes must not grow with the
number of partitions already hosted. The off-loop path runs the replica manager's disk work on
a real one-thread executor, as the broker's storage worker does.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from replication.controller.interface import NewPartitions, NewTopic, TopicToDelete
from storage.clock import ManualClock
from storage.partition_metadata import read_partition_metadata
from tests.unit.replication.controller.node import NODE_ID, Node, with_storage_worker


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    started = Node.start(tmp_path, ManualClock(1000))
    yield started
    started.shutdown()


class FileCalls:
    """Counts the file-system calls made while it is installed (by name)."""

    NAMES = ("fsync", "replace", "rename", "listdir", "scandir", "mkdir", "open", "stat")

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts: Counter[str] = Counter()
        for name in self.NAMES:
            monkeypatch.setattr(os, name, self._counting(name, getattr(os, name)))

    def _counting(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] += 1
            return call(*args, **kwargs)
        return counted


def create_calls(node: Node, monkeypatch: pytest.MonkeyPatch, name: str) -> Counter[str]:
    with monkeypatch.context() as patch:
        calls = FileCalls(patch)
        node.controller.create_topics([NewTopic(name, num_partitions=5)])[0].result()
    return calls.counts


def test_creating_partitions_touches_as_many_files_whatever_is_hosted(
        node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    node.controller.create_topics([NewTopic("warm-up")])  # the metadata log's first epoch entry
    first = create_calls(node, monkeypatch, "first")
    for index in range(20):
        node.controller.create_topics([NewTopic(f"filler-{index}", num_partitions=10)])
    assert len(node.replica_manager.partitions) == 206
    later = create_calls(node, monkeypatch, "later")
    assert later == first
    # partition.metadata, its directory and the log directory (the new entry), the metadata log
    assert later["fsync"] <= 5 * 3 + 2


def test_deleting_a_topic_touches_as_many_files_whatever_is_hosted(
        node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    def delete_calls(name: str) -> Counter[str]:
        node.controller.create_topics([NewTopic(name, num_partitions=5)])
        with monkeypatch.context() as patch:
            calls = FileCalls(patch)
            node.controller.delete_topics([TopicToDelete(name=name)])[0].result()
        return calls.counts

    first = delete_calls("first")
    for index in range(20):
        node.controller.create_topics([NewTopic(f"filler-{index}", num_partitions=10)])
    assert delete_calls("later") == first


def test_new_logs_are_spread_over_the_log_dirs_without_a_scan(tmp_path: Path) -> None:
    from storage.log_manager import LogManager

    manager = LogManager([tmp_path / "a", tmp_path / "b"], clock=ManualClock(0))
    manager.startup()
    for index in range(6):
        manager.get_or_create_log("t", index)
    assert Counter(log.directory.parent.name for log in manager.logs.values()) == {"a": 3, "b": 3}
    manager.delete_log("t", 0)
    manager.delete_log("t", 2)
    manager.delete_log("t", 4)  # a holds 0 now (0, 2, 4 went to a)
    assert {manager.get_or_create_log("u", i).directory.parent.name for i in range(3)} == {"a"}
    manager.shutdown()


# -- off the loop -----------------------------------------------------------------------------


def run_off_loop(node: Node, scenario: Callable[[], Any]) -> Any:
    return with_storage_worker(node.replica_manager, scenario)


def test_a_created_partition_answers_not_leader_until_its_log_exists_then_leads(node: Node) -> None:
    manager = node.replica_manager

    async def scenario() -> None:
        node.controller.create_topics([NewTopic("t", num_partitions=250)])[0].result()
        assert ("t", 0) in manager.creating and manager.partition("t", 0) is None
        with pytest.raises(NotLeaderOrFollowerError):
            manager.partition_or_error("t", 0)
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.partition_or_error("t", 250)
        settled = manager.settled(["t"])
        assert settled is not None and manager.settled(["other"]) is None
        await settled
        assert not manager.creating and len(manager.partitions) == 250
        partition = manager.partition_or_error("t", 249)
        assert partition.leader_id == NODE_ID and partition.log.directory.is_dir()
        topic_id = manager.image.topics_by_name["t"].topic_id
        metadata = read_partition_metadata(partition.log.directory)
        assert metadata is not None and metadata.topic_id == topic_id
        assert manager.disk_work is not None and manager.disk_work.jobs_submitted == 3  # chunks

    run_off_loop(node, scenario)


def test_a_topic_deleted_and_recreated_while_its_logs_are_created_ends_with_the_new_one(
        node: Node, tmp_path: Path) -> None:
    manager = node.replica_manager

    async def scenario() -> None:
        node.controller.create_topics([NewTopic("t", num_partitions=3)])[0].result()
        node.controller.delete_topics([TopicToDelete(name="t")])[0].result()
        plan = node.controller.create_topics([NewTopic("t", num_partitions=2)])[0].result()
        settled = manager.settled(["t"])
        assert settled is not None
        await settled
        assert sorted(manager.partitions) == [("t", 0), ("t", 1)]
        for index in (0, 1):
            metadata = read_partition_metadata(tmp_path / f"t-{index}")
            assert metadata is not None and metadata.topic_id == plan.topic_id
        await manager.drain()
        assert not (tmp_path / "t-2").exists()
        assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]

    run_off_loop(node, scenario)


def test_a_deleted_topic_leaves_at_once_and_its_directories_go_on_the_worker(
        node: Node, tmp_path: Path) -> None:
    node.controller.create_topics([NewTopic("t", num_partitions=4)])
    manager = node.replica_manager

    async def scenario() -> None:
        node.controller.delete_topics([TopicToDelete(name="t")])[0].result()
        assert not manager.partitions.keys() & {("t", i) for i in range(4)}
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.partition_or_error("t", 0)
        settled = manager.settled(["t"])
        assert settled is not None
        await settled
        await manager.drain()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith("t-")]

    run_off_loop(node, scenario)


def test_a_partition_added_off_the_loop_takes_the_topic_config_of_when_it_is_hosted(
        node: Node) -> None:
    manager = node.replica_manager

    async def scenario() -> None:
        node.controller.create_topics([NewTopic("t", num_partitions=1)])[0].result()
        await manager.settled(["t"])  # type: ignore[misc]
        node.controller.create_partitions([NewPartitions("t", 3)])[0].result()
        node.controller.alter_configs(2, "t", {"retention.ms": "1234"}).result()
        await manager.settled(["t"])  # type: ignore[misc]
        assert [manager.partitions[("t", i)].log.config.retention_ms for i in range(3)] == [1234] * 3

    run_off_loop(node, scenario)


def test_a_failed_creation_is_logged_and_the_others_are_hosted(node: Node, tmp_path: Path) -> None:
    (tmp_path / "t-1").write_bytes(b"not a log directory")
    manager = node.replica_manager

    async def scenario() -> None:
        node.controller.create_topics([NewTopic("t", num_partitions=3)])[0].result()
        await manager.settled(["t"])  # type: ignore[misc]
        assert sorted(manager.partitions) == [("t", 0), ("t", 2)]
        with pytest.raises(NotLeaderOrFollowerError):
            manager.partition_or_error("t", 1)

    run_off_loop(node, scenario)
    (tmp_path / "t-1").unlink()
