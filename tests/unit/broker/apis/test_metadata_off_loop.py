"""An all-topics Metadata answer naming more than ``OFF_LOOP_ABOVE`` partitions is described and
encoded on an executor thread (issue 18): the same bytes as the answer built on the loop, at
every version, while the request goes through a real connection."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import metadata
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.server import Server
from protocol.messages.metadata_request import MetadataRequest
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic
from tests.unit.broker.test_connection import FakeTransport, frame


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                           clock=ManualClock())
    broker.startup()
    create_topic(broker, "a", num_partitions=7)
    create_topic(broker, "b", num_partitions=30)
    create_topic(broker, "c", num_partitions=1)
    yield broker
    broker.shutdown()


def whole_frame(data: bytes) -> bool:
    return len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "big")


def answer(broker: Broker, version: int) -> bytes:
    """The frame a connection writes for an all-topics Metadata request at ``version``."""
    async def scenario() -> bytes:
        connection = KafkaConnection(Server(broker), broker.config.listeners[0])
        transport = FakeTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        topics = [] if version == 0 else None
        connection.data_received(frame(3, version, 41, MetadataRequest(topics=topics)))
        written = await transport.written_once(whole_frame)
        connection.connection_lost(None)
        return written

    return asyncio.run(scenario())


@pytest.mark.parametrize("version", [0, 1, 4, 7, 9, 10, 12])
def test_the_answer_built_off_the_loop_is_the_one_built_on_it(
        broker: Broker, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    on_loop = answer(broker, version)
    threads: list[str] = []
    build = metadata._describe_partitions

    def recorded(*args: object) -> object:  # a spy: the real function does the work
        threads.append(threading.current_thread().name)
        return build(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(metadata, "OFF_LOOP_ABOVE", 37)  # 38 partitions in all: above it
    monkeypatch.setattr(metadata, "_describe_partitions", recorded)
    off_loop = answer(broker, version)
    assert off_loop == on_loop and b"b" in on_loop
    assert len(threads) == 3 and threading.main_thread().name not in threads


def test_at_the_threshold_the_answer_is_built_on_the_loop(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    build = metadata._describe_partitions

    def recorded(*args: object) -> object:
        threads.append(threading.current_thread().name)
        return build(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(metadata, "OFF_LOOP_ABOVE", 38)
    monkeypatch.setattr(metadata, "_describe_partitions", recorded)
    answer(broker, 12)
    assert threads == [threading.main_thread().name] * 3
