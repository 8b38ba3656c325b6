"""``samsa log dump`` and ``samsa log verify`` through the installed ``samsa`` executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.records import CompressionType, Record, encode_batch
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import EndMarker

SAMSA = str(Path(sys.executable).with_name("samsa"))


def samsa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SAMSA, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    clock = ManualClock()
    config = LogConfig(segment_bytes=400, index_interval_bytes=50,
                       message_timestamp_after_max_ms=2**62)
    log = Log.open(tmp_path / "orders-0", config, clock=clock)
    for batch_number in range(6):
        records = [
            Record(offset=i, timestamp=clock.now_ms + i, key=b"key-%d" % i,
                   value=b"value-%d-%d" % (batch_number, i), headers=(("h", b"v"),))
            for i in range(3)
        ]
        codec = CompressionType.GZIP if batch_number % 2 else CompressionType.NONE
        log.append_as_leader(encode_batch(records, base_offset=0, compression=codec), leader_epoch=7)
    log.close()
    return tmp_path / "orders-0"


def test_dump_prints_one_line_per_batch_in_kafka_dump_log_words(partition: Path) -> None:
    first = sorted(partition.glob("*.log"))[0]
    result = samsa("log", "dump", str(first))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("baseOffset:")]
    assert lines
    assert lines[0].startswith("baseOffset: 0 lastOffset: 2 count: 3 ")
    assert "partitionLeaderEpoch: 7" in lines[0]
    assert "magic: 2 compresscodec: none" in lines[0]
    assert "isvalid: true" in lines[0]


def test_dump_records_and_json(partition: Path) -> None:
    paths = [str(p) for p in sorted(partition.glob("*.log"))]
    result = samsa("log", "dump", *paths, "--records", "--json")
    assert result.returncode == 0, result.stderr
    batches = [json.loads(line) for line in result.stdout.splitlines()]
    assert [b["baseOffset"] for b in batches] == [0, 3, 6, 9, 12, 15]
    assert {b["compresscodec"] for b in batches} == {"none", "gzip"}
    record = batches[1]["records"][2]
    assert record == {
        "offset": 5, "CreateTime": record["CreateTime"], "keySize": 5, "valueSize": 9,
        "headerKeys": ["h"], "key": "key-2", "payload": "value-1-2", "headers": {"h": "v"},
    }


def test_dump_decodes_transaction_markers(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "txn-0", LogConfig(), clock=clock)
    for producer_id, abort in ((7, True), (8, False)):
        log.append_as_leader(encode_batch(
            [Record(0, clock.now_ms, b"k", b"v")], base_offset=0, producer_id=producer_id, producer_epoch=0,
            base_sequence=0, is_transactional=True), transaction_verified=True)
        log.append_end_marker(producer_id, 0, EndMarker(abort, 3))
    log.close()
    path = str(tmp_path / "txn-0" / "00000000000000000000.log")
    text = samsa("log", "dump", path, "--records")
    assert text.returncode == 0, text.stderr
    markers = [line for line in text.stdout.splitlines() if "endTxnMarker" in line]
    assert [line.split("headerKeys: [] ")[1] for line in markers] == [
        "endTxnMarker: ABORT coordinatorEpoch: 3", "endTxnMarker: COMMIT coordinatorEpoch: 3"]
    batches = [json.loads(line) for line in samsa("log", "dump", path, "--records", "--json").stdout.splitlines()]
    assert [(b["records"][0].get("endTxnMarker"), b["records"][0].get("key")) for b in batches] == [
        (None, "k"), ("ABORT", None), (None, "k"), ("COMMIT", None)]


def test_dump_index_files(partition: Path) -> None:
    index = sorted(partition.glob("*.index"))[0]
    result = samsa("log", "dump", str(index), "--json")
    assert result.returncode == 0, result.stderr
    entries = [json.loads(line) for line in result.stdout.splitlines()]
    assert entries and all(set(e) == {"file", "offset", "position"} for e in entries)


def test_verify_passes_on_a_healthy_log_dir(partition: Path) -> None:
    result = samsa("log", "verify", str(partition.parent))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified 1 partition directories: 0 problem(s)" in result.stdout


def test_verify_names_file_and_offset_of_a_corrupt_batch(partition: Path) -> None:
    segment = sorted(partition.glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[-5] ^= 0xFF  # inside the last batch's records: CRC mismatch
    segment.write_bytes(bytes(data))
    result = samsa("log", "verify", str(partition), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    problem = report["problems"][0]
    assert problem["path"] == str(segment)
    assert problem["offset"] is not None and "CRC" in problem["reason"]


def test_missing_path_is_a_one_line_error(tmp_path: Path) -> None:
    result = samsa("log", "dump", str(tmp_path / "nope.log"))
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "no such file" in result.stderr


def test_usage_error_exits_2() -> None:
    assert samsa("log", "frobnicate").returncode == 2
    assert os.path.exists(SAMSA)


def test_dump_decodes_a_metadata_snapshot(tmp_path: Path) -> None:
    # a .checkpoint file as the broker writes it: header, a TopicRecord, footer
    import uuid

    from protocol.messages.metadata.topic_record import TopicRecord
    from replication.metadata.records import encode_metadata_record
    from replication.metadata.snapshot import SnapshotId, encode_snapshot, write_snapshot

    topic_id = uuid.UUID(int=42)
    snapshot_id = SnapshotId(end_offset=17, epoch=3)
    batches = encode_snapshot([encode_metadata_record(TopicRecord(name="orders", topic_id=topic_id))],
                              snapshot_id, timestamp_ms=1_700_000_000_000,
                              last_contained_log_timestamp=1_700_000_000_000)
    path = write_snapshot(tmp_path, snapshot_id, batches)
    result = samsa("log", "dump", "--records", "--json", str(path))
    assert result.returncode == 0, result.stderr
    batches_shown = [json.loads(line) for line in result.stdout.splitlines()]
    assert [b["isControl"] for b in batches_shown] == [True, False, True]
    assert [b["baseOffset"] for b in batches_shown] == [0, 1, 2]
    payload = json.loads(batches_shown[1]["records"][0]["payload"])
    assert payload["type"] == "TopicRecord"
    assert payload["data"] == {"name": "orders", "topic_id": str(topic_id)}
