"""Answering a request once the controller has committed what it proposed.

A handler proposes its metadata writes synchronously (so requests of one connection take effect
in the order they arrived) and then answers with ``when_committed``: the response at once when
every proposal is already resolved (the local controller commits while proposing), else an
awaitable the connection waits on (a quorum's commit). With ``settled`` (CreateTopics,
CreatePartitions, DeleteTopics) it then also waits for the disk work the commit started on this
node (``ReplicaManager.settled``: logs created or deleted on the storage worker), so a client
that is answered can use what it created at once. ``refusal`` turns a resolved proposal into
the Kafka error to report for its item: its own error, or UNKNOWN_SERVER_ERROR (logged with the
traceback) for anything unexpected.

``create_internal_topic``: the coordinators' ``__consumer_offsets`` / ``__transaction_state``,
created through the controller on first use (Kafka's ``AutoTopicCreationManager``). Until the
creation is committed the coordinator is not available (COORDINATOR_NOT_AVAILABLE, retriable).
The replication factor is the caller's: 1 on a single node, ``offsets.topic.replication.factor``
/ ``transaction.state.log.replication.factor`` in a cluster, not capped: as in Kafka, the
controller refuses a factor above the number of registered brokers (INVALID_REPLICATION_FACTOR)
and the creation is tried again at the next FindCoordinator.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Container, Sequence
from typing import Any, TypeVar

from protocol.errors import (
    CoordinatorNotAvailableError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownServerError,
)
from replication.controller.interface import Controller, NewTopic
from replication.controller.proposal import Proposal

__all__ = ["create_internal_topic", "internal_partition_pending", "refusal", "when_committed"]

logger = logging.getLogger("samsa.broker.commits")

R = TypeVar("R")


def when_committed(
    proposals: Sequence[Proposal[Any]],
    respond: Callable[[], R],
    *,
    settled: Callable[[], Awaitable[None] | None] | None = None,
) -> R | Awaitable[R]:
    if all(proposal.done() for proposal in proposals):
        disk_work = None if settled is None else settled()
        if disk_work is None:
            return respond()
        return _respond_later((), respond, disk_work)
    return _respond_later(proposals, respond, settled)


async def _respond_later(
    proposals: Sequence[Proposal[Any]],
    respond: Callable[[], R],
    settled: Callable[[], Awaitable[None] | None] | Awaitable[None] | None,
) -> R:
    for proposal in proposals:
        with contextlib.suppress(Exception):  # ``respond`` reports each proposal's error
            await proposal
    disk_work = settled() if callable(settled) else settled
    if disk_work is not None:
        await disk_work
    return respond()


def refusal(proposal: Proposal[Any], what: str) -> KafkaError | None:
    """The error of a resolved proposal (None: committed); ``what`` names it in the log."""
    error = proposal.exception()
    if error is None or isinstance(error, KafkaError):
        return error
    logger.error("%s failed", what, exc_info=error)
    return UnknownServerError()


def create_internal_topic(
    controller: Controller, name: str, *, num_partitions: int, segment_bytes: int,
    replication_factor: int = 1, min_insync_replicas: int | None = None,
) -> None:
    """Create the compacted internal topic ``name`` unless it exists; raises a refusal.
    ``min_insync_replicas``: the topic's ``min.insync.replicas`` (``__transaction_state``:
    ``transaction.state.log.min.isr`` in a cluster, as Kafka creates it)."""
    if name in controller.image.topics_by_name:
        return
    configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
    if min_insync_replicas is not None:
        configs["min.insync.replicas"] = str(min_insync_replicas)
    proposal = controller.create_topics([NewTopic(
        name, num_partitions=num_partitions, replication_factor=replication_factor,
        configs=configs)])[0]
    if not proposal.done():
        raise CoordinatorNotAvailableError(f"the creation of {name} is not committed yet")
    error = proposal.exception()
    if error is not None and not isinstance(error, TopicAlreadyExistsError):
        raise error


def internal_partition_pending(ensure_topic: Callable[[], None],
                               creating: Container[tuple[str, int]], topic: str, index: int) -> bool:
    """Whether ``<topic>-<index>`` of an internal topic cannot take writes here yet: the topic is
    being created (``ensure_topic`` asks for it when missing) or the partition's log is."""
    try:
        ensure_topic()
    except KafkaError:
        return True
    return (topic, index) in creating
