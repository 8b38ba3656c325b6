"""The connection core without sockets: ordering of responses, the request gate, and a whole
connection driven through a fake transport against a broker on a temp directory."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from pathlib import Path

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.connection import MAX_PARKED, KafkaConnection, RequestGate, ResponseQueue
from broker.server import Server
from protocol.frames import encode_request
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic


def test_responses_leave_in_request_order_whatever_order_they_finish_in() -> None:
    queue = ResponseQueue()
    first, second, third = queue.reserve(), queue.reserve(), queue.reserve()
    queue.fill(third, [b"3"])
    queue.fill(second, [b"2"])
    assert queue.pop_ready() is None  # the first is still pending
    queue.fill(first, [b"1"])
    assert [queue.pop_ready().parts for _ in range(3)] == [[b"1"], [b"2"], [b"3"]]  # type: ignore[union-attr]
    assert queue.pop_ready() is None


def test_gate_admits_up_to_capacity_and_wakes_waiters() -> None:
    gate = RequestGate(2)
    assert gate.try_acquire() and gate.try_acquire() and not gate.try_acquire()
    woken: list[int] = []
    gate.wait(lambda: woken.append(1))
    callbacks = gate.release()
    assert len(callbacks) == 1 and gate.in_use == 1
    callbacks[0]()
    assert woken == [1]


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.wrote = asyncio.Event()
        self.reading = True
        self.closed = False

    async def written_once(self, condition: Callable[[bytes], bool], timeout_s: float = 10.0) -> bytes:
        """What has been written once it satisfies ``condition``, checked after each write."""
        async with asyncio.timeout(timeout_s):
            while not condition(bytes(self.written)):
                self.wrote.clear()
                await self.wrote.wait()
        return bytes(self.written)

    def get_extra_info(self, name: str, default=None):  # type: ignore[no-untyped-def]
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int = 0, low: int = 0) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.written += data
        self.wrote.set()

    def get_write_buffer_size(self) -> int:
        return 0

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    abort = close


def correlation_ids(data: bytes) -> list[int]:
    """The correlation ids of the whole response frames in ``data``."""
    ids, position = [], 0
    while position + 8 <= len(data):
        size, correlation_id = struct.unpack_from(">ii", data, position)
        if position + 4 + size > len(data):
            break
        ids.append(correlation_id)
        position += 4 + size
    return ids


def frame(api_key: int, version: int, correlation_id: int, request) -> bytes:  # type: ignore[no-untyped-def]
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id="test")
    return encode_request(header, request)


LONG_POLL = FetchRequest(max_wait_ms=50, min_bytes=10**6, topics=[FetchTopic(
    topic="t", partitions=[FetchPartition(partition=0, partition_max_bytes=100)])])


def connected(tmp_path: Path, *, queued_max_requests: int
              ) -> tuple[Broker, ManualClock, KafkaConnection, FakeTransport]:
    """A started broker with topic ``t`` and one connection to it over a fake transport."""
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path),
                                           "queued.max.requests": str(queued_max_requests)})
    clock = ManualClock()
    broker = Broker.create(config, clock=clock)
    broker.startup()
    create_topic(broker, "t")
    connection = KafkaConnection(Server(broker))
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return broker, clock, connection, transport


def test_pipelined_long_poll_and_metadata_are_answered_in_order(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[int], list[int]]:
        broker, clock, connection, transport = connected(tmp_path, queued_max_requests=2)
        metadata = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
        stream = (frame(1, 11, 1, LONG_POLL) + frame(3, 12, 2, metadata)
                  + frame(3, 12, 3, metadata) + frame(3, 12, 4, metadata))
        for index in range(len(stream)):  # one byte at a time
            connection.data_received(stream[index : index + 1])
        early = correlation_ids(bytes(transport.written))
        # The parked long poll holds no place; the two metadata answers queued behind it hold
        # both (queued.max.requests=2): the fourth request waits for one.
        assert not transport.reading
        assert connection.parked == 1 and server_gate(connection).in_use == 2
        # The long poll ends after its 50 ms max wait on the broker's clock (the fetch
        # purgatory's); then all four answers, in order.
        clock.advance(50)
        late = correlation_ids(await transport.written_once(lambda data: len(correlation_ids(data)) >= 4))
        connection.connection_lost(None)
        broker.shutdown()
        return early, late

    early, late = asyncio.run(scenario())
    assert early == []  # the metadata answers wait behind the long poll
    assert late == [1, 2, 3, 4]


def server_gate(connection: KafkaConnection):  # type: ignore[no-untyped-def]
    return connection.gate


def test_waiting_requests_hold_no_place_but_a_connection_parks_at_most_a_few(tmp_path: Path) -> None:
    """Long polls leave the queue (``queued.max.requests`` 1 does not stop them: a waiting
    request must never starve the requests that would let it finish), but one connection
    reads no more once MAX_PARKED of its requests wait; it reads again when one is answered."""
    async def scenario() -> tuple[list[int], bool, list[int]]:
        broker, clock, connection, transport = connected(tmp_path, queued_max_requests=1)
        count = MAX_PARKED + 2
        connection.data_received(b"".join(frame(1, 11, i, LONG_POLL) for i in range(1, count + 1)))
        parked = [connection.parked]
        reading = transport.reading
        clock.advance(50)
        await transport.written_once(lambda data: len(correlation_ids(data)) >= MAX_PARKED)
        for _ in range(1000):  # the connection reads on (scheduled), the last two park
            if connection.parked == 2:
                break
            await asyncio.sleep(0)
        parked.append(connection.parked)
        clock.advance(50)
        answered = correlation_ids(await transport.written_once(
            lambda data: len(correlation_ids(data)) >= count))
        connection.connection_lost(None)
        broker.shutdown()
        return parked, reading, answered

    parked, reading, answered = asyncio.run(scenario())
    assert parked == [MAX_PARKED, 2] and not reading
    assert answered == list(range(1, MAX_PARKED + 3))
