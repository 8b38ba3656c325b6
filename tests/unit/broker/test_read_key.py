"""The SamsaReadKey handler against real logs and a fake broker (no sockets): the key's
batches up to the high watermark or the last stable offset, and each error."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import RequestContext, read_key
from protocol.errors import ErrorCode
from protocol.messages.request_header import RequestHeader
from protocol.messages.samsa_read_key_request import SamsaReadKeyRequest
from protocol.records import Record, encode_batch, iter_batches
from replication.partition import Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import EndMarker
from tests.unit.storage.helpers import crash

NODE_ID = 1


@dataclass
class FakeReplicaManager:
    partitions: dict[tuple[str, int], Partition] = field(default_factory=dict)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))


@dataclass
class FakeBroker:
    replica_manager: FakeReplicaManager
    node_id: int = NODE_ID
    authorizer: None = None  # no authorization (broker.auth)
    stopping: bool = False


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[FakeBroker]:
    clock = ManualClock()
    log = Log.open(tmp_path / "a-0", LogConfig(segment_bytes=400), clock=clock)
    for number in range(20):
        key = b"k%d" % (number % 3)
        log.append_as_leader(encode_batch([Record(0, 1000 + number, key, b"v%d" % number)]))
    partition = Partition(log, topic_id=uuid.uuid4(), node_id=NODE_ID)
    partition.maybe_advance_high_watermark()
    manager = FakeReplicaManager({("a", 0): partition})
    yield FakeBroker(manager)
    crash(log)


def ask(broker: FakeBroker, key: bytes, start: int = 0, **fields: Any) -> Any:
    request = SamsaReadKeyRequest(topic=fields.pop("topic", "a"), partition=0, key=key,
                                  start_offset=start, max_wait_ms=0, **fields)
    context = RequestContext(RequestHeader(client_id="t"), 0, cast(Any, broker), "peer")
    return asyncio.run(read_key.handle(context, request))  # type: ignore[arg-type]


def values(response: Any, key: bytes) -> list[bytes | None]:
    if response.records is None:
        return []
    return [r.value for b in iter_batches(response.records) for r in b.records if r.key == key]


def test_the_keys_records_in_offset_order(broker: FakeBroker) -> None:
    response = ask(broker, b"k1")
    assert response.error_code == 0
    assert values(response, b"k1") == [b"v%d" % n for n in range(1, 20, 3)]
    assert (response.high_watermark, response.log_start_offset, response.next_offset) == (20, 0, 20)
    assert values(ask(broker, b"k1", start=10), b"k1") == [b"v10", b"v13", b"v16", b"v19"]
    assert ask(broker, b"nobody").records is None


def test_paging_with_max_bytes(broker: FakeBroker) -> None:
    seen: list[bytes | None] = []
    offset = 0
    while offset < 20:
        response = ask(broker, b"k2", start=offset, max_bytes=1)
        seen += values(response, b"k2")
        offset = response.next_offset
    assert seen == [b"v%d" % n for n in range(2, 20, 3)]


def test_reads_stop_at_the_high_watermark(broker: FakeBroker) -> None:
    partition = broker.replica_manager.partitions[("a", 0)]
    partition.log.append_as_leader(encode_batch([Record(0, 5000, b"k0", b"unreplicated")]))
    partition.high_watermark = 20
    response = ask(broker, b"k0")
    assert b"unreplicated" not in values(response, b"k0") and response.next_offset == 20


def test_read_committed_leaves_out_aborted_batches_and_stops_at_the_lso(broker: FakeBroker) -> None:
    partition = broker.replica_manager.partitions[("a", 0)]
    log = partition.log
    for producer_id, marker in ((7, EndMarker(True, 0)), (8, EndMarker(False, 0)), (9, None)):
        batch = encode_batch([Record(0, 6000, b"k0", b"txn%d" % producer_id)],
                             producer_id=producer_id, producer_epoch=0, base_sequence=0,
                             is_transactional=True)
        log.append_as_leader(batch, transaction_verified=True)
        if marker is not None:
            log.append_end_marker(producer_id, 0, marker)
    partition.maybe_advance_high_watermark()
    committed = ask(broker, b"k0", isolation_level=1)
    assert values(committed, b"k0")[-1:] == [b"txn8"] and b"txn7" not in values(committed, b"k0")
    assert committed.next_offset == partition.last_stable_offset < partition.high_watermark
    uncommitted = values(ask(broker, b"k0"), b"k0")
    assert uncommitted[-3:] == [b"txn7", b"txn8", b"txn9"]


def test_errors(broker: FakeBroker) -> None:
    assert ask(broker, b"k", topic="zzz").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask(broker, b"k", start=21).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert ask(broker, b"k", current_leader_epoch=5).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    broker.replica_manager.partitions[("a", 0)].leader_id = NODE_ID + 1
    assert ask(broker, b"k").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
