"""Logs loaded after the node serves (issue 18, ``samsa.log.background.load.above``).

A node with more logs than the threshold loads only its internal topics' logs at start-up; the
others are found (``LogManager.unloaded``) and loaded on a real one-thread executor once the
replica manager has one, as the broker's storage worker does. Until its log is loaded a
partition answers as one being created (NOT_LEADER_OR_FOLLOWER), and a stop before the end keeps
what the next start needs: the checkpointed offsets of the logs not loaded and, for a directory
not recovered yet, its unclean state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import NotLeaderOrFollowerError
from protocol.records import Record, encode_batch
from replication.controller.interface import NewTopic, TopicToDelete
from replication.replica_manager import ReplicaManager
from storage.checkpoint import OffsetCheckpointFile
from storage.clean_shutdown import CLEAN_SHUTDOWN_FILE
from storage.clock import ManualClock
from storage.log_manager import RECOVERY_POINT_CHECKPOINT, LogManager
from storage.partition_metadata import read_partition_metadata, write_partition_metadata
from tests.unit.replication.controller.node import NODE_ID, Node, with_storage_worker

PARTITIONS = 250  # three chunks of loads


def records(partition: int) -> bytes:
    """``partition + 1`` records, so each log's end offset names its partition."""
    return encode_batch([Record(offset=i, timestamp=0, key=b"k", value=f"{partition}-{i}".encode())
                         for i in range(partition % 7 + 1)])


def written(directory: Path, *, clean: bool = True) -> dict[int, int]:
    """A node with topic ``t`` of PARTITIONS partitions, each with a few records; stopped
    cleanly or (``clean=False``) left as a crash leaves it. The end offset of each partition."""
    node = Node.start(directory, ManualClock(1000))
    node.controller.create_topics([NewTopic("t", num_partitions=PARTITIONS)])[0].result()
    ends = {}
    for index in range(PARTITIONS):
        log = node.replica_manager.partitions[("t", index)].log
        log.append_as_leader(records(index))
        ends[index] = log.log_end_offset
    if clean:
        node.shutdown()
    else:
        for log in node.log_manager.logs.values():
            log.flush()  # the data is on disk; no checkpoint, no clean-shutdown marker
    return ends


def serve(node: Node, scenario: Callable[[], Any]) -> Any:
    """Run ``scenario`` with the storage worker, as the broker does once it serves."""
    return with_storage_worker(node.replica_manager, scenario)


def test_found_logs_are_served_once_loaded_and_not_leader_until_then(tmp_path: Path) -> None:
    ends = written(tmp_path)
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    manager = node.replica_manager
    assert len(node.log_manager.unloaded) == PARTITIONS
    assert ("__cluster_metadata", 0) in node.log_manager.logs  # internal topics: loaded now
    assert ("t", 0) in manager.creating and manager.partition("t", 0) is None
    with pytest.raises(NotLeaderOrFollowerError):
        manager.partition_or_error("t", 0)

    async def scenario() -> None:
        loaded = manager.loaded()
        assert loaded is not None
        await loaded
        assert manager.loaded() is None and not manager.creating
        # three chunks, and before them t-0 alone: asked for above (``hurry``)
        assert manager.disk_work is not None and manager.disk_work.jobs_submitted == 4

    serve(node, scenario)
    assert not node.log_manager.unloaded and manager.logs_loaded == PARTITIONS
    for index, end in ends.items():
        partition = manager.partition_or_error("t", index)
        assert partition.leader_id == NODE_ID
        assert partition.log.log_end_offset == end == partition.high_watermark
    node.shutdown()


def test_a_topic_deleted_while_its_logs_load_leaves_nothing_behind(tmp_path: Path) -> None:
    written(tmp_path)
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    manager = node.replica_manager

    async def scenario() -> None:
        # the first chunk is on the worker, the other two wait in the queue
        node.controller.delete_topics([TopicToDelete(name="t")])[0].result()
        assert not manager.creating and not node.log_manager.unloaded
        settled = manager.settled(["t"])
        assert settled is not None
        await settled

    serve(node, scenario)
    node.shutdown()
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith("t-")]
    node = Node.start(tmp_path, ManualClock(3000))
    assert not [key for key in node.log_manager.logs if key[0] == "t"]
    node.shutdown()


