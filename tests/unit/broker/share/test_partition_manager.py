"""``SharePartitionManager`` driven by calls: a real partition log, the in-process persister, a
manual clock and a timer that only records what it was asked to schedule."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.share.memory_persister import MemorySharePersister
from broker.share.partition_manager import DEAD_LETTER_RETRY_S, SharePartitionManager
from broker.share.state_records import SharePartitionKey
from broker.share.values import AcknowledgementBatch, AcquiredRecords, ShareSnapshot, StateBatch
from protocol.errors import (
    CoordinatorNotAvailableError,
    InvalidRecordStateError,
    NotLeaderOrFollowerError,
    UnknownTopicIdError,
)
from protocol.records import Record, encode_batch, iter_batches
from replication.metadata.group_config import ShareGroupSettings
from replication.partition import Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log

TOPIC_ID = uuid.UUID(int=42)
LOCK_MS = 1_000
ACCEPT, RELEASE = 1, 2
AVAILABLE, ACKNOWLEDGED = 0, 2


@dataclass
class Timer:
    at_ms: int
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class Scene:
    def __init__(self, tmp_path: Path, *, reset: str = "latest", persister: MemorySharePersister | None = None,
                 log: Log | None = None, dead_letter_topic: str | None = None,
                 record_expiry_ms: int | None = None) -> None:
        self.clock = ManualClock()
        self.log = log or Log.open(tmp_path / "queue-0", LogConfig(), clock=self.clock)
        self.partition = Partition(self.log, topic_id=TOPIC_ID, leader_epoch=3)
        self.persister = persister or MemorySharePersister()
        self.timers: list[Timer] = []
        self.woken: list[tuple[str, int]] = []
        self.manager = SharePartitionManager(
            persister=lambda: self.persister,
            partition_of=self._partition_of,
            topic_name=lambda topic_id: "queue" if topic_id == TOPIC_ID else None,
            settings_of=lambda group_id: ShareGroupSettings(
                record_lock_duration_ms=LOCK_MS, delivery_count_limit=3, auto_offset_reset=reset,
                dead_letter_topic=dead_letter_topic, record_expiry_ms=record_expiry_ms),
            clock=self.clock,
            wake=lambda topic, index: self.woken.append((topic, index)),
            schedule=self._schedule,
            append_dead_letters=self._append_dead_letter,
        )
        self.dead_letter_batches: list[tuple[str, int, bytes]] = []
        self.dead_letter_fails = False

    async def _append_dead_letter(self, topic: str, index: int, batch: bytes) -> None:
        if self.dead_letter_fails:
            raise NotLeaderOrFollowerError("the dead-letter partition is led elsewhere")
        self.dead_letter_batches.append((topic, index, batch))

    def _partition_of(self, topic: str, index: int) -> Partition:
        assert (topic, index) == ("queue", 0)
        return self.partition

    def _schedule(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(self.clock.milliseconds() + round(delay_s * 1000), callback)
        self.timers.append(timer)
        return timer

    def produce(self, *values: bytes) -> None:
        for value in values:
            self.partition.append_as_leader(encode_batch([Record(
                offset=0, timestamp=self.clock.milliseconds(), key=None, value=value)]))

    def fire_due(self) -> None:
        for timer in list(self.timers):
            if not timer.cancelled and timer.at_ms <= self.clock.milliseconds():
                timer.cancelled = True
                timer.callback()


KEY = SharePartitionKey("group", TOPIC_ID, 0)


def run(scenario: Callable[[], object]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


def offsets(records: bytes) -> list[int]:
    return [offset for batch in iter_batches(records) for offset in range(batch.base_offset, batch.last_offset + 1)]


def test_a_new_share_partition_starts_at_latest_and_is_initialized(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    scene.produce(b"old-0", b"old-1")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        assert entry.share_partition.start_offset == 2
        assert await scene.persister.read_state(KEY, leader_epoch=3) == ShareSnapshot(0, -1, 2, ())
        scene.produce(b"new-2")
        result = scene.manager.acquire(entry, "m1", max_records=10, max_bytes=1 << 20)
        assert result.acquired == (AcquiredRecords(2, 2, 1),) and offsets(result.records) == [2]

    run(scenario)


def test_earliest_starts_at_the_log_start(tmp_path: Path) -> None:
    scene = Scene(tmp_path, reset="earliest")
    scene.produce(b"old-0", b"old-1")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        result = scene.manager.acquire(entry, "m1", max_records=1, max_bytes=1 << 20)
        assert result.acquired == (AcquiredRecords(0, 0, 1),) and offsets(result.records) == [0]
        second = scene.manager.acquire(entry, "m2", max_records=5, max_bytes=1 << 20)
        assert second.acquired == (AcquiredRecords(1, 1, 1),)

    run(scenario)


def test_acknowledgements_are_persisted_before_returning(tmp_path: Path) -> None:
    scene = Scene(tmp_path, reset="earliest")
    scene.produce(b"a", b"b", b"c")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        scene.manager.acquire(entry, "m1", max_records=3, max_bytes=1 << 20)
        writes = scene.persister.write_count
        await scene.manager.acknowledge(entry, "m1", [AcknowledgementBatch(0, 2, (ACCEPT, RELEASE, ACCEPT))])
        assert scene.persister.write_count == writes + 1
        state = await scene.persister.read_state(KEY, leader_epoch=3)
        assert state is not None and state.start_offset == 1
        assert state.state_batches == (StateBatch(1, 1, AVAILABLE, 1), StateBatch(2, 2, ACKNOWLEDGED, 1))
        with pytest.raises(InvalidRecordStateError):
            await scene.manager.acknowledge(entry, "m2", [AcknowledgementBatch(1, 1, (ACCEPT,))])
        assert scene.woken  # the release woke waiting fetches

    run(scenario)


def test_a_lock_expiry_fires_a_timer_releases_and_persists(tmp_path: Path) -> None:
    scene = Scene(tmp_path, reset="earliest")
    scene.produce(b"a")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        scene.manager.acquire(entry, "m1", max_records=1, max_bytes=1 << 20)
        assert scene.manager.next_timer_ms(KEY) == scene.clock.milliseconds() + LOCK_MS
        scene.clock.advance(LOCK_MS - 1)
        scene.fire_due()
        assert scene.manager.acquire(entry, "m2", max_records=1, max_bytes=1 << 20).acquired == ()
        scene.clock.advance(1)
        scene.woken.clear()
        scene.fire_due()
        assert scene.woken == [("queue", 0)] and scene.manager.next_timer_ms(KEY) is None
        await asyncio.sleep(0)  # the background write runs
        state = await scene.persister.read_state(KEY, leader_epoch=3)
        assert state is not None and state.state_batches == (StateBatch(0, 0, AVAILABLE, 1),)
        assert scene.manager.acquire(entry, "m2", max_records=1, max_bytes=1 << 20).acquired == (
            AcquiredRecords(0, 0, 2),)

    run(scenario)


def test_releasing_a_member_and_reloading_after_a_restart(tmp_path: Path) -> None:
    scene = Scene(tmp_path, reset="earliest")
    scene.produce(b"a", b"b", b"c")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        scene.manager.acquire(entry, "m1", max_records=3, max_bytes=1 << 20)
        await scene.manager.acknowledge(entry, "m1", [AcknowledgementBatch(1, 1, (ACCEPT,))])
        restarted = Scene(tmp_path, persister=scene.persister, log=scene.log)  # same log and state
        again = await restarted.manager.share_partition("group", TOPIC_ID, 0)
        result = restarted.manager.acquire(again, "m2", max_records=10, max_bytes=1 << 20)
        assert result.acquired == (AcquiredRecords(0, 0, 2), AcquiredRecords(2, 2, 2))
        await restarted.manager.release_member("group", "m2")
        assert restarted.manager.acquire(again, "m3", max_records=10, max_bytes=1 << 20).acquired == (
            AcquiredRecords(0, 0, 3), AcquiredRecords(2, 2, 3))

    run(scenario)


def test_a_partition_no_longer_led_is_dropped(tmp_path: Path) -> None:
    scene = Scene(tmp_path)

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        scene.partition.leader_id = 7
        scene.manager.role_changed(scene.partition)  # the replica manager's callback
        assert scene.manager.loaded() == [] and scene.woken == [("queue", 0)]
        with pytest.raises(NotLeaderOrFollowerError):
            scene.manager.acquire(entry, "m1", max_records=1, max_bytes=1 << 20)
        with pytest.raises(NotLeaderOrFollowerError):
            await scene.manager.share_partition("group", TOPIC_ID, 0)
        with pytest.raises(UnknownTopicIdError):
            await scene.manager.share_partition("group", uuid.UUID(int=1), 0)
        scene.partition.leader_id = scene.partition.node_id
        scene.partition.leader_epoch = 4  # led again, at a new epoch: loaded afresh
        reloaded = await scene.manager.share_partition("group", TOPIC_ID, 0)
        assert reloaded is not entry and reloaded.leader_epoch == 4

    run(scenario)


class FailingPersister(MemorySharePersister):
    fail = False

    async def write_state(self, key, **kwargs):  # type: ignore[no-untyped-def]
        if self.fail:
            raise CoordinatorNotAvailableError("the share coordinator is away")
        await super().write_state(key, **kwargs)


def test_a_failed_write_answers_the_error_and_reloads_the_persisted_state(tmp_path: Path) -> None:
    persister = FailingPersister()
    scene = Scene(tmp_path, reset="earliest", persister=persister)
    scene.produce(b"a")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        scene.manager.acquire(entry, "m1", max_records=1, max_bytes=1 << 20)
        persister.fail = True
        with pytest.raises(CoordinatorNotAvailableError):
            await scene.manager.acknowledge(entry, "m1", [AcknowledgementBatch(0, 0, (ACCEPT,))])
        persister.fail = False
        again = await scene.manager.share_partition("group", TOPIC_ID, 0)
        assert again is not entry  # the acknowledgement was not persisted: not kept either
        assert scene.manager.acquire(again, "m2", max_records=1, max_bytes=1 << 20).acquired == (
            AcquiredRecords(0, 0, 1),)

    run(scenario)


def test_a_rejected_record_is_persisted_dead_lettering_appended_with_headers_then_archived(tmp_path: Path) -> None:
    scene = Scene(tmp_path, reset="earliest", dead_letter_topic="dlq")
    scene.partition.append_as_leader(encode_batch([Record(
        offset=0, timestamp=scene.clock.milliseconds(), key=b"k", value=b"poison", headers=(("h", b"1"),))]))
    scene.produce(b"fine")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        scene.manager.acquire(entry, "m1", max_records=2, max_bytes=1 << 20)
        scene.dead_letter_fails = True
        await scene.manager.acknowledge(entry, "m1", [AcknowledgementBatch(0, 1, (3, ACCEPT))])  # 3: Reject
        await asyncio.sleep(0)
        state = await scene.persister.read_state(KEY, leader_epoch=3)
        assert state is not None and state.start_offset == 0
        assert state.state_batches[0] == StateBatch(0, 0, 100, 1)  # DEAD_LETTERING (rejected), persisted
        assert scene.dead_letter_batches == []  # the append failed: still pending
        scene.dead_letter_fails = False
        scene.produce(b"later")
        scene.manager.acquire(entry, "m1", max_records=1, max_bytes=1 << 20)  # a change: tried again
        for _ in range(5):
            await asyncio.sleep(0)
        [(topic, index, batch)] = scene.dead_letter_batches
        assert (topic, index) == ("dlq", 0)
        [record] = [record for each in iter_batches(batch) for record in each.records]
        assert (record.key, record.value) == (b"k", b"poison")
        headers = dict(record.headers)
        assert headers["h"] == b"1" and headers["samsa.dlq.topic"] == b"queue"
        assert headers["samsa.dlq.partition"] == b"0" and headers["samsa.dlq.offset"] == b"0"
        assert headers["samsa.dlq.delivery.count"] == b"1" and headers["samsa.dlq.reason"] == b"rejected"
        assert headers["samsa.dlq.timestamp"] == str(scene.clock.milliseconds()).encode()
        state = await scene.persister.read_state(KEY, leader_epoch=3)
        assert state is not None and state.start_offset == 2  # archived: the start moved past it

    run(scenario)


def test_a_failed_dead_letter_append_is_tried_again_on_a_timer_with_no_other_change(tmp_path: Path) -> None:
    scene = Scene(tmp_path, reset="earliest", dead_letter_topic="dlq")
    scene.produce(b"poison")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        scene.manager.acquire(entry, "m1", max_records=1, max_bytes=1 << 20)
        scene.dead_letter_fails = True
        await scene.manager.acknowledge(entry, "m1", [AcknowledgementBatch(0, 0, (3,))])  # Reject
        for _ in range(5):
            await asyncio.sleep(0)
        assert scene.dead_letter_batches == []
        [retry] = [timer for timer in scene.timers if not timer.cancelled]
        assert retry.at_ms == scene.clock.milliseconds() + round(DEAD_LETTER_RETRY_S * 1000)
        scene.dead_letter_fails = False
        scene.clock.advance(round(DEAD_LETTER_RETRY_S * 1000))
        scene.fire_due()  # nothing else happens to the share partition
        for _ in range(5):
            await asyncio.sleep(0)
        assert [topic for topic, _, _ in scene.dead_letter_batches] == ["dlq"]
        state = await scene.persister.read_state(KEY, leader_epoch=3)
        assert state is not None and state.start_offset == 1  # confirmed, persisted
        assert [timer for timer in scene.timers if not timer.cancelled] == []

    run(scenario)


def test_records_older_than_the_expiry_age_are_never_delivered_again(tmp_path: Path) -> None:
    scene = Scene(tmp_path, reset="earliest", dead_letter_topic="dlq", record_expiry_ms=5_000)
    scene.produce(b"a", b"b")

    async def scenario() -> None:
        entry = await scene.manager.share_partition("group", TOPIC_ID, 0)
        assert scene.manager.acquire(entry, "m1", max_records=1, max_bytes=1 << 20).acquired == (
            AcquiredRecords(0, 0, 1),)
        await scene.manager.acknowledge(entry, "m1", [AcknowledgementBatch(0, 0, (RELEASE,))])
        assert scene.manager.next_timer_ms(KEY) == scene.clock.milliseconds() + 5_000  # the expiry
        scene.clock.advance(5_000)
        scene.fire_due()
        for _ in range(5):
            await asyncio.sleep(0)
        scene.produce(b"c")  # fresh
        assert scene.manager.acquire(entry, "m2", max_records=5, max_bytes=1 << 20).acquired == (
            AcquiredRecords(2, 2, 1),)  # a (released) and b (read with it, never delivered) expired
        for _ in range(5):
            await asyncio.sleep(0)
        dead = [(record.value, dict(record.headers)["samsa.dlq.reason"]) for _, _, batch in scene.dead_letter_batches
                for each in iter_batches(batch) for record in each.records]
        assert dead == [(b"a", b"expired"), (b"b", b"expired")]

    run(scenario)
