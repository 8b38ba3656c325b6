"""The share-partition leader's side of share groups (KIP-932; Kafka's ``SharePartitionManager``):
one ``SharePartition`` (the sans-IO state machine) per (group id, topic partition) this node
leads, loaded from the share coordinator through ``SharePersister``, with the share session
cache, the lock-expiry timers and the persistence rule around it.

Lifecycle of a share partition here:
- created on first use (a ShareFetch naming it): ``read_state`` at the partition's leader
  epoch; a share partition never initialized (None, or a start offset of -1) starts at
  ``share.auto.offset.reset`` (latest: the high watermark; earliest: the log start offset),
  and one never written is ``initialize_state``d (state epoch 0) first;
- dropped when this node no longer leads the topic partition, or leads it at another leader
  epoch (checked at every use and at every timer), and when a write failed (the next use
  reads the persisted state again: Kafka rolls the in-memory change back, Samsa reloads it);
- lock and record expiry: one loop timer per share partition at ``next_deadline_ms()``
  (no polling); when it fires the deadlines are applied, the change persisted, and long-poll
  ShareFetches waiting on the partition are tried again (released records can be acquired).

Persistence (Kafka's rule): acknowledgements, releases (session close, a member's connection
closing) and expiries are written with ``write_state`` before the request is answered; a
write failure answers the error to the acknowledging partition. Acquisitions are not
written (as in Kafka): a crash forgets in-progress deliveries, whose delivery counts the next
persisted change carries (``SharePartition.snapshot`` persists an ACQUIRED record as
AVAILABLE with its count). Each write carries the whole in-flight state (``snapshot``) and
writes of one share partition are serialized, the snapshot taken inside the lock, so a later
write never carries an older state; an unchanged state is not written again.

Owned by the event loop. The clock and the timer are injected (``schedule``), so unit tests
drive expiry by calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from uuid import UUID

from broker.share.persister import SharePersister
from broker.share.share_partition import SharePartition
from broker.share.share_session import ShareSessionCache
from broker.share.state_records import SharePartitionKey
from broker.share.values import (
    AcknowledgementBatch,
    AcquiredRecords,
    AutoOffsetReset,
    DeadLetter,
    FetchedBatch,
    SharePartitionConfig,
    ShareSnapshot,
    initial_start_offset,
)
from protocol.errors import KafkaError, NotLeaderOrFollowerError
from protocol.records import LOG_OVERHEAD, Record, encode_batch, iter_batches, read_batch_header
from replication.metadata.group_config import ShareGroupSettings
from replication.partition import FetchIsolation, Partition
from storage.clock import Clock

__all__ = ["ShareFetchResult", "SharePartitionManager", "TimerHandle"]

logger = logging.getLogger("samsa.broker.share")

READ_COMMITTED = "read_committed"


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


Schedule = Callable[[float, Callable[[], None]], TimerHandle]
AppendDeadLetters = Callable[[str, int, bytes], Awaitable[None]]
"""Append one batch to the dead-letter topic (its name, the source partition index) and
return once it is acknowledged (replicated); raise the append's KafkaError."""
DEAD_LETTER_BATCH_RECORDS = 500  # records per dead-letter batch
DEAD_LETTER_RETRY_S = 5.0  # after a failed append (the appender retried already), try again


@dataclass(frozen=True, slots=True)
class ShareFetchResult:
    """What one share partition gave a ShareFetch: the raw batches holding the acquired
    records (whole log batches, bytes untouched) and the acquired ranges."""

    records: bytes
    acquired: tuple[AcquiredRecords, ...]


@dataclass(eq=False, slots=True)
class _Entry:
    key: SharePartitionKey
    topic: str
    index: int
    leader_epoch: int
    share_partition: SharePartition
    settings: ShareGroupSettings
    written: ShareSnapshot | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: TimerHandle | None = None
    timer_at: int | None = None
    dead_letters: list[DeadLetter] = field(default_factory=list)  # taken, not yet appended
    dead_lettering: bool = False  # an append task is running
    dead_letter_retry: TimerHandle | None = None  # the next try after a failed append


