"""The log manager's topic ids: ``partition.metadata`` written with new logs, read back, checked,
and logs set aside as ``-stray``."""

from __future__ import annotations

import re
from pathlib import Path
from uuid import UUID

import pytest

from protocol.errors import InconsistentTopicIdError, KafkaStorageError
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.errors import CorruptPartitionMetadataError
from storage.log_manager import LogManager
from storage.partition_metadata import PARTITION_METADATA_FILE, topic_id_to_string
from tests.unit.storage.helpers import client_batch, release_opened_logs

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

NOW = 1_700_000_000_000
CONFIG = LogConfig(message_timestamp_after_max_ms=2**62)
OLD_ID = UUID("0f3a6e3c-1d2b-4c5d-8e9f-a0b1c2d3e4f5")
NEW_ID = UUID("9a8b7c6d-5e4f-4a3b-9c2d-1e0f1a2b3c4d")


def start(dirs: list[Path]) -> LogManager:
    manager = LogManager(dirs, default_config=CONFIG, clock=ManualClock(NOW))
    manager.startup()
    return manager


def values(manager: LogManager, topic: str, partition: int) -> int:
    log = manager.get_log(topic, partition)
    assert log is not None
    return log.log_end_offset


def test_a_log_created_with_a_topic_id_gets_kafkas_file_before_any_append(tmp_path: Path) -> None:
    manager = start([tmp_path])
    log = manager.get_or_create_log("orders", 0, topic_id=OLD_ID)
    assert (log.directory / PARTITION_METADATA_FILE).read_bytes() == (
        f"version: 0\ntopic_id: {topic_id_to_string(OLD_ID)}".encode()
    )
    assert log.log_end_offset == 0
    manager.shutdown()
    restarted = start([tmp_path])
    assert restarted.read_topic_id("orders", 0) == OLD_ID


def test_an_existing_log_without_a_file_gets_one(tmp_path: Path) -> None:
    manager = start([tmp_path])
    manager.get_or_create_log("orders", 0).append_as_leader(client_batch([b"a"], timestamp=NOW))
    assert manager.read_topic_id("orders", 0) is None
    manager.shutdown()
    restarted = start([tmp_path])
    restarted.get_or_create_log("orders", 0, topic_id=OLD_ID)
    assert restarted.read_topic_id("orders", 0) == OLD_ID and values(restarted, "orders", 0) == 1
    assert (tmp_path / "orders-0" / PARTITION_METADATA_FILE).exists()


def test_an_existing_log_of_another_topic_id_is_refused(tmp_path: Path) -> None:
    manager = start([tmp_path])
    manager.get_or_create_log("orders", 0, topic_id=OLD_ID)
    manager.shutdown()
    restarted = start([tmp_path])
    with pytest.raises(InconsistentTopicIdError, match=topic_id_to_string(OLD_ID)):
        restarted.get_or_create_log("orders", 0, topic_id=NEW_ID)
    assert restarted.read_topic_id("orders", 0) == OLD_ID


def test_a_stray_log_is_set_aside_kept_and_never_loaded_again(tmp_path: Path) -> None:
    manager = start([tmp_path])
    old = manager.get_or_create_log("orders", 0, topic_id=OLD_ID)
    old.append_as_leader(client_batch([b"old"] * 3, timestamp=NOW))
    manager.get_or_create_log("orders", 1, topic_id=OLD_ID)
    aside = manager.set_aside_stray("orders", 0)
    assert re.fullmatch(r"orders-0\.[0-9a-f]{32}-stray", aside.name) and aside.parent == tmp_path
    assert not (tmp_path / "orders-0").exists()
    assert (aside / "00000000000000000000.log").stat().st_size > 0
    assert manager.get_log("orders", 0) is None
    fresh = manager.get_or_create_log("orders", 0, topic_id=NEW_ID)
    assert fresh.log_end_offset == 0 and manager.read_topic_id("orders", 0) == NEW_ID
    manager.shutdown()
    restarted = start([tmp_path])
    assert set(restarted.logs) == {("orders", 0), ("orders", 1)}
    assert restarted.read_topic_id("orders", 0) == NEW_ID and values(restarted, "orders", 0) == 0
    assert aside.is_dir() and (aside / PARTITION_METADATA_FILE).exists()
    restarted.shutdown()


def test_a_corrupt_file_names_itself_and_takes_only_that_log_offline(tmp_path: Path) -> None:
    manager = start([tmp_path])
    manager.get_or_create_log("orders", 0, topic_id=OLD_ID)
    manager.get_or_create_log("orders", 1, topic_id=OLD_ID)
    manager.shutdown()
    path = tmp_path / "orders-0" / PARTITION_METADATA_FILE
    path.write_text("version: 0\ntopic_id: garbage")
    restarted = start([tmp_path])
    with pytest.raises(CorruptPartitionMetadataError, match=re.escape(str(path))):
        restarted.read_topic_id("orders", 0)
    restarted.take_offline("orders", 0, reason="corrupt")
    broken, healthy = restarted.get_log("orders", 0), restarted.get_log("orders", 1)
    assert broken is not None and healthy is not None
    with pytest.raises(KafkaStorageError, match="corrupt"):
        broken.append_as_leader(client_batch([b"x"], timestamp=NOW))
    healthy.append_as_leader(client_batch([b"x"], timestamp=NOW))
    assert healthy.log_end_offset == 1
    # The partition keeps its log (no second one is created) and the file stays as it was.
    assert restarted.get_or_create_log("orders", 0, topic_id=OLD_ID) is broken
    assert path.read_text() == "version: 0\ntopic_id: garbage"
    restarted.shutdown()


def test_directories_set_aside_fit_in_255_bytes_for_the_longest_topic_name(tmp_path: Path) -> None:
    topic = "t" * 249
    manager = start([tmp_path])
    manager.get_or_create_log(topic, 7, topic_id=OLD_ID)
    manager.get_or_create_log(topic, 8, topic_id=OLD_ID)
    stray = manager.set_aside_stray(topic, 7)
    assert len(stray.name) == 255 and stray.name.endswith("-stray") and "-7." in stray.name
    assert manager.delete_log(topic, 8) is True
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [stray.name]
    manager.shutdown()
