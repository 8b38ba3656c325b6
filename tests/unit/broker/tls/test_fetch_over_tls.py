"""A fetch answered on a TLS transport: the segment bytes go through ``transport.write`` (the
TLS layer encrypts them), never ``sendfile`` on the socket underneath. A fake transport that
says it is TLS (an ``ssl_object``) and has no socket: ``sendfile`` would fail on it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker.apis import produce
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.server import Server
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic
from tests.unit.broker.test_connection import FakeTransport, correlation_ids, frame
from tests.unit.broker.test_transaction_apis import context

PAYLOAD = b"secret-payload-" * 1000


class FakeTlsTransport(FakeTransport):
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return object()  # only its presence matters on a listener with no TLS settings
        return super().get_extra_info(name, default)


def test_fetch_slices_are_read_and_written_through_the_tls_transport(tmp_path: Path) -> None:
    async def scenario() -> bytes:
        broker = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                               clock=ManualClock())
        broker.startup()
        create_topic(broker, "t")
        records = encode_batch([Record(offset=0, timestamp=0, key=None, value=PAYLOAD)])
        produce.handle(context(broker, 0, 9), ProduceRequest(
            acks=1, timeout_ms=1000, transactional_id=None, topic_data=[TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=0, records=records)])]))
        connection = KafkaConnection(Server(broker))
        transport = FakeTlsTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        request = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[FetchTopic(
            topic="t", partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)])])
        connection.data_received(frame(1, 12, 7, request))
        written = await transport.written_once(lambda data: correlation_ids(data) == [7])
        connection.connection_lost(None)
        broker.shutdown()
        return written

    written = asyncio.run(scenario())
    assert PAYLOAD in written
