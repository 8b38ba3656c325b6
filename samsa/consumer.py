"""The consumer: a member of a consumer group (``subscribe``) or a reader of chosen
partitions (``assign``), with Kafka's Java consumer semantics and config names.

    from samsa import Consumer

    with Consumer("events", bootstrap_servers="localhost:9092", group_id="app") as consumer:
        for record in consumer:
            print(record.offset, record.value)

Two layers: ``AsyncConsumer``, the asyncio core (fetching in ``samsa._fetcher``, decoding in
``samsa._decoding``, positions in ``samsa._positions``, membership in ``samsa._membership``,
rebalances and listener callbacks in ``samsa._rebalance``), and ``Consumer``, the blocking
facade, which runs the core on its own event loop thread (``samsa._loop``).

Semantics (Java's KafkaConsumer):

- ``poll()`` drives everything the application sees: it joins or rejoins the group when
  needed, looks up positions (committed offset, else ``auto.offset.reset``), auto-commits
  every ``auto.commit.interval.ms``, and returns up to ``max.poll.records`` records. Each
  record returned advances its partition's position; ``commit()`` with no arguments commits
  the positions. Fetching runs ahead in the background (``samsa._fetcher``).
- Rebalance listener callbacks run inside ``poll()`` (and ``close()`` / ``unsubscribe()``) on
  the caller's thread, so a callback may call ``commit()``: the facade hands each callback from
  the loop thread to the calling thread and waits for it. Eager protocol: all partitions are
  revoked before rejoining (after an auto-commit); cooperative: only those that move, then a
  second rebalance gives them to their new owners. Partitions are "lost" instead of revoked
  when the membership was lost (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION).
- Heartbeats run in a background task; a member whose application does not call ``poll()``
  within ``max.poll.interval.ms`` leaves the group, and rejoins on its next ``poll()``.

State: an ``AsyncConsumer`` belongs to one event loop; a ``Consumer`` may be used from one
thread at a time (as Java's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar

from protocol.errors import InvalidGroupIdError, KafkaError
from samsa._cluster import Cluster
from samsa._decoding import Decoders
from samsa._fetcher import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    Fetcher,
    list_offsets,
)
from samsa._keys import KeyCursor, read_key_records, stream_key
from samsa._loop import LoopThread
from samsa._membership import GroupMember
from samsa._positions import SubscriptionState
from samsa._rebalance import CallbackPump, CallbackRunner, Rebalancer, call_inline
from samsa.assignors import PartitionAssignor, assignor_for, rebalance_protocol
from samsa.config import parse_config
from samsa.errors import ClientClosedError, ClientError, NoOffsetForPartitionError
from samsa.types import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionInfo,
    TopicPartition,
)

__all__ = ["AsyncConsumer", "Consumer", "ConsumerRebalanceListener"]

log = logging.getLogger("samsa.consumer")

T = TypeVar("T")
DEFAULT_CLOSE_TIMEOUT_S = 30.0


class ConsumerRebalanceListener:
    """Told which partitions a rebalance takes away or gives (Java's listener). Override
    what you need; the callbacks run on the thread that called ``poll()``."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before partitions are taken away (commit their offsets here)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """After partitions were given (with cooperative rebalancing: only the new ones)."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """Partitions already owned by others (membership lost); by default, revoked."""
        self.on_partitions_revoked(lost)


def _key_bytes(key: bytes | str) -> bytes:
    return key.encode() if isinstance(key, str) else bytes(key)


def _as_offset(value: OffsetAndMetadata | int) -> OffsetAndMetadata:
    return value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))


class AsyncConsumer:
    """The asyncio core of ``Consumer`` (same methods, awaited); create it inside the loop.

    ``callback_runner`` runs rebalance listener callbacks (default: on the loop, awaiting
    coroutine callbacks); the blocking facade passes one that runs them on its caller's
    thread.
    """

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None,
                 callback_runner: CallbackRunner | None = None, **settings: Any) -> None:
        self.config = parse_config("consumer", config, settings)
        self._cluster = Cluster(self.config)
        self._subscriptions = SubscriptionState(self.config["auto.offset.reset"])
        self._ready = asyncio.Event()
        self._fetcher = Fetcher(self._cluster, self._subscriptions, self.config, self._ready)
        self._assignors: list[PartitionAssignor] = [
            assignor_for(name) for name in self.config["partition.assignment.strategy"]]
        self._member: GroupMember | None = None
        self._rebalancer: Rebalancer | None = None
        if self.config["group.id"]:
            self._member = GroupMember(self._cluster, self.config, self._assignors, self._ready)
            self._rebalancer = Rebalancer(
                self._member, self._cluster, self._subscriptions, self._fetcher, self.config,
                rebalance_protocol(self._assignors), callback_runner or call_inline,
                self._commit_quietly)
        self._commit_tasks: set[asyncio.Task[None]] = set()
        self._next_auto_commit = time.monotonic() + self.config["auto.commit.interval.ms"] / 1000
        self._closed = False
        if topics:
            self.subscribe(topics)

    # --- subscription and assignment ---

    def subscribe(self, topics: Sequence[str] | None = None, *, pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group (``group.id``) for ``topics``, or every topic matching ``pattern``."""
        self._check_open()
        if self._member is None or self._rebalancer is None:
            raise InvalidGroupIdError("subscribe() needs a group.id (or use assign())")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern")
        if isinstance(topics, str):
            topics = [topics]
        if self._subscriptions.manual:
            raise ClientError("subscribe() after assign(): call unsubscribe() first")
        self._rebalancer.pattern = re.compile(pattern) if pattern is not None else None
        self._subscriptions.subscribe(topics or (), pattern)
        self._rebalancer.listener = listener
        self._member.state.request_rejoin("the subscription changed")
        self._fetcher.start()
        self._ready.set()

    async def unsubscribe(self) -> None:
        """Give up every partition (listener told) and leave the group."""
        self._check_open()
        if self._rebalancer is not None:
            await self._rebalancer.cancel()
            if self._subscriptions.subscribed:
                await self._rebalancer.give_up_partitions()
                await self._rebalancer.member.leave("the consumer unsubscribed")
            self._rebalancer.pattern = None
        self._subscriptions.unsubscribe()

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Read exactly ``partitions`` (no group membership; commits still need group.id)."""
        self._check_open()
        if self._subscriptions.subscribed:
            raise ClientError("assign() after subscribe(): call unsubscribe() first")
        self._subscriptions.assign_manually(TopicPartition(*tp) for tp in partitions)
        self._fetcher.start()
        self._fetcher.wakeup()
        self._ready.set()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.partitions)

    async def partitions_for(self, topic: str) -> list[PartitionInfo]:
        """The partitions of ``topic`` (an empty list when it does not exist)."""
        self._check_open()
        await self._cluster.refresh_metadata([topic])
        info = self._cluster.topics.get(topic)
        return [] if info is None else [info.partitions[p] for p in sorted(info.partitions)]

    # --- poll ---

    async def poll(self, timeout: float = 1.0, max_records: int | None = None
                   ) -> list[ConsumerRecord]:
        """Up to ``max_records`` (``max.poll.records``) records, waiting up to ``timeout``
        seconds for the first; an empty list when none came."""
        self._check_open()
        subscriptions = self._subscriptions
        if not subscriptions.subscribed and not subscriptions.partitions:
            raise ClientError("poll() needs a subscribe() or an assign() first")
        limit = max_records or self.config["max.poll.records"]
        deadline = time.monotonic() + max(timeout, 0)
        if self._member is not None:
            self._member.last_poll = time.monotonic()
        while True:
            self._ready.clear()
            if (subscriptions.subscribed and self._rebalancer is not None
                    and not await self._rebalancer.ensure_active(deadline)):
                return []
            self._maybe_auto_commit()
            await self._update_positions()
            records = self._fetcher.take_records(limit)
            remaining = deadline - time.monotonic()
            if records or remaining <= 0:
                return records
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), remaining)

    # --- positions ---

    async def _update_positions(self) -> None:
        """Positions for partitions without one: the committed offset, else a reset."""
        missing = self._subscriptions.missing_positions()
        if missing and self._member is not None:
            committed = await self._member.fetch_committed(missing)
            for tp, found in committed.items():
                state = self._subscriptions.partitions.get(tp)
                if found is not None and state is not None and state.position is None:
                    state.seek(found.offset, found.leader_epoch)
            self._fetcher.wakeup()
            missing = self._subscriptions.missing_positions()
        if missing:
            strategy = self.config["auto.offset.reset"]
            if strategy == "none":
                raise NoOffsetForPartitionError(sorted(missing))
            for tp in missing:
                self._subscriptions.partitions[tp].request_reset(strategy)
        if self._subscriptions.awaiting_reset():
            await self._fetcher.reset_positions()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record ``poll()`` returns for ``tp``."""
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, not {offset}")
        self._subscriptions.state(TopicPartition(*tp)).seek(offset)
        self._fetcher.wakeup()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, "latest")

    def _reset(self, partitions: Iterable[TopicPartition], strategy: str) -> None:
        chosen = [TopicPartition(*tp) for tp in partitions] or list(self._subscriptions)
        for tp in chosen:
            self._subscriptions.state(tp).request_reset(strategy)
        self._fetcher.wakeup()

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record ``poll()`` returns for ``tp`` (looked up if needed)."""
        state = self._subscriptions.state(TopicPartition(*tp))
        while state.position is None:
            await self._update_positions()
        return state.position

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subscriptions.state(TopicPartition(*tp)).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subscriptions.state(TopicPartition(*tp)).paused = False
        self._fetcher.wakeup()
        self._ready.set()

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused()

    # --- offsets ---

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     *, asynchronous: bool = False) -> None:
        """Commit ``offsets`` (each the next offset to read), or every position."""
        self._check_open()
        await self._commit(offsets, asynchronous=asynchronous)

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
                      *, asynchronous: bool) -> None:
        member = self._member
        if member is None:
            raise InvalidGroupIdError("commit() needs a group.id")
        if offsets is None:
            chosen = {tp: OffsetAndMetadata(offset, "", epoch)
                      for tp, (offset, epoch) in self._subscriptions.positions().items()}
        else:
            chosen = {TopicPartition(*tp): _as_offset(v) for tp, v in offsets.items()}
        commit = member.commit(chosen, use_generation=self._subscriptions.subscribed)
        if not asynchronous:
            await commit
            return
        task = asyncio.get_running_loop().create_task(self._logged(commit))
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)

    @staticmethod
    async def _logged(commit: Coroutine[Any, Any, None]) -> None:
        try:
            await commit
        except KafkaError as exc:
            log.warning("asynchronous commit failed: %s", exc)

    def _maybe_auto_commit(self) -> None:
        if (self._member is None or not self.config["enable.auto.commit"]
                or time.monotonic() < self._next_auto_commit or self._commit_tasks):
            return
        self._next_auto_commit = time.monotonic() + self.config["auto.commit.interval.ms"] / 1000
        positions = {tp: OffsetAndMetadata(offset, "", epoch)
                     for tp, (offset, epoch) in self._subscriptions.positions().items()}
        if positions:
            commit = self._member.commit(positions, use_generation=self._subscriptions.subscribed)
            task = asyncio.get_running_loop().create_task(self._logged(commit))
            self._commit_tasks.add(task)
            task.add_done_callback(self._commit_tasks.discard)

    async def _commit_quietly(self) -> None:
        try:
            await self._commit(None, asynchronous=False)
        except KafkaError as exc:
            log.warning("auto-commit failed: %s", exc)

    async def committed(self, partitions: Sequence[TopicPartition]
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing is committed)."""
        self._check_open()
        if self._member is None:
            raise InvalidGroupIdError("committed() needs a group.id")
        wanted = [TopicPartition(*tp) for tp in partitions]
        found = await self._member.fetch_committed(wanted)
        return {tp: found.get(tp) for tp in wanted}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is >= the one given (ms)."""
        self._check_open()
        wanted = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        if any(ts < 0 for ts in wanted.values()):
            raise ValueError("timestamps must be >= 0")
        found = await list_offsets(self._cluster, wanted, isolation_level=self._isolation)
        return {tp: found.get(tp) for tp in wanted}

    async def beginning_offsets(self, partitions: Sequence[TopicPartition]
                                ) -> dict[TopicPartition, int]:
        return await self._offsets(partitions, EARLIEST_TIMESTAMP)

    async def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermarks (the last stable offsets with read_committed)."""
        return await self._offsets(partitions, LATEST_TIMESTAMP)

    async def _offsets(self, partitions: Sequence[TopicPartition], timestamp: int
                       ) -> dict[TopicPartition, int]:
        self._check_open()
        wanted = {TopicPartition(*tp): timestamp for tp in partitions}
        found = await list_offsets(self._cluster, wanted, isolation_level=self._isolation)
        return {tp: found[tp].offset for tp in wanted if tp in found}

    # --- per-key reads (Samsa's SamsaReadKey, samsa._keys) ---

    async def read_key(self, topic: str, partition: int, key: bytes | str,
                       start_offset: int = 0) -> list[ConsumerRecord]:
        """Every record with exactly ``key`` (a str is UTF-8 encoded) in the partition, from
        ``start_offset`` up to the high watermark (the last stable offset with read_committed),
        read by the leader from its key indexes. Needs no subscription or assignment and does
        not move any position."""
        self._check_open()
        return await read_key_records(
            self._cluster, TopicPartition(topic, partition), _key_bytes(key), start_offset,
            Decoders(self.config), max_bytes=self.config["max.partition.fetch.bytes"])

    def key_cursor(self, topic: str, partition: int, key: bytes | str,
                   start_offset: int = 0) -> KeyCursor:
        self._check_open()
        return KeyCursor(
            self._cluster, TopicPartition(topic, partition), _key_bytes(key), start_offset,
            Decoders(self.config), max_bytes=self.config["max.partition.fetch.bytes"],
            max_wait_ms=self.config["fetch.max.wait.ms"])

    def subscribe_key(self, topic: str, partition: int, key: bytes | str,
                      start_offset: int = 0, *, idle_timeout: float | None = None
                      ) -> AsyncIterator[ConsumerRecord]:
        """``read_key``'s records, then each new record of the key as it becomes readable
        (long polls of ``fetch.max.wait.ms``); ends when no record came for ``idle_timeout``
        seconds, else never (stop iterating to stop)."""
        return stream_key(self.key_cursor(topic, partition, key, start_offset), idle_timeout)

    @property
    def _isolation(self) -> int:
        return READ_COMMITTED if self.config["isolation.level"] == "read_committed" else 0

    # --- closing ---

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    async def close(self) -> None:
        """Commit (with auto-commit), tell the listener, leave the group, close connections."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._rebalancer is not None:
                await self._rebalancer.cancel()
                if self._subscriptions.subscribed:
                    await self._rebalancer.give_up_partitions()
                    await self._rebalancer.member.leave("the consumer is being closed")
                elif self.config["enable.auto.commit"] and self._subscriptions.partitions:
                    await self._commit_quietly()
                await asyncio.gather(*self._commit_tasks, return_exceptions=True)
        finally:
            if self._member is not None:
                await self._member.close()
            await self._fetcher.close()
            await self._cluster.close()

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class Consumer:
    """A blocking consumer (see the module docstring). Configuration: ``config`` (Kafka's
    dotted names) and/or keyword arguments (underscores for dots); topics given here are
    subscribed to (which needs ``group.id``)."""

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None,
                 **settings: Any) -> None:
        parse_config("consumer", config, settings)  # bad settings fail before any thread starts
        self._pump = CallbackPump()
        self._closed = False
        self._loop = LoopThread("samsa-consumer")
        try:
            self._core: AsyncConsumer = self._loop.run(self._create(topics, config, settings))
        except BaseException:
            self._loop.close()
            raise

    async def _create(self, topics: Sequence[str], config: Mapping[str, Any] | None,
                      settings: Mapping[str, Any]) -> AsyncConsumer:
        return AsyncConsumer(*topics, config=config, callback_runner=self._pump.run, **settings)

    @property
    def config(self) -> dict[str, Any]:
        return self._core.config

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coroutine)

    def _call(self, function: Callable[..., T], *args: Any) -> T:
        async def call() -> T:
            return function(*args)
        return self._loop.run(call())

    def subscribe(self, topics: Sequence[str] | None = None, *, pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        if isinstance(topics, str):
            topics = [topics]
        self._call(lambda: self._core.subscribe(topics, pattern=pattern, listener=listener))

    def unsubscribe(self) -> None:
        self._pump.wait(self._loop.submit(self._core.unsubscribe()))

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self._call(self._core.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._call(self._core.assignment)

    def partitions_for(self, topic: str) -> list[PartitionInfo]:
        return self._run(self._core.partitions_for(topic))

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max_records`` records, waiting up to ``timeout`` seconds for the first."""
        return self._pump.wait(self._loop.submit(self._core.poll(timeout, max_records)))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Every record, as it arrives; never ends (break out of it, then ``close()``)."""
        while True:
            yield from self.poll(1.0)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call(self._core.seek, tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._call(self._core.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._call(self._core.seek_to_end, *partitions)

    def position(self, tp: TopicPartition) -> int:
        return self._run(self._core.position(tp))

    def committed(self, partitions: Sequence[TopicPartition]
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self._core.committed(partitions))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None, *,
               asynchronous: bool = False) -> None:
        self._run(self._core.commit(offsets, asynchronous=asynchronous))

    def pause(self, *partitions: TopicPartition) -> None:
        self._call(self._core.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._call(self._core.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._call(self._core.paused)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._core.offsets_for_times(timestamps))

    def beginning_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._core.beginning_offsets(partitions))

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._core.end_offsets(partitions))

    def read_key(self, topic: str, partition: int, key: bytes | str,
                 start_offset: int = 0) -> list[ConsumerRecord]:
        """See ``AsyncConsumer.read_key``."""
        return self._run(self._core.read_key(topic, partition, key, start_offset))

    def subscribe_key(self, topic: str, partition: int, key: bytes | str,
                      start_offset: int = 0, *, idle_timeout: float | None = None
                      ) -> Iterator[ConsumerRecord]:
        """See ``AsyncConsumer.subscribe_key``: blocks in long polls until a record of the key
        arrives; ends when none came for ``idle_timeout`` seconds, else never (break out)."""
        cursor = self._call(self._core.key_cursor, topic, partition, key, start_offset)
        last = time.monotonic()
        while True:
            records = self._run(cursor.next_page())
            yield from records
            if records:
                last = time.monotonic()
            elif idle_timeout is not None and time.monotonic() - last >= idle_timeout:
                return

    def close(self, timeout: float | None = None) -> None:
        """Commit (with auto-commit), leave the group and close; waits up to ``timeout``
        seconds (default 30, as Java's), then closes the connections regardless."""
        if self._closed:
            return
        self._closed = True
        limit = DEFAULT_CLOSE_TIMEOUT_S if timeout is None else timeout
        try:
            work = self._loop.submit(asyncio.wait_for(self._core.close(), limit))
            self._pump.wait(work)
        except TimeoutError:
            log.warning("the consumer did not close within %s s", timeout)
        finally:
            self._loop.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