def test_a_stop_before_the_end_keeps_the_offsets_and_the_unclean_state(tmp_path: Path) -> None:
    ends = written(tmp_path, clean=False)
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    assert tmp_path in node.log_manager.unclean_directories
    checkpointed = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read()

    async def scenario() -> None:
        pass  # stopped at once: one chunk loads, the drain starts no other

    serve(node, scenario)
    assert node.replica_manager.logs_loaded == 100
    assert len(node.log_manager.unloaded) == PARTITIONS - 100
    node.shutdown()
    # not recovered yet: no clean-shutdown marker, and each log keeps its recovery point
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    after = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read()
    assert {key for key in after if key[0] == "t"} == {("t", i) for i in range(PARTITIONS)}
    for key in after.keys() & checkpointed.keys():
        if key not in node.log_manager.logs:
            assert after[key] == checkpointed[key]
    node = Node.start(tmp_path, ManualClock(3000))  # all at once: recovered, nothing lost
    assert tmp_path in node.log_manager.unclean_directories
    for index, end in ends.items():
        assert node.replica_manager.partitions[("t", index)].log.log_end_offset == end
    node.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_a_found_log_of_another_topic_id_is_set_aside_and_replaced(tmp_path: Path) -> None:
    written(tmp_path)
    write_partition_metadata(tmp_path / "t-3", uuid.uuid4())
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    manager = node.replica_manager

    async def scenario() -> None:
        await manager.loaded()  # type: ignore[misc]

    serve(node, scenario)
    partition = manager.partition_or_error("t", 3)
    assert partition.log.log_end_offset == 0  # a new, empty log: refetched from a leader
    metadata = read_partition_metadata(tmp_path / "t-3")
    assert metadata is not None and metadata.topic_id == manager.image.topics_by_name["t"].topic_id
    assert len(list(tmp_path.glob("t-3.*-stray"))) == 1
    assert manager.partition_or_error("t", 4).log.log_end_offset == 5  # the others as they were
    node.shutdown()


def test_a_found_log_whose_topic_is_gone_is_deleted_at_start(tmp_path: Path) -> None:
    written(tmp_path)
    stray = tmp_path / "gone-0"
    stray.mkdir()
    (stray / "00000000000000000000.log").write_bytes(b"")
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    assert ("gone", 0) not in node.log_manager.unloaded and not stray.exists()
    node.shutdown()


def test_under_the_threshold_every_log_loads_before_serving(tmp_path: Path) -> None:
    written(tmp_path)
    node = Node.start(tmp_path, ManualClock(2000), background_above=PARTITIONS + 1)
    assert not node.log_manager.unloaded and not node.replica_manager.creating
    assert len(node.replica_manager.partitions) == PARTITIONS
    node.shutdown()


def test_after_a_crash_held_leaderships_load_only_once_the_node_is_unfenced(
        tmp_path: Path) -> None:
    ends = written(tmp_path, clean=False)
    log_manager = LogManager([tmp_path], clock=ManualClock(2000))
    log_manager.startup(background_above=0, load_now=lambda topic: topic.startswith("__"))
    manager = ReplicaManager(log_manager, node_id=NODE_ID, clock=ManualClock(2000))
    manager.startup(hold_leadership=True)  # "Unclean restarts": leaderships held back
    assert not manager.leadership_allowed and not manager.creating

    async def scenario() -> None:
        assert manager.loaded() is None  # nothing to load: this node may not lead yet
        manager.allow_leadership()
        loaded = manager.loaded()
        assert loaded is not None
        await loaded

    with_storage_worker(manager, scenario)
    for index, end in ends.items():
        partition = manager.partition_or_error("t", index)
        assert partition.is_leader and partition.log.log_end_offset == end
    log_manager.shutdown()


