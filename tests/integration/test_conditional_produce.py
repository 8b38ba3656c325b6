"""Conditional appends (SamsaConditionalProduce) through Samsa's Producer against a real broker
process: each condition, OffsetConflictError with the actual offset, nothing written on a
conflict, conditional records never merged with others, and concurrent writers doing
read-modify-append with retries; what the log holds is read back with confluent-kafka."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.admin import AdminClient as SamsaAdmin
from samsa.errors import OffsetConflictError
from samsa.producer import AsyncProducer, Producer
from samsa.types import TopicPartition
from tests.integration.test_samsa_producer import consume_everything

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def stored(bootstrap: str, topic: str, partitions: int = 1) -> list[tuple[int, int, bytes | None]]:
    return sorted((m.partition(), m.offset(), m.value())
                  for m in consume_everything(bootstrap, topic, partitions))


def test_expected_offsets_append_and_a_stale_one_fails_with_the_actual(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "orders")
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        assert producer.send("orders", b"created", partition=0, expected_offset=0).result(30).offset == 0
        assert producer.send("orders", b"paid", partition=0, expected_offset=1).result(30).offset == 1
        with pytest.raises(OffsetConflictError, match="the log end offset is 2") as raised:
            producer.send("orders", b"lost", partition=0, expected_offset=1).result(30)
        assert raised.value.current_offset == 2
        # After a conflict (an epoch bump for the idempotent producer) sending goes on.
        assert producer.send("orders", b"shipped", partition=0, expected_offset=2).result(30).offset == 2
    assert [value for _, _, value in stored(broker.bootstrap, "orders")] == [
        b"created", b"paid", b"shipped"]


def test_the_key_condition_and_the_key_chooses_the_partition(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "accounts", 3)
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        first = producer.send("accounts", b"opened", key=b"acct-1", expected_key_offset=-1).result(30)
        producer.send("accounts", b"other", key=b"acct-2").result(30)
        with pytest.raises(OffsetConflictError) as raised:
            producer.send("accounts", b"opened again", key=b"acct-1", expected_key_offset=-1).result(30)
        assert raised.value.current_offset == first.offset
        second = producer.send("accounts", b"credited", key=b"acct-1",
                               expected_key_offset=first.offset).result(30)
        assert (second.partition, second.offset > first.offset) == (first.partition, True)
        with pytest.raises(ValueError, match="needs a key"):
            producer.send("accounts", b"x", partition=0, expected_key_offset=-1)
        with pytest.raises(ValueError, match="a partition or a key"):
            producer.send("accounts", b"x", expected_offset=0)
    values = [value for _, _, value in stored(broker.bootstrap, "accounts", 3)]
    assert sorted(values) == sorted([b"opened", b"other", b"credited"])  # type: ignore[type-var]


def test_conditional_records_are_not_merged_with_plain_ones(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "mixed")
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50}) as producer:
        plain = [producer.send("mixed", b"plain-%d" % i, partition=0) for i in range(3)]
        conditional = producer.send("mixed", b"cond", partition=0, expected_offset=3)
        stale = producer.send("mixed", b"stale", partition=0, expected_offset=3)
        after = [producer.send("mixed", b"after-%d" % i, partition=0) for i in range(2)]
        assert [f.result(30).offset for f in plain] == [0, 1, 2]
        assert conditional.result(30).offset == 3
        with pytest.raises(OffsetConflictError):
            stale.result(30)
        assert [f.result(30).offset for f in after] == [4, 5]
    assert [v for _, _, v in stored(broker.bootstrap, "mixed")] == [
        b"plain-0", b"plain-1", b"plain-2", b"cond", b"after-0", b"after-1"]


def test_the_async_producer(broker) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    create_topic(broker.bootstrap, "async-orders")

    async def run() -> tuple[int, int]:
        async with AsyncProducer({"bootstrap.servers": broker.bootstrap}) as producer:
            appended = await (await producer.send("async-orders", b"a", partition=0, expected_offset=0))
            try:
                await (await producer.send("async-orders", b"b", partition=0, expected_offset=0))
            except OffsetConflictError as conflict:
                return appended.offset, conflict.current_offset
            raise AssertionError("no conflict")

    assert asyncio.run(run()) == (0, 1)


WRITERS = 4
EVENTS_EACH = 15


def test_concurrent_writers_make_a_gap_free_history(broker) -> None:  # type: ignore[no-untyped-def]
    """Each writer, its own producer in its own thread, reads the stream's end (ListOffsets),
    appends its next event expecting it, and on a conflict reads again and retries."""
    create_topic(broker.bootstrap, "stream")
    tp = TopicPartition("stream", 0)
    acknowledged: dict[int, list[tuple[int, bytes]]] = {}
    conflicts: list[int] = []
    failures: list[BaseException] = []

    def write(name: int) -> None:
        mine: list[tuple[int, bytes]] = []
        with Producer({"bootstrap.servers": broker.bootstrap}) as producer, \
                SamsaAdmin({"bootstrap.servers": broker.bootstrap}) as admin:
            while len(mine) < EVENTS_EACH:
                expected = admin.list_offsets({tp: "latest"})[tp].offset
                value = b"%d:%d" % (name, len(mine))
                try:
                    offset = producer.send("stream", value, partition=0,
                                           expected_offset=expected).result(30).offset
                except OffsetConflictError:
                    conflicts.append(name)
                    continue
                assert offset == expected
                mine.append((offset, value))
        acknowledged[name] = mine

    def guarded(name: int) -> None:
        try:
            write(name)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=guarded, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    assert conflicts, "the writers never contended"  # ~70 conflicts for 60 events, measured
    history = stored(broker.bootstrap, "stream")
    assert [offset for _, offset, _ in history] == list(range(WRITERS * EVENTS_EACH))  # no gap
    by_offset = {offset: value for _, offset, value in history}
    for name, mine in acknowledged.items():
        # every acknowledged append is there once, at its expected offset, in the writer's order
        assert [by_offset[offset] for offset, _ in mine] == [value for _, value in mine]
        assert [value for _, value in mine] == [b"%d:%d" % (name, i) for i in range(EVENTS_EACH)]
    assert sorted(value for _, _, value in history) == sorted(  # type: ignore[type-var]
        value for mine in acknowledged.values() for _, value in mine)
