"""The idempotent producer against a real broker: librdkafka and kafka-python with idempotence
on, and raw ProduceRequests re-sent, gapped and fenced, across a restart."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaProducer

from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.init_producer_id_response import InitProducerIdResponse
from protocol.records import Record, encode_batch, iter_batches
from tests.integration.test_bad_input import Client, create, log_end_offset, produce
from tests.integration.test_confluent_kafka import consume, produce_all, producer

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

NONE, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH = 0, 45, 47


def stored_producer_ids(broker, topic: str) -> set[int]:  # type: ignore[no-untyped-def]
    """The producer ids in the partition's segment files: proof the client was idempotent."""
    ids: set[int] = set()
    for path in (broker.log_dir / f"{topic}-0").glob("*.log"):
        ids |= {batch.header.producer_id for batch in iter_batches(path.read_bytes())}
    return ids


def test_confluent_kafka_idempotent_ten_thousand_exactly_once(broker) -> None:  # type: ignore[no-untyped-def]
    values = [b"%06d" % i for i in range(10_000)]
    p = producer(broker, **{"enable.idempotence": True, "linger.ms": 5,
                            "max.in.flight.requests.per.connection": 5})
    reports = produce_all(p, "idem-rd", values)
    assert sorted(message.offset() for _, message in reports) == list(range(10_000))
    assert [m.value() for m in consume(broker, "idem-rd", 10_000)] == values
    assert len(stored_producer_ids(broker, "idem-rd")) == 1
    assert -1 not in stored_producer_ids(broker, "idem-rd")


def test_kafka_python_idempotent_ten_thousand_exactly_once(broker) -> None:  # type: ignore[no-untyped-def]
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all",
                      linger_ms=5)
    futures = [p.send("idem-kp", value=b"%06d" % i) for i in range(10_000)]
    p.flush(60)
    offsets = [future.get(10).offset for future in futures]
    p.close()
    assert offsets == list(range(10_000))
    got = consume(broker, "idem-kp", 10_000)
    assert [m.value() for m in got] == [b"%06d" % i for i in range(10_000)]
    assert len(stored_producer_ids(broker, "idem-kp")) == 1
    assert -1 not in stored_producer_ids(broker, "idem-kp")


def init_producer_id(client: Client) -> tuple[int, int]:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
    response = client.call(22, 4, request, InitProducerIdResponse, flexible=True)
    assert response.error_code == NONE
    return response.producer_id, response.producer_epoch


def batch(producer_id: int, epoch: int, sequence: int, count: int = 3) -> bytes:
    now = int(time.time() * 1000)
    records = [Record(offset=i, timestamp=now, key=None, value=b"v%d" % (sequence + i))
               for i in range(count)]
    return encode_batch(records, producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=sequence)


def answer(client: Client, topic: str, records: bytes) -> tuple[int, int]:
    response = produce(client, topic, {0: records}, acks=-1)
    partition = response.responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


def test_raw_resend_gap_old_epoch_and_restart(broker) -> None:  # type: ignore[no-untyped-def]
    client = Client(broker)
    create(client, "idem-raw")
    producer_id, epoch = init_producer_id(client)
    assert answer(client, "idem-raw", batch(-1, -1, -1, 2)) == (NONE, 0)  # not idempotent
    first = batch(producer_id, epoch, 0)
    assert answer(client, "idem-raw", first) == (NONE, 2)
    assert answer(client, "idem-raw", batch(producer_id, epoch, 3)) == (NONE, 5)
    assert answer(client, "idem-raw", first) == (NONE, 2)  # the retry: same offset, no append
    assert log_end_offset(client, "idem-raw") == 8
    assert answer(client, "idem-raw", batch(producer_id, epoch, 9))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert answer(client, "idem-raw", batch(producer_id, epoch + 1, 0)) == (NONE, 8)  # epoch bump
    assert answer(client, "idem-raw", batch(producer_id, epoch, 6))[0] == INVALID_PRODUCER_EPOCH
    assert log_end_offset(client, "idem-raw") == 11
    client.close()

    broker.restart()
    client = Client(broker)
    assert answer(client, "idem-raw", batch(producer_id, epoch + 1, 0)) == (NONE, 8)
    assert answer(client, "idem-raw", batch(producer_id, epoch + 1, 4))[0] == (
        OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert answer(client, "idem-raw", batch(producer_id, epoch, 6))[0] == INVALID_PRODUCER_EPOCH
    assert answer(client, "idem-raw", batch(producer_id, epoch + 1, 3)) == (NONE, 11)
    assert log_end_offset(client, "idem-raw") == 14
    assert init_producer_id(client)[0] != producer_id  # a new id, never a bumped one
    client.close()


def test_duplicate_detected_after_a_kill(broker) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL: no snapshot at the log end; the state is rebuilt by replaying batch headers."""
    client = Client(broker)
    create(client, "idem-kill")
    producer_id, epoch = init_producer_id(client)
    first = batch(producer_id, epoch, 0)
    assert answer(client, "idem-kill", first) == (NONE, 0)
    assert answer(client, "idem-kill", batch(producer_id, epoch, 3)) == (NONE, 3)
    client.close()
    broker.process.kill()
    broker.process.wait()
    broker.process.stdout.close()
    broker._stderr.close()
    broker.overrides = {**broker.overrides, "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}"}
    broker.start()
    client = Client(broker)
    assert answer(client, "idem-kill", batch(producer_id, epoch, 3)) == (NONE, 3)
    assert answer(client, "idem-kill", first) == (NONE, 0)  # a replay rebuilds all of the last 5
    assert answer(client, "idem-kill", batch(producer_id, epoch, 6)) == (NONE, 6)
    assert log_end_offset(client, "idem-kill") == 9
    client.close()