def test_a_topic_with_logs_waiting_to_load_counts_as_disk_work_under_way(tmp_path: Path) -> None:
    """What a single node's Metadata answers LEADER_NOT_AVAILABLE on (as while a topic's logs
    are created), so no producer is sent to a partition that cannot take its records yet."""
    written(tmp_path)
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    manager = node.replica_manager
    assert manager.disk_work_pending("t") and not manager.disk_work_pending("other")

    async def scenario() -> None:
        await manager.loaded()  # type: ignore[misc]
        assert not manager.disk_work_pending("t")

    serve(node, scenario)
    node.shutdown()


def test_after_a_crash_found_logs_are_recovered_on_the_recovery_threads(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``num.recovery.threads.per.data.dir`` (2 here, Kafka's default) threads recover a
    chunk; each log ends where it did, and a stray among them is set aside as in one thread."""
    ends = written(tmp_path, clean=False)
    write_partition_metadata(tmp_path / "t-3", uuid.uuid4())
    write_partition_metadata(tmp_path / "t-4", uuid.uuid4())  # two set aside at once
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    manager = node.replica_manager

    async def scenario() -> None:
        await manager.loaded()  # type: ignore[misc]

    with caplog.at_level("DEBUG"):
        serve(node, scenario)
    assert "loading 100 logs (100 to recover) on 2 thread(s)" in caplog.messages
    recovering = {record.threadName for record in caplog.records
                  if "unclean shutdown" in record.getMessage()}
    assert len(recovering) == 2 and all(name.startswith("samsa-log-load") for name in recovering)
    for index, end in ends.items():
        assert manager.partition_or_error("t", index).log.log_end_offset == (
            0 if index in (3, 4) else end)
    assert len(list(tmp_path.glob("t-[34].*-stray"))) == 2
    node.shutdown()


def test_a_clean_directory_s_logs_load_in_one_thread(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Clean loads are Python work: one thread (two contending for the GIL were slower)."""
    written(tmp_path)
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    manager = node.replica_manager

    async def scenario() -> None:
        await manager.loaded()  # type: ignore[misc]

    with caplog.at_level("DEBUG", logger="samsa.storage.log_manager"):
        serve(node, scenario)
    assert [record.getMessage() for record in caplog.records if "thread(s)" in record.getMessage()] == [
        "loading 100 logs (0 to recover) on 1 thread(s)",
        "loading 100 logs (0 to recover) on 1 thread(s)",
        "loading 50 logs (0 to recover) on 1 thread(s)"]
    assert manager.logs_loaded == PARTITIONS
    node.shutdown()


def test_a_partition_a_client_asks_for_loads_before_the_queue(tmp_path: Path) -> None:
    """Produce, Fetch and ListOffsets (``partition_or_error``) and a Metadata request naming
    the topic (``hurry``) move the logs asked for to the head of the queue: loaded in the
    next chunk, not after every log queued before them."""
    written(tmp_path)
    node = Node.start(tmp_path, ManualClock(2000), background_above=0)
    manager = node.replica_manager
    order: list[tuple[str, int]] = []  # the logs in the order their chunks came back
    original = manager._logs_loaded

    def record(chunk: Any, outcome: Any) -> None:  # a spy: the real method does the work
        order.extend((pending.topic, pending.partition) for pending in chunk)
        original(chunk, outcome)

    manager._logs_loaded = record  # type: ignore[method-assign]

    async def scenario() -> None:
        # The first chunk (partitions 0-99 in queue order) went to the worker with
        # use_executor; asked for now, 249 and 180 come in the chunk after it.
        with pytest.raises(NotLeaderOrFollowerError):
            manager.partition_or_error("t", 249)
        assert manager.hurry("t", [180, 249]) == 1  # 249 already asked for
        await manager.loaded()  # type: ignore[misc]

    serve(node, scenario)
    first, second = order[:100], order[100:102]
    assert len(order) == PARTITIONS and len(set(order)) == PARTITIONS  # each loaded once
    assert ("t", 249) not in first and second == [("t", 249), ("t", 180)]
    node.shutdown()
