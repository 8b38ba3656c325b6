"""What every admin operation shares: routing, per-item results in rounds, error messages.

An admin call names items (topics, groups, partitions, config resources). Each round sends
the pending items to where they belong (the controller, a partition's leader, a group's
coordinator, a given broker, or any broker), in one request per destination, all
destinations at once. An item's answer is a result, an error to retry (the codes the
operation names: NOT_CONTROLLER, NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER, ..., or a lost
connection), or a final error. Rounds repeat with ``Cluster.retrying``'s backoff until no
item is left to retry or ``default.api.timeout.ms`` is spent. Then the call raises the
first final error, as its Kafka class, with a message naming every failed item.

Before the first round an operation calls ``_bootstrap()``: when no broker answers at all it
fails at once with ``NoBrokersAvailableError`` naming the addresses tried, instead of
retrying for a minute.

State: one ``AdminCore`` belongs to one event loop (its ``Cluster``'s).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from protocol.codec import Message
from protocol.errors import ErrorCode, KafkaError, error_for_code
from samsa._cluster import COORDINATOR_ERRORS, METADATA_ERRORS, Cluster
from samsa._connection import BrokerConnection
from samsa.config import parse_config
from samsa.errors import ClientError
from samsa.types import TopicPartition

__all__ = ["ANY_BROKER", "AdminCore", "Failure", "failure", "raise_failures"]

K = TypeVar("K", bound=Hashable)

ANY_BROKER = -1  # a destination: the least loaded broker
_MISSING = object()

# Per-item messages nicer than the broker's for the errors people meet most.
_TEMPLATES: dict[int, str] = {
    ErrorCode.TOPIC_ALREADY_EXISTS: "{item} already exists",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "unknown {item}",
    ErrorCode.GROUP_ID_NOT_FOUND: "{item} does not exist",
    ErrorCode.NON_EMPTY_GROUP: "{item} is not empty (it has active members)",
}

NOT_CONTROLLER = frozenset({ErrorCode.NOT_CONTROLLER})
COORDINATOR_RETRIES = frozenset({
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR})
LEADER_RETRIES = frozenset({
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION})


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed item: its label ("topic 'x'"), and the error as the broker gave it."""

    label: str
    error: KafkaError

    @property
    def text(self) -> str:
        template = _TEMPLATES.get(self.error.code)
        if template is not None:
            return template.format(item=self.label)
        detail = self.error.message or self.error.default_message or self.error.name
        return f"{self.label}: {detail}"


def failure(label: str, code: int, message: str | None = None) -> Failure:
    """The failure of ``label`` with Kafka error ``code`` (and the broker's message)."""
    return Failure(label, error_for_code(code)(message or None))


def raise_failures(failures: Iterable[Failure]) -> None:
    """Raise the first failure's error class, its message naming every failed item."""
    listed = list(failures)
    if not listed:
        return
    first = listed[0].error
    error = type(first)("; ".join(dict.fromkeys(f.text for f in listed)))
    raise error from first


def topic_label(name: str) -> str:
    return f"topic {name!r}"


def partition_label(tp: TopicPartition) -> str:
    return f"partition {tp.topic}-{tp.partition}"