class SharePartitionManager:
    def __init__(
        self,
        *,
        persister: Callable[[], SharePersister],
        partition_of: Callable[[str, int], Partition],
        topic_name: Callable[[UUID], str | None],
        settings_of: Callable[[str], ShareGroupSettings],
        clock: Clock,
        wake: Callable[[str, int], object] = lambda topic, index: None,
        schedule: Schedule | None = None,
        max_sessions: int = 2000,
        append_dead_letters: AppendDeadLetters | None = None,
    ) -> None:
        self._persister = persister
        self._partition_of = partition_of
        self._topic_name = topic_name
        self._settings_of = settings_of
        self.clock = clock
        self._wake = wake
        self._schedule = schedule
        self._append_dead_letters = append_dead_letters
        self.sessions = ShareSessionCache(max_sessions=max_sessions)
        self._entries: dict[SharePartitionKey, _Entry] = {}
        self._loading: dict[SharePartitionKey, asyncio.Future[_Entry]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def settings(self, group_id: str) -> ShareGroupSettings:
        """The share group's effective settings (its group configs over the broker's)."""
        return self._settings_of(group_id)

    # ---- finding and loading ------------------------------------------------------------

    def leader_partition(self, topic_id: UUID, index: int) -> tuple[str, Partition]:
        """The topic's name and the partition this node leads (UNKNOWN_TOPIC_ID,
        UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER otherwise)."""
        from protocol.errors import UnknownTopicIdError

        name = self._topic_name(topic_id)
        if name is None:
            raise UnknownTopicIdError(f"no topic with id {topic_id}")
        partition = self._partition_of(name, index)
        partition.check_leader()
        return name, partition

    async def share_partition(self, group_id: str, topic_id: UUID, index: int) -> _Entry:
        """The share partition, loaded (once, whoever asks meanwhile waits for that load)."""
        name, partition = self.leader_partition(topic_id, index)
        key = SharePartitionKey(group_id, topic_id, index)
        entry = self._entries.get(key)
        if entry is not None and entry.leader_epoch == partition.leader_epoch:
            return entry
        if entry is not None:
            self._drop(entry)
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.get_running_loop().create_future()
            self._loading[key] = loading
            try:
                loaded = await self._load(key, name, partition)
            except BaseException as error:
                loading.set_exception(error)
                loading.exception()  # retrieved: the waiters (if any) re-raise it
                raise
            finally:
                self._loading.pop(key, None)
            self._entries[key] = loaded
            loading.set_result(loaded)
            self._arm(loaded)
            self._persist_dead_letters(loaded)
            return loaded
        return await asyncio.shield(loading)

    async def _load(self, key: SharePartitionKey, name: str, partition: Partition) -> _Entry:
        settings = self._settings_of(key.group_id)
        config = _config_of(settings)
        persister = self._persister()
        leader_epoch = partition.leader_epoch
        snapshot = await persister.read_state(key, leader_epoch=leader_epoch)
        now_ms = self.clock.milliseconds()
        if snapshot is None or snapshot.start_offset < 0:
            start = initial_start_offset(AutoOffsetReset(settings.auto_offset_reset),
                                         log_start_offset=partition.log_start_offset,
                                         log_end_offset=partition.high_watermark)
            if snapshot is None:
                await persister.initialize_state(key, state_epoch=0, start_offset=start)
                snapshot = ShareSnapshot(0, leader_epoch, start, ())
            else:
                snapshot = replace(snapshot, start_offset=start)
        share_partition = SharePartition.restore(snapshot, config, now_ms=now_ms, leader_epoch=leader_epoch)
        share_partition.advance_log_start_offset(partition.log_start_offset)
        logger.info("share partition %s %s-%d loaded at %d (leader epoch %d)", key.group_id, name,
                    key.partition, share_partition.start_offset, leader_epoch)
        return _Entry(key, name, key.partition, leader_epoch, share_partition, settings, written=snapshot)

    def _current(self, entry: _Entry) -> Partition | None:
        """The topic partition, if this node still leads it at the entry's epoch; else the
        entry is dropped."""
        try:
            partition = self._partition_of(entry.topic, entry.index)
        except KafkaError:
            partition = None
        if partition is None or not partition.is_leader or partition.leader_epoch != entry.leader_epoch:
            self._drop(entry)
            return None
        return partition

    def _drop(self, entry: _Entry) -> None:
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        if entry.timer is not None:
            entry.timer.cancel()
        entry.timer = entry.timer_at = None
        if entry.dead_letter_retry is not None:
            entry.dead_letter_retry.cancel()
            entry.dead_letter_retry = None

    def loaded(self) -> list[SharePartitionKey]:
        return list(self._entries)

    def get(self, key: SharePartitionKey) -> SharePartition | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.share_partition

    def role_changed(self, partition: Partition) -> None:
        """The replica manager changed the partition's role (``on_role_changes``): its share
        partitions go unless this node still leads it at their epoch; waiting fetches wake."""
        for entry in list(self._entries.values()):
            if (entry.topic, entry.index) == (partition.topic, partition.partition) and self._current(entry) is None:
                self._wake(entry.topic, entry.index)

    def drop_not_led(self) -> None:
        """Drop every share partition this node no longer leads at its epoch."""
        for entry in list(self._entries.values()):
            self._current(entry)

    # ---- fetching -----------------------------------------------------------------------

    def acquire(self, entry: _Entry, member_id: str, *, max_records: int, max_bytes: int) -> ShareFetchResult:
        """Read the log where the share partition next has records to deliver and acquire up
        to ``max_records`` of them for the member (no I/O but the log read; not persisted)."""
        partition = self._current(entry)
        if partition is None:
            raise NotLeaderOrFollowerError(f"{entry.topic}-{entry.index} is no longer led here")
        share_partition = entry.share_partition
        self._apply_due(entry)
        share_partition.advance_log_start_offset(partition.log_start_offset)
        offset = _next_fetch_offset(share_partition, self.clock.milliseconds())
        if offset is None:
            return ShareFetchResult(b"", ())
        isolation = (FetchIsolation.TXN_COMMITTED if entry.settings.isolation_level == READ_COMMITTED
                     else FetchIsolation.HIGH_WATERMARK)
        fetch_slice = partition.read(offset, max_bytes, min_one_message=True, isolation=isolation)
        if fetch_slice is None:
            return ShareFetchResult(b"", ())
        data = fetch_slice.read()
        batches = _batches(data)
        if isolation is FetchIsolation.TXN_COMMITTED:
            batches = _without_aborted(batches, partition, offset)
        acquired = share_partition.acquire(
            member_id, [read.fetched for read in batches], now_ms=self.clock.milliseconds(),
            max_records=max_records if max_records > 0 else entry.settings.partition_max_record_locks)
        self._arm(entry)
        self._persist_dead_letters(entry)
        return ShareFetchResult(_covering(data, batches, acquired), acquired)

    def has_records(self, entry: _Entry) -> bool:
        """Whether a fetch might acquire something now (a long poll's completion check)."""
        partition = self._current(entry)
        if partition is None:
            return True  # answer now: the fetch reports NOT_LEADER_OR_FOLLOWER
        share_partition = entry.share_partition
        isolation_limit = (partition.last_stable_offset if entry.settings.isolation_level == READ_COMMITTED
                           else partition.high_watermark)
        window_end = share_partition.start_offset + entry.settings.partition_max_record_locks
        if share_partition.end_offset < min(isolation_limit, window_end):
            return True
        return share_partition.first_available_offset(self.clock.milliseconds()) is not None

    # ---- acknowledging and releasing ----------------------------------------------------

    async def acknowledge(self, entry: _Entry, member_id: str, batches: list[AcknowledgementBatch]) -> None:
        """Apply the member's acknowledgements and persist them; raises the partition's error."""
        if self._current(entry) is None:
            raise NotLeaderOrFollowerError(f"{entry.topic}-{entry.index} is no longer led here")
        entry.share_partition.acknowledge(member_id, batches, now_ms=self.clock.milliseconds())
        self._arm(entry)
        self._wake(entry.topic, entry.index)
        await self._persist(entry)
        self._dispatch_dead_letters(entry)

    async def release_member(self, group_id: str, member_id: str) -> None:
        """The member's session closed: its acquired records are released and persisted."""
        changed = []
        for entry in list(self._entries.values()):
            if entry.key.group_id != group_id:
                continue
            entry.share_partition.release_member(member_id, now_ms=self.clock.milliseconds())
            self._arm(entry)
            self._wake(entry.topic, entry.index)
            changed.append(entry)
        for entry in changed:
            try:
                await self._persist(entry)
            except KafkaError as error:
                logger.warning("persisting the release of %s's records of %s failed: %s",
                               member_id, entry.key, error)
                continue
            self._dispatch_dead_letters(entry)

    def members_removed(self, group_id: str, member_ids: tuple[str, ...]) -> None:
        """The group coordinator removed these members (they left, or their session expired):
        their records acquired here are released now, not at lock expiry. Only this node's
        share partitions hear it; elsewhere the session's close or the lock timeout does it."""
        for member_id in member_ids:
            self.spawn(self.release_member(group_id, member_id))

    def connection_closed(self, connection_id: str) -> None:
        """Kafka's disconnect listener: the connection's sessions close, records released."""
        for session in self.sessions.connection_closed(connection_id):
            self.spawn(self.release_member(session.group_id, session.member_id))

    def spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _persist(self, entry: _Entry) -> None:
        async with entry.lock:
            snapshot = entry.share_partition.snapshot()
            if snapshot == entry.written:
                return
            try:
                await self._persister().write_state(
                    entry.key, state_epoch=snapshot.state_epoch, leader_epoch=snapshot.leader_epoch,
                    start_offset=snapshot.start_offset, state_batches=snapshot.state_batches)
            except BaseException:
                self._drop(entry)  # reloaded from what was persisted at the next use
                raise
            entry.written = snapshot

    # ---- time ---------------------------------------------------------------------------

    def _apply_due(self, entry: _Entry) -> None:
        deadline = entry.share_partition.next_deadline_ms()
        if deadline is not None and deadline <= self.clock.milliseconds():
            self.expire(entry)

    def expire(self, entry: _Entry) -> None:
        """Apply the share partition's deadlines now, persist in the background, wake waiting
        fetches, re-arm the timer (what the timer does; tests call it)."""
        entry.timer = entry.timer_at = None
        if self._current(entry) is None:
            return
        entry.share_partition.expire(self.clock.milliseconds())
        self._arm(entry)
        self._wake(entry.topic, entry.index)
        self.spawn(self._persist_quietly(entry))

    async def _persist_quietly(self, entry: _Entry) -> None:
        try:
            await self._persist(entry)
        except KafkaError as error:
            logger.warning("persisting the expiry of %s failed: %s", entry.key, error)
            return
        self._dispatch_dead_letters(entry)

    # ---- dead letters (Samsa's samsa.share.dead.letter.topic) ----------------------------

    def _persist_dead_letters(self, entry: _Entry) -> None:
        """New dead letters (an acquisition expired records, a restore found some): persisted
        as DEAD_LETTERING first, then appended (``_persist_quietly`` dispatches them)."""
        letters = entry.share_partition.take_dead_letters()
        if letters or entry.dead_letters:
            entry.dead_letters += letters
            self.spawn(self._persist_quietly(entry))

    def _dispatch_dead_letters(self, entry: _Entry) -> None:
        """Start appending the share partition's new dead letters (one task per share
        partition at a time; letters that failed wait for the next call)."""
        entry.dead_letters += entry.share_partition.take_dead_letters()
        if entry.dead_letters and not entry.dead_lettering and self._append_dead_letters is not None \
                and entry.settings.dead_letter_topic and self._entries.get(entry.key) is entry:
            entry.dead_lettering = True
            self.spawn(self._dead_letter(entry))

    async def _dead_letter(self, entry: _Entry) -> None:
        """Append each pending dead letter to the dead-letter topic, then confirm it with
        ``dead_lettered`` and persist (DEAD_LETTERING -> ARCHIVED) — the letter was persisted
        as DEAD_LETTERING before it was taken, so a crash in between appends it again:
        at least once."""
        assert self._append_dead_letters is not None and entry.settings.dead_letter_topic
        try:
            while entry.dead_letters and self._entries.get(entry.key) is entry:
                letter = entry.dead_letters[0]
                for batch in self._dead_letter_batches(entry, letter):
                    await self._append_dead_letters(entry.settings.dead_letter_topic, entry.index, batch)
                entry.dead_letters.pop(0)
                entry.share_partition.dead_lettered(letter.first_offset, letter.last_offset)
                self._wake(entry.topic, entry.index)
                await self._persist(entry)
        except KafkaError as error:
            logger.warning("dead-lettering %s of %s to %s failed (retried in %.0f s): %s", entry.key.group_id,
                           entry.topic, entry.settings.dead_letter_topic, DEAD_LETTER_RETRY_S, error)
            self._retry_dead_letters(entry)
        except Exception:
            logger.exception("dead-lettering %s failed", entry.key)
            self._retry_dead_letters(entry)
        finally:
            entry.dead_lettering = False

    def _retry_dead_letters(self, entry: _Entry) -> None:
        """Try the letters left again in ``DEAD_LETTER_RETRY_S`` (or at the share partition's
        next change, whichever comes first), unless the entry was dropped meanwhile."""
        if entry.dead_letter_retry is not None or self._entries.get(entry.key) is not entry:
            return

        def retry() -> None:
            entry.dead_letter_retry = None
            self._dispatch_dead_letters(entry)

        schedule = self._schedule or asyncio.get_running_loop().call_later
        entry.dead_letter_retry = schedule(DEAD_LETTER_RETRY_S, retry)

    def _dead_letter_batches(self, entry: _Entry, letter: DeadLetter) -> list[bytes]:
        """The letter's records, read from the source log (the only place the share path
        decodes records), each with Samsa's dead-letter headers, in batches."""
        partition = self._partition_of(entry.topic, entry.index)
        headers = [
            ("samsa.dlq.topic", entry.topic.encode()),
            ("samsa.dlq.partition", str(entry.index).encode()),
            ("samsa.dlq.delivery.count", str(letter.delivery_count).encode()),
            ("samsa.dlq.reason", letter.reason.value.encode()),
            ("samsa.dlq.timestamp", str(letter.timestamp_ms).encode()),
        ]
        records: list[Record] = []
        offset = letter.first_offset
        while offset <= letter.last_offset:
            piece = partition.read(offset, 1 << 20, min_one_message=True, isolation=FetchIsolation.HIGH_WATERMARK)
            if piece is None:
                break  # gone (retention): nothing left to move
            for batch in iter_batches(piece.read(), allow_partial_tail=True):
                if batch.header.is_control:
                    offset = batch.next_offset
                    continue
                for record in batch.records:
                    if letter.first_offset <= record.offset <= letter.last_offset and record.offset >= offset:
                        records.append(Record(
                            offset=len(records), timestamp=record.timestamp, key=record.key, value=record.value,
                            headers=(*record.headers, *headers[:2],
                                     ("samsa.dlq.offset", str(record.offset).encode()), *headers[2:])))
                offset = max(offset, batch.next_offset)
                if offset > letter.last_offset:
                    break
        return [encode_batch([replace(record, offset=index) for index, record in
                              enumerate(records[start:start + DEAD_LETTER_BATCH_RECORDS])])
                for start in range(0, len(records), DEAD_LETTER_BATCH_RECORDS)]

    def _arm(self, entry: _Entry) -> None:
        deadline = entry.share_partition.next_deadline_ms()
        if deadline == entry.timer_at and (entry.timer is not None or deadline is None):
            return
        if entry.timer is not None:
            entry.timer.cancel()
        entry.timer = entry.timer_at = None
        if deadline is None or self._entries.get(entry.key) is not entry:
            return
        delay_s = max(deadline - self.clock.milliseconds(), 1) / 1000
        schedule = self._schedule or asyncio.get_running_loop().call_later
        entry.timer_at = deadline
        entry.timer = schedule(delay_s, lambda: self.expire(entry))

    def next_timer_ms(self, key: SharePartitionKey) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.timer_at

    def entry(self, key: SharePartitionKey) -> _Entry | None:
        return self._entries.get(key)

    def stop(self) -> None:
        for entry in list(self._entries.values()):
            self._drop(entry)

    async def close(self) -> None:
        """Close the dead-letter appender's connections (the daemon's shutdown)."""
        close = getattr(self._append_dead_letters, "close", None)
        if close is not None:
            await close()


def _config_of(settings: ShareGroupSettings) -> SharePartitionConfig:
    return SharePartitionConfig(
        record_lock_duration_ms=settings.record_lock_duration_ms,
        delivery_count_limit=settings.delivery_count_limit,
        partition_max_record_locks=settings.partition_max_record_locks,
        dead_letter_topic=settings.dead_letter_topic,
        record_expiry_ms=settings.record_expiry_ms,
    )


def _next_fetch_offset(share_partition: SharePartition, now_ms: int) -> int | None:
    """The first in-flight AVAILABLE record, else the end offset when the window has room
    (None: nothing can be acquired until something is acknowledged or expires)."""
    available = share_partition.first_available_offset(now_ms)
    if available is not None:
        return available
    if share_partition.end_offset - share_partition.start_offset >= share_partition.config.partition_max_record_locks:
        return None
    return share_partition.end_offset


@dataclass(frozen=True, slots=True)
class _Read:
    """One whole batch of a log read: its offsets, where it is in the read bytes, and what
    read_committed needs of its header."""

    fetched: FetchedBatch
    position: int
    size: int
    producer_id: int
    transactional: bool
    control: bool


def _batches(data: bytes) -> list[_Read]:
    """The whole batches of a log read, from their headers only."""
    batches: list[_Read] = []
    position = 0
    view = memoryview(data)
    while position + LOG_OVERHEAD <= len(data):
        try:
            header = read_batch_header(view, position)
        except Exception:  # a partial header at the end of a read
            break
        size = header.size_in_bytes
        if position + size > len(data):
            break
        batches.append(_Read(FetchedBatch(header.base_offset, header.last_offset, header.max_timestamp),
                             position, size, header.producer_id, header.is_transactional, header.is_control))
        position += size
    return batches


def _without_aborted(batches: list[_Read], partition: Partition, fetch_offset: int) -> list[_Read]:
    """read_committed: the batches of aborted transactions left out (their offsets become
    gaps of the share partition when a later batch is acquired)."""
    aborted = partition.aborted_transactions(fetch_offset)
    if not aborted:
        return batches
    return [read for read in batches if read.control or not read.transactional or not any(
        txn.producer_id == read.producer_id and txn.first_offset <= read.fetched.first_offset <= txn.last_offset
        for txn in aborted)]


def _covering(data: bytes, batches: Iterable[_Read], acquired: tuple[AcquiredRecords, ...]) -> bytes:
    """The read's batches that hold at least one acquired record, concatenated."""
    if not acquired:
        return b""
    parts = []
    for read in batches:
        first, last = read.fetched.first_offset, read.fetched.last_offset
        if any(each.first_offset <= last and first <= each.last_offset for each in acquired):
            parts.append(data[read.position:read.position + read.size])
    return b"".join(parts)
