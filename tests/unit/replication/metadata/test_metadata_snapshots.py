"""The metadata log with snapshots: start-up from the newest good snapshot plus the log after it,
fallback past a damaged snapshot, when a snapshot is due, and Kafka's retention rules moving the
log start offset and removing segments and old snapshots."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from protocol.codec import Message
from protocol.messages.metadata.config_record import ConfigRecord
from replication.metadata.controller import plan_create_topic
from replication.metadata.image import BROKER_RESOURCE_TYPE, MetadataImage
from replication.metadata.log import MetadataLog, MetadataLogConfig, MetadataLogError
from replication.metadata.snapshot import SnapshotId, snapshot_file_name
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from tests.unit.replication.metadata.test_snapshot import state

SMALL_SEGMENTS = MetadataLogConfig(segment_bytes=300)


def open_metadata(directory: Path, clock: ManualClock,
                  config: MetadataLogConfig = SMALL_SEGMENTS) -> MetadataLog:
    log = Log.open(directory / "__cluster_metadata-0", config.log_config(), clock=clock)
    metadata = MetadataLog(log, clock=clock, config=config)
    metadata.replay()
    return metadata


def restart(metadata: MetadataLog, clock: ManualClock,
            config: MetadataLogConfig = SMALL_SEGMENTS) -> MetadataLog:
    metadata.log.close()
    return open_metadata(metadata.directory.parent, clock, config)


def create(metadata: MetadataLog, name: str, partitions: int = 2) -> None:
    plan = plan_create_topic(
        metadata.image, name, num_partitions=partitions, replication_factor=-1,
        configs={"retention.ms": "1000"}, node_id=1, default_num_partitions=1,
        default_replication_factor=1, default_config=LogConfig())
    metadata.append(plan.records)


def set_broker_config(metadata: MetadataLog, value: str) -> None:
    records: list[Message] = [ConfigRecord(resource_type=BROKER_RESOURCE_TYPE, resource_name="",
                                           name="log.retention.ms", value=value)]
    metadata.append(records)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_restart_loads_the_snapshot_then_the_log_after_it(tmp_path: Path, clock: ManualClock) -> None:
    metadata = open_metadata(tmp_path, clock)
    for name in ("a", "b", "c"):
        create(metadata, name)
    path = metadata.take_snapshot()
    assert path is not None
    assert path.name == snapshot_file_name(SnapshotId(metadata.log.log_end_offset, 0))
    create(metadata, "d")
    set_broker_config(metadata, "5000")
    before = state(metadata.image)
    again = restart(metadata, clock)
    assert state(again.image) == before
    assert again.image.last_offset == again.log.log_end_offset - 1
    assert again.snapshot_ids == [SnapshotId(path_offset(path), 0)]


def path_offset(path: Path) -> int:
    return int(path.name[:20])


def test_no_snapshot_when_nothing_is_new(tmp_path: Path, clock: ManualClock) -> None:
    metadata = open_metadata(tmp_path, clock)
    assert metadata.take_snapshot() is None  # an empty log
    create(metadata, "a")
    assert metadata.take_snapshot() is not None
    assert metadata.take_snapshot() is None  # the same end offset
    assert metadata.snapshot_due() is None


def test_damaged_newest_snapshot_falls_back_to_the_older_one(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    metadata = open_metadata(tmp_path, clock)
    create(metadata, "a")
    older = metadata.take_snapshot()
    create(metadata, "b")
    newest = metadata.take_snapshot()
    create(metadata, "c")
    assert older is not None and newest is not None
    before = state(metadata.image)
    metadata.log.close()
    damaged = bytearray(newest.read_bytes())
    damaged[len(damaged) // 2] ^= 0x40
    newest.write_bytes(damaged)
    with caplog.at_level(logging.ERROR, logger="samsa.replication.metadata"):
        again = open_metadata(tmp_path, clock)
    assert state(again.image) == before
    assert str(newest) in caplog.text and "corrupt" in caplog.text


def test_no_usable_snapshot_above_the_log_start_stops_start_up(tmp_path: Path, clock: ManualClock) -> None:
    config = MetadataLogConfig(segment_bytes=300, retention_max_bytes=0)
    metadata = open_metadata(tmp_path, clock, config)
    for name in ("a", "b", "c", "d"):
        create(metadata, name)
        metadata.take_snapshot()
    assert metadata.log.log_start_offset > 0
    metadata.log.close()
    for path in tmp_path.glob("*/*.checkpoint"):
        path.write_bytes(path.read_bytes()[:-1])  # the footer cut short
    with pytest.raises(MetadataLogError, match="no usable snapshot"):
        open_metadata(tmp_path, clock, config)


def test_start_up_deletes_partial_and_deleted_snapshot_files(tmp_path: Path, clock: ManualClock) -> None:
    metadata = open_metadata(tmp_path, clock)
    create(metadata, "a")
    path = metadata.take_snapshot()
    assert path is not None
    partial = path.with_name(path.name[:-len(".checkpoint")] + "-0123abcd.checkpoint.part")
    partial.write_bytes(b"half a snapshot")
    deleted = path.with_name(path.name + ".deleted")
    deleted.write_bytes(b"old")
    again = restart(metadata, clock)
    assert not partial.exists() and not deleted.exists() and path.exists()
    assert "a" in again.image.topics_by_name


def test_a_log_shorter_than_the_snapshot_restarts_at_its_end(tmp_path: Path, clock: ManualClock) -> None:
    metadata = open_metadata(tmp_path, clock)
    create(metadata, "a")
    create(metadata, "b")
    path = metadata.take_snapshot()
    assert path is not None
    before = state(metadata.image)
    metadata.log.close()
    for segment_file in path.parent.glob("*.log"):
        segment_file.unlink()
    again = open_metadata(tmp_path, clock)
    assert state(again.image) == before
    assert again.log.log_start_offset == again.log.log_end_offset == path_offset(path)
    create(again, "c")  # appends carry on after the snapshot
    assert "c" in restart(again, clock).image.topics_by_name


# -- when ---------------------------------------------------------------------------------------


def test_due_after_the_configured_bytes(tmp_path: Path, clock: ManualClock) -> None:
    config = MetadataLogConfig(max_record_bytes_between_snapshots=1000, max_snapshot_interval_ms=0)
    metadata = open_metadata(tmp_path, clock, config)
    due: list[str | None] = []
    metadata.on_snapshot_due = lambda: due.append(metadata.snapshot_due())
    written = 0
    while not due:
        create(metadata, f"t{written}")
        written += 1
    assert written > 1
    assert metadata.log.size_in_bytes >= 1000
    assert due[0] is not None and "1000 bytes" in due[0]
    assert metadata.prepare_snapshot() is not None
    assert metadata.snapshot_due() is None  # the counters start again


def test_due_after_the_interval_only_with_new_records(tmp_path: Path, clock: ManualClock) -> None:
    config = MetadataLogConfig(max_snapshot_interval_ms=60_000)
    metadata = open_metadata(tmp_path, clock, config)
    clock.advance(120_000)
    assert metadata.snapshot_due() is None  # nothing new
    create(metadata, "a")
    assert metadata.snapshot_due() is not None
    metadata.take_snapshot()
    create(metadata, "b")
    assert metadata.snapshot_due() is None
    clock.advance(60_000)
    assert metadata.snapshot_due() is not None


def test_records_replayed_at_start_up_count_towards_the_next_snapshot(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = MetadataLogConfig(max_record_bytes_between_snapshots=10**6, max_snapshot_interval_ms=0)
    metadata = open_metadata(tmp_path, clock, config)
    for name in ("a", "b", "c"):
        create(metadata, name)
    size = metadata.log.size_in_bytes
    small = MetadataLogConfig(max_record_bytes_between_snapshots=size, max_snapshot_interval_ms=0)
    assert restart(metadata, clock, small).snapshot_due() is not None


# -- retention ----------------------------------------------------------------------------------


def fill(metadata: MetadataLog, names: list[str]) -> list[Path]:
    paths = []
    for name in names:
        create(metadata, name)
        path = metadata.take_snapshot()
        assert path is not None
        paths.append(path)
    return paths


def test_size_retention_moves_the_log_start_to_the_latest_snapshot(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = MetadataLogConfig(segment_bytes=300, retention_max_bytes=0)
    metadata = open_metadata(tmp_path, clock, config)
    create(metadata, "first")
    create(metadata, "second")
    assert len(metadata.log.segments) > 1
    paths = fill(metadata, ["a", "b", "c"])
    latest = paths[-1]
    assert [p.exists() for p in paths] == [False, False, True]  # the latest always stays
    assert metadata.snapshot_ids == [SnapshotId(path_offset(latest), 0)]
    assert metadata.log.log_start_offset == path_offset(latest)
    assert all(segment.base_offset <= path_offset(latest) for segment in metadata.log.segments)
    assert metadata.log.segments[0].base_offset > 0  # segments wholly below it are gone
    before = state(metadata.image)
    again = restart(metadata, clock, config)
    assert state(again.image) == before


def test_a_single_snapshot_is_never_cleaned(tmp_path: Path, clock: ManualClock) -> None:
    config = MetadataLogConfig(segment_bytes=300, retention_max_bytes=0, retention_ms=0)
    metadata = open_metadata(tmp_path, clock, config)
    for name in ("a", "b", "c"):
        create(metadata, name)
    metadata.take_snapshot()
    clock.advance(10_000)
    assert not metadata.maybe_clean()
    assert metadata.log.log_start_offset == 0


def test_size_retention_stops_once_under_the_limit(tmp_path: Path, clock: ManualClock) -> None:
    config = MetadataLogConfig(segment_bytes=300, retention_max_bytes=10**9)
    metadata = open_metadata(tmp_path, clock, config)
    paths = fill(metadata, ["a", "b", "c"])
    assert all(p.exists() for p in paths)
    assert metadata.log.log_start_offset == 0


def test_time_retention_removes_snapshots_older_than_retention_ms(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = MetadataLogConfig(segment_bytes=300, retention_max_bytes=-1, retention_ms=60_000)
    metadata = open_metadata(tmp_path, clock, config)
    old = fill(metadata, ["a"])[0]
    clock.advance(30_000)
    middle = fill(metadata, ["b"])[0]
    assert old.exists()
    clock.advance(31_000)  # the first is now 61 s old, the second 31 s
    newest = fill(metadata, ["c"])[0]
    assert not old.exists() and middle.exists() and newest.exists()
    assert metadata.log.log_start_offset == path_offset(middle)


def test_an_image_with_every_kind_of_state_survives_restart_from_a_snapshot(
    tmp_path: Path, clock: ManualClock
) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.unit.replication.metadata.test_snapshot import operations, records_of

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(history=st.lists(operations, max_size=25), cut=st.integers(0, 25))
    def check(history: list[tuple], cut: int) -> None:  # type: ignore[type-arg]
        directory = tmp_path / f"run-{next(runs)}"
        metadata = open_metadata(directory, clock)
        for index, operation in enumerate(history):
            records = records_of(metadata.image, operation)
            if records:
                metadata.append(records)
            if index == cut:
                metadata.take_snapshot()
        before = state(metadata.image)
        assert state(restart(metadata, clock).image) == before

    runs = iter(range(10**6))
    check()


def test_images_are_independent_of_replay_path(tmp_path: Path, clock: ManualClock) -> None:
    """A snapshot-loaded image and a fully replayed one agree (same log, two directories)."""
    metadata = open_metadata(tmp_path / "x", clock)
    for name in ("a", "b"):
        create(metadata, name)
    set_broker_config(metadata, "7")
    full = restart(metadata, clock).image
    metadata = open_metadata(tmp_path / "x", clock)
    metadata.take_snapshot()
    from_snapshot = restart(metadata, clock).image
    assert state(full) == state(from_snapshot)
    assert isinstance(full, MetadataImage)
