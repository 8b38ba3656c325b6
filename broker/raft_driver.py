"""``RaftDriver``: the asyncio shell around the sans-IO Raft node (``replication.raft.node``).

The node decides; the driver only moves messages and time (Kafka's ``KafkaRaftClientDriver``
and ``RaftManager``): it polls the node when its next timer is due or when something arrived,
sends the node's outbound requests through ``send`` (a node-to-node client, one task per
request; a failure or timeout comes back to the node as a response of None), and hands the
node's responses to the requests that were waiting for them. A request received on the
controller listener becomes a ``RaftRequest`` whose answer the handler awaits (the node may hold
a Fetch up to its max wait).

Invariants: the node is stepped only on the event loop, one event at a time, always followed
by ``_flush_sends`` so nothing it produced waits for the next timer; time is the broker's
``Clock`` (wall-clock milliseconds, as Kafka's ``Time.milliseconds``).

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence

from protocol.codec import Message
from protocol.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.messages.fetch_request import FetchRequest
from protocol.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.messages.vote_request import VoteRequest
from replication.raft.node import RaftNode, RaftRequest, RaftResponse, Send
from storage.clock import Clock

__all__ = ["RaftDriver", "request_source"]

logger = logging.getLogger("samsa.broker.raft")

SendRequest = Callable[[int, Message], Awaitable[Message | None]]


def request_source(message: Message) -> int:
    """The node a Raft request comes from, as its fields name it (-1: unknown)."""
    if isinstance(message, VoteRequest):
        votes = [p.candidate_id for topic in message.topics for p in topic.partitions]
        return votes[0] if votes else -1
    if isinstance(message, BeginQuorumEpochRequest):
        leaders = [p.leader_id for topic in message.topics for p in topic.partitions]
        return leaders[0] if leaders else -1
    if isinstance(message, EndQuorumEpochRequest):
        leaders = [p.leader_id for topic in message.topics for p in topic.partitions]
        return leaders[0] if leaders else -1
    if isinstance(message, FetchRequest):
        return message.replica_state.replica_id if message.replica_state.replica_id >= 0 \
            else message.replica_id
    if isinstance(message, FetchSnapshotRequest):
        return message.replica_id
    return -1


class RaftDriver:
    def __init__(self, node: RaftNode, *, send: SendRequest, clock: Clock) -> None:
        self.node = node
        self._send = send
        self._clock = clock
        self._request_ids = itertools.count()
        self._waiting: dict[int, asyncio.Future[Message]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._sending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="raft-driver")
        self._task.add_done_callback(_report_death)

    async def stop(self) -> None:
        """Graceful: the node resigns if it leads (EndQuorumEpoch sent), then the loop ends."""
        self.node.shutdown(self._clock.milliseconds())
        self._flush_sends()
        if self._sending:
            await asyncio.wait(set(self._sending), timeout=1.0)
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            await self._task
        for task in list(self._sending):
            task.cancel()
        for future in self._waiting.values():
            future.cancel()

    # -- the node's inputs --------------------------------------------------------------------

    def handle_request(self, message: Message) -> asyncio.Future[Message]:
        """A Raft request from a peer; the future is its response."""
        request_id = next(self._request_ids)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self.node.handle_request(self._clock.milliseconds(),
                                 RaftRequest(request_source(message), request_id, message))
        self._flush_sends()
        return future

    @property
    def end_offset(self) -> int:
        return self.node.log.end_offset

    def propose_records(self, records: Sequence[bytes]) -> int:
        """Append one batch as leader (raises ``NotLeaderError`` elsewhere); its last offset."""
        last_offset = self.node.propose(self._clock.milliseconds(), records)
        self._flush_sends()
        return last_offset

    # -- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        # A timer sets the same event as an arrival (no asyncio.wait_for: on Python 3.11 it can
        # swallow a cancellation that lands as its inner wait completes).
        loop = asyncio.get_running_loop()
        while not self._stopped:
            now = self._clock.milliseconds()
            self.node.poll(now)
            self._flush_sends()
            delay_ms = max(0, self.node.next_wakeup_ms(self._clock.milliseconds())
                           - self._clock.milliseconds())
            self._wake.clear()
            timer = loop.call_later(delay_ms / 1000, self._wake.set)
            await self._wake.wait()
            timer.cancel()

    def _flush_sends(self) -> None:
        for send in self.node.take_sends():
            if send.is_response:
                future = self._waiting.pop(send.request_id, None)
                if future is not None and not future.done():
                    future.set_result(send.message)
            else:
                task = asyncio.get_running_loop().create_task(self._deliver(send))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
        self._wake.set()  # the node's timers may have moved

    async def _deliver(self, send: Send) -> None:
        try:
            response = await self._send(send.destination, send.message)
        except Exception:
            logger.debug("raft request to %d failed", send.destination, exc_info=True)
            response = None
        self.node.handle_response(self._clock.milliseconds(),
                                  RaftResponse(send.destination, send.request_id, response))
        self._flush_sends()


def _report_death(task: asyncio.Task[None]) -> None:
    """The driver's loop ended by an exception: this node's Raft node no longer polls (no
    election, no fetch, no timer) while the process serves on: say so loudly, at once."""
    if not task.cancelled() and task.exception() is not None:
        logger.critical("the Raft driver stopped on an error: this node no longer takes part "
                        "in the metadata quorum", exc_info=task.exception())
