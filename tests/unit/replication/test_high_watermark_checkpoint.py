"""replication-offset-checkpoint: each partition's high watermark written in Kafka's format,
read back at start (bounded by the log; missing -> 0), then moved to the log end offset by a
leader whose ISR is itself alone; a malformed file is reported and read as empty (Samsa), an
unreadable one takes its log directory offline (as Kafka)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.errors import ErrorCode
from protocol.records import Record, encode_batch
from replication.high_watermark_checkpoint import HighWatermarkCheckpoints
from replication.partition import Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager
from storage.producer_state import AppendOrigin
from tests.unit.broker.helpers import create_topic, delete_topic

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


def records(count: int) -> bytes:
    return encode_batch([Record(offset=i, timestamp=0, key=None, value=b"v") for i in range(count)])


@pytest.mark.parametrize(("checkpoint", "initial"), [(3, 3), (0, 2), (99, 5), (1, 2)])
def test_the_checkpoint_is_bounded_by_the_log_then_the_leader_moves_it_to_the_end(
    tmp_path: Path, checkpoint: int, initial: int
) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=ManualClock())
    log.append_as_leader(records(5))
    log.increment_log_start_offset(2)
    partition = Partition(log, topic_id=uuid.uuid4(), high_watermark_checkpoint=checkpoint)
    assert (partition.initial_high_watermark, partition.high_watermark) == (initial, 5)
    log.close()


def start(log_dir: Path, **overrides: str) -> Broker:
    properties = {"log.dirs": str(log_dir), **overrides}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock())
    broker.startup()
    return broker


def produce(broker: Broker, topic: str, count: int, index: int = 0) -> ErrorCode:
    key = (topic, index)
    outcome = broker.appender.append_records(
        [(key, records(count))], required_acks=-1, origin=AppendOrigin.CLIENT)[0]
    return ErrorCode(outcome.error.code) if outcome.error is not None else ErrorCode.NONE


def test_written_at_a_clean_stop_in_kafkas_format_and_restored(tmp_path: Path) -> None:
    broker = start(tmp_path)
    create_topic(broker, "orders", num_partitions=2)
    produce(broker, "orders", 3)
    broker.shutdown()
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    assert path.read_bytes() == b"0\n2\norders 0 3\norders 1 0\n"
    path.write_bytes(b"0\n1\norders 0 1\n")  # as if the followers had acknowledged 1 only
    restarted = start(tmp_path)
    restored = {index: restarted.replica_manager.partition("orders", index) for index in (0, 1)}
    assert [(p.initial_high_watermark, p.high_watermark) for p in restored.values() if p] == [
        (1, 3), (0, 0)]  # orders-1 missing from the file: 0
    restarted.shutdown()


def test_the_scheduled_write_covers_every_hosted_partition(tmp_path: Path) -> None:
    broker = start(tmp_path)
    create_topic(broker, "a")
    create_topic(broker, "b")
    produce(broker, "b", 2)
    broker.checkpoint_high_watermarks()
    checkpoints = HighWatermarkCheckpoints(broker.log_manager)
    assert checkpoints.read() == {("a", 0): 0, ("b", 0): 2}
    delete_topic(broker, "a")
    broker.checkpoint_high_watermarks()
    assert checkpoints.read() == {("b", 0): 2}
    broker.shutdown()


def test_a_corrupt_file_is_reported_and_read_as_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Samsa's deviation (see the module docstring): the directory stays online, its
    partitions start from high watermark 0 and the leader raises it again."""
    dirs = f"{tmp_path / 'one'},{tmp_path / 'two'}"  # the metadata log lives in the first
    broker = start(tmp_path, **{"log.dirs": dirs})
    create_topic(broker, "orders", num_partitions=2)
    logs = {index: broker.log_manager.logs[("orders", index)].directory.parent for index in (0, 1)}
    broker.shutdown()
    index = next(i for i, directory in logs.items() if directory == tmp_path / "two")
    path = tmp_path / "two" / REPLICATION_OFFSET_CHECKPOINT
    path.write_bytes(b"0\n1\norders zero 3\n")
    with caplog.at_level(logging.ERROR, logger="samsa.replication.high_watermark_checkpoint"):
        restarted = start(tmp_path, **{"log.dirs": dirs})
    assert f"{path}, line 3" in caplog.text
    assert restarted.log_manager.health[tmp_path / "two"].offline_reason is None
    assert produce(restarted, "orders", 1, index) == ErrorCode.NONE
    assert produce(restarted, "orders", 1, 1 - index) == ErrorCode.NONE
    restarted.shutdown()


def test_a_corrupt_file_beside_the_metadata_log_does_not_stop_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka halts when the metadata log's directory fails; Samsa reports file and line and
    starts every partition there from 0."""
    start(tmp_path).shutdown()
    (tmp_path / REPLICATION_OFFSET_CHECKPOINT).write_bytes(b"0\n3\n")
    with caplog.at_level(logging.ERROR, logger="samsa.replication.high_watermark_checkpoint"):
        start(tmp_path).shutdown()
    assert "replication-offset-checkpoint, line 2" in caplog.text


def test_an_unreadable_file_takes_its_directory_offline(tmp_path: Path) -> None:
    """An I/O error (here: the file is a directory) still takes the directory offline."""
    dirs = f"{tmp_path / 'one'},{tmp_path / 'two'}"
    start(tmp_path, **{"log.dirs": dirs}).shutdown()
    path = tmp_path / "two" / REPLICATION_OFFSET_CHECKPOINT
    path.unlink()
    path.mkdir()
    restarted = start(tmp_path, **{"log.dirs": dirs})
    assert restarted.log_manager.health[tmp_path / "two"].offline_reason is not None
    restarted.shutdown()


def test_only_online_directories_are_read_and_written(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    manager = LogManager([first, second], clock=ManualClock())
    manager.startup()
    checkpoints = HighWatermarkCheckpoints(manager)
    manager.health[second].offline_reason = "disk gone"
    checkpoints.write({})
    assert (first / REPLICATION_OFFSET_CHECKPOINT).read_bytes() == b"0\n0\n"
    assert not (second / REPLICATION_OFFSET_CHECKPOINT).exists()
    assert checkpoints.read() == {}


def test_a_partition_reads_the_file_of_its_own_directory(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    manager = LogManager([first, second], clock=ManualClock())
    manager.startup()
    manager.get_or_create_log("orders", 0, LogConfig())
    home = manager.logs[("orders", 0)].directory.parent
    elsewhere = second if home == first else first
    (home / REPLICATION_OFFSET_CHECKPOINT).write_bytes(b"0\n1\norders 0 4\n")
    (elsewhere / REPLICATION_OFFSET_CHECKPOINT).write_bytes(b"0\n1\norders 0 9\n")  # a moved log's
    assert HighWatermarkCheckpoints(manager).read() == {("orders", 0): 4}
    manager.shutdown()
