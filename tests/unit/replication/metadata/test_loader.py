"""The metadata loader over a ``FileRaftLog`` whose high watermark is moved by hand, as the Raft
core moves it: only committed batches reach the image, one delta per batch, control batches
change nothing, and a snapshot installed from a leader replaces the image with its delta."""

from __future__ import annotations

from pathlib import Path

from protocol.codec import Message
from protocol.records import ControlRecordType
from replication.metadata.controller import plan_create_topic, plan_delete_topic
from replication.metadata.delta import MetadataDelta
from replication.metadata.image import MetadataImage
from replication.metadata.image_records import image_records
from replication.metadata.loader import MetadataLoader
from replication.metadata.records import encode_metadata_record
from replication.raft.file_log import FileRaftLog
from storage.clock import ManualClock
from storage.config import LogConfig

NOW = 1_700_000_000_000


def open_raft_log(directory: Path, clock: ManualClock) -> FileRaftLog:
    return FileRaftLog.open(directory / "__cluster_metadata-0", LogConfig(), clock=clock)


def create_records(image: MetadataImage, name: str) -> list[Message]:
    plan = plan_create_topic(
        image, name, num_partitions=2, replication_factor=-1, configs={}, node_id=1,
        default_num_partitions=1, default_replication_factor=1, default_config=LogConfig())
    return list(plan.records)


def append(raft_log: FileRaftLog, records: list[Message], epoch: int = 1) -> int:
    values = [encode_metadata_record(record) for record in records]
    return raft_log.append_as_leader(values, epoch, NOW).last_offset


class Recorder:
    def __init__(self) -> None:
        self.deltas: list[MetadataDelta] = []

    def __call__(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.deltas.append(delta)


def test_only_committed_batches_reach_the_image(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    raft_log = open_raft_log(tmp_path, clock)
    loader = MetadataLoader(raft_log, clock=clock)
    recorder = Recorder()
    loader.listeners.append(recorder)
    scratch = MetadataImage()  # planning needs an image; the loader's follows the commits
    first = create_records(scratch, "a")
    for record in first:
        scratch.apply(record)
    first_end = append(raft_log, first) + 1
    raft_log.append_control_as_leader(ControlRecordType.LEADER_CHANGE, b"\x00\x00", 2, NOW)
    append(raft_log, create_records(scratch, "b"), epoch=2)
    assert loader.apply_committed() == 0 and "a" not in loader.image.topics_by_name
    raft_log.update_high_watermark(first_end)
    assert loader.apply_committed() == 1
    assert set(loader.image.topics_by_name) == {"a"} and loader.end_offset == first_end
    raft_log.update_high_watermark(raft_log.end_offset)
    assert loader.apply_committed() == 2  # the control batch, then "b"
    assert set(loader.image.topics_by_name) == {"a", "b"}
    assert [len(delta.partitions_before) for delta in recorder.deltas] == [2, 0, 2]
    assert loader.end_offset == raft_log.end_offset


def test_replay_stops_at_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    raft_log = open_raft_log(tmp_path, clock)
    scratch = MetadataImage()
    records = create_records(scratch, "a")
    end = append(raft_log, records) + 1
    for record in records:
        scratch.apply(record)
    append(raft_log, create_records(scratch, "b"))
    raft_log.update_high_watermark(end)
    image = MetadataLoader(raft_log, clock=clock).replay()
    assert set(image.topics_by_name) == {"a"}


def test_a_snapshot_installed_from_the_leader_replaces_the_image(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    leader_log = open_raft_log(tmp_path / "leader", clock)
    leader = MetadataLoader(leader_log, clock=clock)
    for name in ("a", "b"):
        append(leader_log, create_records(leader.image, name))
        leader_log.update_high_watermark(leader_log.end_offset)
        leader.apply_committed()
    append(leader_log, list(plan_delete_topic(leader.image, name="a")[1]))
    leader_log.update_high_watermark(leader_log.end_offset)
    leader.apply_committed()
    assert leader.take_snapshot() is not None
    snapshot_id = leader_log.latest_snapshot_id()
    assert snapshot_id is not None
    payload, size = leader_log.read_snapshot(snapshot_id, 0, 1 << 20)
    assert len(payload) == size

    follower_log = open_raft_log(tmp_path / "follower", clock)
    follower = MetadataLoader(follower_log, clock=clock)
    append(follower_log, create_records(follower.image, "c"))  # will be replaced
    follower_log.update_high_watermark(follower_log.end_offset)
    follower.apply_committed()
    recorder = Recorder()
    follower.listeners.append(recorder)
    follower_log.install_snapshot(snapshot_id, payload)
    follower.install_snapshot(snapshot_id)
    assert list(image_records(follower.image)) == list(image_records(leader.image))
    assert set(follower.image.topics_by_name) == {"b"}
    [delta] = recorder.deltas
    assert [topic.name for topic in delta.removed_topics] == ["c"]
    assert len(delta.partitions_before) == 2 and delta.broker_configs_changed
    assert follower.end_offset == follower_log.start_offset == snapshot_id.end_offset
    append(follower_log, create_records(follower.image, "d"))  # and it goes on from there
    follower_log.update_high_watermark(follower_log.end_offset)
    assert follower.apply_committed() == 1 and set(follower.image.topics_by_name) == {"b", "d"}