class AdminCore:
    """The asyncio admin client's shared machinery (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = parse_config("admin", config, settings)
        self.cluster = Cluster(self.config)
        self._refresh_needed = False

    # --- destinations ----------------------------------------------------------------------

    async def _bootstrap(self) -> None:
        """Fail fast (``NoBrokersAvailableError``) when no broker answers at all."""
        await self.cluster.any_connection()

    async def _connection(self, node_id: int) -> BrokerConnection:
        if node_id == ANY_BROKER:
            return await self.cluster.any_connection()
        return await self.cluster.connection(node_id)

    async def _request(self, node_id: int, build: Callable[[int], Message],
                       message_type: type[Message]) -> Any:
        """Send ``build(version)`` to ``node_id`` at the highest version both sides know."""
        connection = await self._connection(node_id)
        version = connection.version_for(message_type)
        return await connection.request(build(version), version)

    async def _fresh_metadata(self, topics: Iterable[str] | None = ()) -> None:
        """Refresh metadata (brokers, controller, ``topics``) if a retry asked for it."""
        if self._refresh_needed or self.cluster.metadata_is_stale or self.cluster.controller_id < 0:
            self._refresh_needed = False
            await self.cluster.refresh_metadata(topics)

    async def _controller(self) -> int:
        """Where topic changes go, as Kafka's admin client sends them: the controller the
        metadata names (a broker forwards in KRaft), else any broker."""
        await self._fresh_metadata()
        node_id = self.cluster.controller_id
        return node_id if node_id in self.cluster.brokers else ANY_BROKER

    async def _leader(self, tp: TopicPartition) -> int:
        info = self.cluster.topics.get(tp.topic)
        partition = None if info is None else info.partitions.get(tp.partition)
        if partition is None or partition.leader < 0:
            raise error_for_code(ErrorCode.LEADER_NOT_AVAILABLE)(
                f"{tp.topic}-{tp.partition} has no leader")
        return partition.leader

    async def _known_partitions(self, partitions: Iterable[TopicPartition]
                                ) -> tuple[list[TopicPartition], list[Failure]]:
        """Split ``partitions`` into those the metadata knows and failures for the others
        (unknown topic or partition: not retried, as Kafka's admin client does)."""
        wanted = list(dict.fromkeys(partitions))
        topics = {tp.topic for tp in wanted}
        await self.cluster.retrying(lambda: self.cluster.refresh_metadata(topics),
                                    what="Metadata")
        known, failures = [], []
        for tp in wanted:
            info = self.cluster.topics.get(tp.topic)
            if info is None:
                failures.append(failure(topic_label(tp.topic), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif tp.partition not in info.partitions:
                failures.append(failure(partition_label(tp), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                known.append(tp)
        return known, failures

    # --- rounds ------------------------------------------------------------------------------

    async def _routed(
        self,
        items: Iterable[K],
        route: Callable[[K], Awaitable[int]],
        send: Callable[[int, list[K]], Awaitable[Mapping[K, Any]]],
        *,
        label: Callable[[K], str],
        retry_codes: frozenset[int],
        what: str,
        before_round: Callable[[list[K]], Awaitable[None]] | None = None,
    ) -> tuple[dict[K, Any], list[Failure]]:
        """Run ``items`` in rounds (see the module docstring): ``route(item)`` names the
        destination, ``send(node_id, items)`` returns each item's result or ``KafkaError``."""
        pending = list(dict.fromkeys(items))
        results: dict[K, Any] = {}
        final: dict[K, KafkaError] = {}

        async def one_round() -> None:
            nonlocal pending
            if before_round is not None:
                await before_round(pending)
            outcome = await self._send_routed(pending, route, send)
            retry: list[K] = []
            retry_errors: list[KafkaError] = []
            for item in pending:
                value = outcome.get(item, _MISSING)
                if value is _MISSING:
                    value = error_for_code(ErrorCode.UNKNOWN_SERVER_ERROR)(
                        f"the broker did not answer for {label(item)}")
                if not isinstance(value, KafkaError):
                    results[item] = value
                elif value.code in retry_codes or (isinstance(value, ClientError)
                                                   and value.retriable):
                    retry.append(item)
                    retry_errors.append(value)
                else:
                    final[item] = value
            pending = retry
            if retry_errors:
                raise self._before_retry(retry_errors)

        await self.cluster.retrying(one_round, what=what)
        order = list(dict.fromkeys(items))
        failures = [Failure(label(item), final[item]) for item in order if item in final]
        return results, failures

    async def _send_routed(self, pending: Sequence[K], route: Callable[[K], Awaitable[int]],
                           send: Callable[[int, list[K]], Awaitable[Mapping[K, Any]]]
                           ) -> dict[K, Any]:
        outcome: dict[K, Any] = {}
        by_node: dict[int, list[K]] = defaultdict(list)
        for item in pending:
            try:
                by_node[await route(item)].append(item)
            except KafkaError as error:
                outcome[item] = error
        batches = list(by_node.items())
        replies = await asyncio.gather(*(send(node, batch) for node, batch in batches),
                                       return_exceptions=True)
        for (_, batch), reply in zip(batches, replies, strict=True):
            if isinstance(reply, KafkaError):
                outcome.update(dict.fromkeys(batch, reply))
            elif isinstance(reply, BaseException):
                raise reply
            else:
                outcome.update(reply)
        return outcome

    def _before_retry(self, errors: list[KafkaError]) -> KafkaError:
        """Ask for fresh metadata if routing may be wrong; the error ``retrying`` sees (a
        coordinator error first, so that it forgets the cached coordinators)."""
        codes = {error.code for error in errors}
        if codes & (METADATA_ERRORS | NOT_CONTROLLER) or any(
                isinstance(error, ClientError) for error in errors):
            self._refresh_needed = True
        for error in errors:
            if error.code in COORDINATOR_ERRORS:
                return error
        return errors[0]

    async def close(self) -> None:
        await self.cluster.close()


def item_result(code: int, message: str | None = None, value: Any = True) -> Any:
    """``value`` for error code 0, else the error (for ``send`` functions)."""
    if code:
        return error_for_code(code)(message or None)
    return value
