"""The consumer's side of a group rebalance, and where rebalance listener callbacks run.

``Rebalancer`` wraps ``GroupMember.join`` with Java's ConsumerCoordinator steps:

- before joining (onJoinPrepare): if the membership was lost (the generation was reset), the
  owned partitions are *lost*; with the EAGER protocol they are all *revoked* (after an
  auto-commit); with COOPERATIVE only those of topics no longer subscribed are revoked;
- after syncing (onJoinComplete): EAGER assigns the whole assignment; COOPERATIVE revokes
  what the assignment left out, asks for a second rebalance if it revoked anything (so the
  leader can hand those partitions to their new owners), and assigns only what is new.

The join runs as a task that outlives a ``poll()`` which times out; the next ``poll()`` waits
for it again. Listener callbacks go through a ``CallbackRunner``: inline on the loop for the
``AsyncConsumer``, or ``CallbackPump.run``, which hands them to the thread blocked in the
facade's ``poll()`` / ``close()`` / ``unsubscribe()`` and waits until they ran, so a callback
runs on the application's thread and may call ``commit()`` (the loop is free meanwhile).

State: a ``Rebalancer`` belongs to the consumer's event loop; a ``CallbackPump``'s queue is
filled on the loop and drained by the facade's calling thread.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import re
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future as ConcurrentFuture
from typing import TYPE_CHECKING, Any, TypeVar

from protocol.errors import KafkaError
from samsa._cluster import Cluster
from samsa._fetcher import Fetcher
from samsa._membership import GroupMember
from samsa._positions import SubscriptionState
from samsa.assignors import RebalanceProtocol
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa.consumer import ConsumerRebalanceListener

__all__ = ["CallbackPump", "CallbackRunner", "Rebalancer", "call_inline"]

log = logging.getLogger("samsa.consumer")

T = TypeVar("T")
Callback = Callable[[set[TopicPartition]], Any]
CallbackRunner = Callable[[Callback, set[TopicPartition]], Coroutine[Any, Any, None]]


async def call_inline(callback: Callback, partitions: set[TopicPartition]) -> None:
    """Run a callback on the loop, awaiting it if it is a coroutine function."""
    result = callback(partitions)
    if inspect.isawaitable(result):
        await result


class Rebalancer:
    """Joins and rejoins the group for a subscription (see the module docstring)."""

    def __init__(self, member: GroupMember, cluster: Cluster, subscriptions: SubscriptionState,
                 fetcher: Fetcher, config: dict[str, Any], protocol: RebalanceProtocol,
                 run_callback: CallbackRunner,
                 commit_positions: Callable[[], Awaitable[None]]) -> None:
        self.member = member
        self._cluster = cluster
        self._subscriptions = subscriptions
        self._fetcher = fetcher
        self._config = config
        self._protocol = protocol
        self._run_callback = run_callback
        self._commit_positions = commit_positions
        self.listener: ConsumerRebalanceListener | None = None
        self.pattern: re.Pattern[str] | None = None
        self._listener_error: BaseException | None = None
        self._join_task: asyncio.Task[None] | None = None

    async def ensure_active(self, deadline: float) -> bool:
        """Join when needed; False when the join did not finish before ``deadline`` (or failed
        with a retriable error: the next poll tries again)."""
        member = self.member
        while True:
            if member.state.fatal is not None:
                raise member.state.fatal
            await self._check_metadata()
            if self._join_task is None:
                if not member.state.rejoin_needed:
                    return True
                self._join_task = asyncio.get_running_loop().create_task(self._rebalance())
            remaining = max(deadline - time.monotonic(), 0)
            done, _ = await asyncio.wait({self._join_task}, timeout=remaining)
            if not done:
                return False
            task, self._join_task = self._join_task, None
            error = task.exception()
            if isinstance(error, KafkaError) and error.retriable:
                log.warning("joining group %r failed, will retry: %s", member.group_id, error)
                return False
            if error is not None:
                raise error
            if self._listener_error is not None:
                error, self._listener_error = self._listener_error, None
                raise error

    async def _check_metadata(self) -> None:
        """Refresh stale metadata; a new topic matching the pattern, or (as leader) a partition
        count change, calls for a rebalance."""
        if not self._cluster.metadata_is_stale:
            return
        member = self.member
        if self.pattern is not None:
            await self._cluster.refresh_metadata(None)
            topics = self._matching_topics()
            if topics != self._subscriptions.topics:
                self._subscriptions.topics = topics
                member.state.request_rejoin("topics matching the pattern changed")
            return
        snapshot = member.assigned_topics_snapshot
        await self._cluster.refresh_metadata(set(self._subscriptions.topics) | set(snapshot))
        if member.state.is_leader and snapshot:
            counts = {t: len(self._cluster.topics[t].partitions)
                      for t in snapshot if t in self._cluster.topics}
            if counts != snapshot:
                member.state.request_rejoin("the partitions of a subscribed topic changed")

    def _matching_topics(self) -> frozenset[str]:
        assert self.pattern is not None
        exclude_internal = self._config["exclude.internal.topics"]
        return frozenset(name for name, info in self._cluster.topics.items()
                         if self.pattern.fullmatch(name)
                         and not (exclude_internal and info.is_internal))

    async def _rebalance(self) -> None:
        """One join of the group, with onJoinPrepare / onJoinComplete around it."""
        member = self.member
        topics = await self._resolve_topics()
        await self._prepare_join(topics)
        result = await member.join(sorted(topics), sorted(self._subscriptions.partitions))
        assigned = {tp for tp in result.assignment.partitions if tp.topic in topics}
        owned = set(self._subscriptions.partitions)
        added = assigned
        if self._protocol is RebalanceProtocol.COOPERATIVE:
            added = assigned - owned
            revoked = owned - assigned
            if revoked:
                await self._call_listener("on_partitions_revoked", revoked)
                member.state.request_rejoin("partitions were revoked and must be reassigned")
        log.info("group %r generation %d (%s): assigned %s", member.group_id,
                 result.generation_id, result.protocol_name, sorted(assigned))
        self._subscriptions.set_assignment(sorted(assigned))
        self._fetcher.wakeup()
        await self._call_listener("on_partitions_assigned", added)

    async def _resolve_topics(self) -> frozenset[str]:
        if self.pattern is not None:
            await self._cluster.refresh_metadata(None)
            self._subscriptions.topics = self._matching_topics()
        else:
            await self._cluster.refresh_metadata(
                self._subscriptions.topics,
                allow_auto_topic_creation=self._config["allow.auto.create.topics"])
        return self._subscriptions.topics

    async def _prepare_join(self, topics: frozenset[str]) -> None:
        owned = set(self._subscriptions.partitions)
        if not owned:
            return
        if not self.member.state.has_generation:
            await self._call_listener("on_partitions_lost", owned)
            self._subscriptions.set_assignment(())
        elif self._protocol is RebalanceProtocol.EAGER:
            await self.give_up_partitions()
        else:
            gone = {tp for tp in owned if tp.topic not in topics}
            if gone:
                await self._call_listener("on_partitions_revoked", gone)
                self._subscriptions.set_assignment(sorted(owned - gone))

    async def give_up_partitions(self) -> None:
        """Auto-commit, tell the listener, drop the assignment (eager rebalance, unsubscribe,
        close); lost rather than revoked when the membership is gone."""
        owned = set(self._subscriptions.partitions)
        if not owned:
            return
        lost = not self.member.state.has_generation
        if self._config["enable.auto.commit"] and not lost:
            await self._commit_positions()
        await self._call_listener("on_partitions_lost" if lost else "on_partitions_revoked", owned)
        self._subscriptions.set_assignment(())

    async def _call_listener(self, method: str, partitions: set[TopicPartition]) -> None:
        """Run a listener callback; its exception is raised by poll() once the rebalance is
        done, as Java's consumer does."""
        if self.listener is None:
            return
        try:
            await self._run_callback(getattr(self.listener, method), set(partitions))
        except Exception as exc:
            log.error("rebalance listener %s failed: %r", method, exc)
            self._listener_error = self._listener_error or exc

    async def cancel(self) -> None:
        """Stop a join under way (close, unsubscribe)."""
        if self._join_task is not None:
            self._join_task.cancel()
            await asyncio.gather(self._join_task, return_exceptions=True)
            self._join_task = None


class CallbackPump:
    """Runs listener callbacks on the facade's calling thread (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()

    async def run(self, callback: Callback, partitions: set[TopicPartition]) -> None:
        """The ``CallbackRunner``: queue the callback, wait until the caller's thread ran it."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.put((callback, partitions, done, loop))
        await done

    def wait(self, work: ConcurrentFuture[T]) -> T:
        """Run queued callbacks on this thread until ``work`` is done; its result."""
        work.add_done_callback(lambda _: self._queue.put(None))
        try:
            while True:
                item = self._queue.get()
                if item is None:  # some work finished: maybe this one
                    if work.done():
                        return work.result()
                    continue
                self._run(*item)
        finally:
            if not work.done():  # interrupted (Ctrl-C): stop the work on the loop too
                work.cancel()

    @staticmethod
    def _run(callback: Callback, partitions: set[TopicPartition], done: asyncio.Future[None],
             loop: asyncio.AbstractEventLoop) -> None:
        if done.done():  # the rebalance that asked for it was cancelled
            return
        try:
            callback(partitions)
        except BaseException as exc:
            loop.call_soon_threadsafe(_settle, done, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            loop.call_soon_threadsafe(_settle, done, None)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
