"""The producer's view of its topics: partitions, the ones with a leader, and leaders.

``ProducerMetadata`` keeps, for each topic the producer uses, its partitions and those with a
leader (read by producing threads to pick a partition) and each partition's leader (read by
the sender). It refreshes them with Metadata requests that allow auto-creation, as the Java
producer does: for a new topic, when a batch's leader is unknown, after NOT_LEADER-like
errors or a lost connection, and every ``metadata.max.age.ms``; at most one request at a
time, ``retry.backoff.ms`` apart. A leader named in a NOT_LEADER_OR_FOLLOWER answer (KIP-951)
is taken at once (``apply_leader_hints``), with no Metadata request. ``wait_for(topic)`` is how ``send()`` waits (up to
``max.block.ms``) for a topic it has not seen.

State: lives on the producer's event loop; ``topics`` is replaced entry by entry (atomic
under the GIL), so producing threads read it without a lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol.errors import error_for_code
from protocol.messages.metadata_response import MetadataResponse
from samsa._cluster import Cluster
from samsa.errors import KafkaTimeoutError
from samsa.types import BrokerInfo, TopicPartition

__all__ = ["ProducerMetadata", "TopicPartitions"]

log = logging.getLogger("samsa.producer")

_UNKNOWN_TOPIC_OR_PARTITION = 3
_LEADER_NOT_AVAILABLE = 5


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """A topic's partitions as a producer sees them."""

    partitions: tuple[TopicPartition, ...]  # all of them, index = partition number
    available: tuple[int, ...]  # those with a leader


class ProducerMetadata:
    """Partitions and leaders of the producer's topics (see the module docstring)."""

    def __init__(self, cluster: Cluster, config: dict[str, Any]) -> None:
        self._cluster = cluster
        self._backoff_ms = config["retry.backoff.ms"]
        self._max_age_ms = config["metadata.max.age.ms"]
        self.topics: dict[str, TopicPartitions] = {}
        self.leaders: dict[TopicPartition, int] = {}
        self.errors: dict[str, tuple[int, str]] = {}  # topic -> (error code, why), when known
        self.last_error: Exception | None = None
        self._wanted: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._update_requested = False
        self._last_refresh_ms = -float("inf")
        self._started = 0  # refreshes started / completed: a waiter needs one started after it
        self._completed = 0
        self._changed = asyncio.Event()
        self.on_change: Callable[[], None] = lambda: None

    def request_update(self) -> None:
        self._update_requested = True

    def maybe_refresh(self, now: float) -> float | None:
        """Start a refresh if one is due; ms until the next one may start (None: none due)."""
        if now - self._last_refresh_ms >= self._max_age_ms and self._wanted:
            self._update_requested = True
        if not self._update_requested:
            return None
        if self._task is not None:
            return None
        wait = self._last_refresh_ms + self._backoff_ms - now
        if wait > 0:
            return wait
        self._update_requested = False
        self._last_refresh_ms = now
        self._started += 1
        self._task = asyncio.ensure_future(self._refresh())
        return None

    async def _refresh(self) -> None:
        try:
            response = await self._cluster.refresh_metadata(
                sorted(self._wanted), allow_auto_topic_creation=True)
        except Exception as exc:  # unreachable brokers: keep trying, say why when asked
            self.last_error = exc
            self._update_requested = True
            log.debug("metadata refresh failed: %s", exc)
        else:
            self.last_error = None
            self._apply(response)
        finally:
            self._task = None
            self._completed += 1
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
            self.on_change()

    def _apply(self, response: MetadataResponse) -> None:
        for topic in response.topics:
            name = topic.name
            if name is None or name not in self._wanted:
                continue
            info = self._cluster.topics.get(name)
            if info is None or not info.partitions:
                self.errors[name] = (topic.error_code, _topic_error_text(name, topic.error_code))
                self._update_requested = True
                continue
            self.errors.pop(name, None)
            count = max(info.partitions) + 1
            partitions = tuple(TopicPartition(name, number) for number in range(count))
            available = tuple(sorted(number for number, partition in info.partitions.items()
                                     if partition.leader >= 0))
            if len(available) < len(info.partitions):
                self._update_requested = True
            for tp in partitions:
                partition = info.partitions.get(tp.partition)
                self.leaders[tp] = -1 if partition is None else partition.leader
            self.topics[name] = TopicPartitions(partitions, available)

    def apply_leader_hints(self, hints: Mapping[TopicPartition, tuple[int, int]],
                           endpoints: Mapping[int, BrokerInfo]) -> set[TopicPartition]:
        """KIP-951: each partition's (leader id, leader epoch) from a produce response, with
        the leaders' endpoints; the partitions whose leader was taken (a newer epoch, a known
        endpoint: ``Cluster.update_leader``). The others need a metadata refresh."""
        moved = set()
        for tp, (leader_id, leader_epoch) in hints.items():
            if self._cluster.update_leader(tp, leader_id, leader_epoch, endpoints):
                self.leaders[tp] = leader_id
                moved.add(tp)
        return moved

    async def wait_for(self, topic: str, timeout_ms: float, *, wait: bool = True
                       ) -> TopicPartitions:
        """``topic``'s partitions, refreshing metadata (and auto-creating it, if the broker
        does) until they are known. ``wait=False``: a definite answer ends the wait at once,
        raised: the broker will not create the topic (``UnknownTopicOrPartitionError``), or
        another non-retriable error for it, or no broker could be reached; a topic still
        being created (LEADER_NOT_AVAILABLE) is waited for. KafkaTimeoutError after
        ``timeout_ms``, saying what was last heard."""
        known = self.topics.get(topic)
        if known is not None:
            return known
        self._wanted.add(topic)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            needed = self._started + 1  # the first refresh to start from now on
            while self._completed < needed:
                changed = self._changed
                self._update_requested = True
                self.on_change()
                try:
                    async with asyncio.timeout(max(deadline - loop.time(), 0)):
                        await changed.wait()
                except TimeoutError:
                    raise KafkaTimeoutError(self._missing_text(topic, timeout_ms)) from None
            known = self.topics.get(topic)
            if known is not None:
                return known
            if not wait:
                if self.last_error is not None:
                    raise self.last_error
                code, text = self.errors.get(topic, (_UNKNOWN_TOPIC_OR_PARTITION, ""))
                error = error_for_code(code) if code else None
                if error is not None and (code == _UNKNOWN_TOPIC_OR_PARTITION
                                          or not error.retriable):
                    raise error(text or f"unknown topic {topic!r}")

    def _missing_text(self, topic: str, timeout_ms: float) -> str:
        text = f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms"
        if self.last_error is not None:
            return f"{text}: {self.last_error}"
        if topic in self.errors:
            return f"{text}: {self.errors[topic][1]}"
        return text

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _topic_error_text(topic: str, code: int) -> str:
    if code == _UNKNOWN_TOPIC_OR_PARTITION:
        return (f"unknown topic {topic!r} (the broker did not create it: "
                "auto.create.topics.enable is false?)")
    if code in (0, _LEADER_NOT_AVAILABLE):
        return f"topic {topic!r} has no partitions with a leader yet"
    error = error_for_code(code)
    return f"topic {topic!r}: {error.name}"
