"""The fault workloads against one healthy single-node broker: each writes a history with ``ok``
operations of its kind, and the final read holds every acknowledged value at its acknowledged
offset; aborted transactions stay invisible to read_committed, committed ones are exactly once.
The first tests (outcome rules, pacing, ``Pending``) open no socket."""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.faults.history import History, read_history
from tests.faults.workload_base import (
    COMMIT_REFUSED,
    Pacer,
    Pending,
    is_definite_failure,
    running,
)
from tests.faults.workloads import (
    COMPACTED_TOPIC_CONFIGS,
    CompactedWriter,
    GroupConsumer,
    IdempotentProducer,
    SamsaIdempotentProducer,
    TopicSpec,
    Transactions,
    create_topics,
    final_read,
)
from tests.integration.conftest import BrokerProcess

# --- no socket: the outcome rules, pacing, Pending -----------------------------------------


@pytest.mark.parametrize(("code", "definite"), [
    (KafkaError.MSG_SIZE_TOO_LARGE, True),
    (KafkaError.TOPIC_EXCEPTION, True),
    (KafkaError.RECORD_LIST_TOO_LARGE, True),
    (KafkaError._PURGE_QUEUE, True),
    (KafkaError._MSG_TIMED_OUT, False),  # maybe transmitted before it timed out
    (KafkaError._PURGE_INFLIGHT, False),
    (KafkaError._TRANSPORT, False),
    (KafkaError.NOT_LEADER_FOR_PARTITION, False),  # after retries: an earlier attempt may count
    (KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, False),
    (KafkaError.REQUEST_TIMED_OUT, False),
    (KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, False),
])
def test_send_errors_are_fail_only_when_nothing_was_written(code: int, definite: bool) -> None:
    assert is_definite_failure(code) is definite


@pytest.mark.parametrize(("code", "definite"), [
    (KafkaError.ILLEGAL_GENERATION, True),
    (KafkaError.REBALANCE_IN_PROGRESS, True),
    (KafkaError.UNKNOWN_MEMBER_ID, True),
    (KafkaError.REQUEST_TIMED_OUT, False),
    (KafkaError.NOT_COORDINATOR, False),
    (KafkaError._TRANSPORT, False),
])
def test_commit_errors_are_fail_only_when_refused(code: int, definite: bool) -> None:
    assert is_definite_failure(code, COMMIT_REFUSED) is definite


def test_the_pacer_paces_and_stops_at_once() -> None:
    stopping = threading.Event()
    pacer = Pacer(200.0, stopping)
    started = time.monotonic()
    assert all(pacer.wait() for _ in range(40))
    assert time.monotonic() - started >= 39 / 200
    stopping.set()
    slow = Pacer(0.01, stopping)  # a 100 s period: wait() must not sit it out
    started = time.monotonic()
    assert slow.wait() is False and time.monotonic() - started < 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["invoke", "ok", "fail", "info"]),
                          st.integers(0, 5)), max_size=30))
def test_pending_gives_each_invoke_exactly_one_outcome(steps: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "history.jsonl"
        history = History(path)
        pending = Pending(history)
        invoked: set[int] = set()
        model: dict[int, str] = {}  # the first outcome of each outstanding invoke
        for number, (step, op) in enumerate(steps):
            if step == "invoke":
                pending.invoke(number, "send", value=f"v{number}")
                invoked.add(number)
            else:
                target = sorted(invoked - set(model))[op % len(invoked - set(model))] \
                    if invoked - set(model) else op + 1000
                pending.complete(target, step, partition=0, offset=target)
                if target in invoked:
                    model[target] = step
        assert pending.abandon("stopped") == len(invoked - set(model))
        history.close()
        lines = list(read_history(path))
    outcomes: dict[str, list[str]] = {}
    for line in lines:
        if line["type"] != "invoke":
            outcomes.setdefault(line["value"], []).append(line["type"])
    assert {value: types for value, types in outcomes.items()} == {
        f"v{number}": [model.get(number, "info")] for number in invoked}


# --- against one broker process ----------------------------------------------------------

integration = pytest.mark.integration


@pytest.fixture(scope="module")
def faults_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("faults-broker")
    broker = BrokerProcess(
        log_dir=directory / "logs", stderr_path=directory / "broker.log",
        overrides={"group.initial.rebalance.delay.ms": "0", "log.cleaner.backoff.ms": "100"})
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited with {code}\n{broker.log()}"


@pytest.fixture
def history(tmp_path: Path) -> Iterator[History]:
    opened = History(tmp_path / "history.jsonl")
    yield opened
    opened.close()


def lines(history: History, f: str | None = None, type: str | None = None
          ) -> list[dict[str, Any]]:
    return [line for line in read_history(history.path)
            if (f is None or line.get("f") == f) and (type is None or line["type"] == type)]


def eventually(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def assert_one_outcome_per_send(history: History) -> None:
    invoked = Counter(line["value"] for line in lines(history, "send", "invoke")
                      if line["value"] is not None)
    finished = Counter(line["value"] for line in lines(history, "send")
                       if line["type"] != "invoke" and line["value"] is not None)
    assert invoked == finished and max(invoked.values()) == 1


def final_records(history: History, isolation: str | None = None
                  ) -> dict[tuple[str, int, int], Any]:
    """(topic, partition, offset) -> value over the history's ``final`` lines."""
    found = {}
    for line in lines(history, "final", "ok"):
        if isolation is None or line["isolation"] == isolation:
            for topic, partition, offset, _, value in line["records"]:
                found[topic, partition, offset] = value
    return found


def assert_acks_in_final_read(history: History, topic: str) -> list[dict[str, Any]]:
    acked = [line for line in lines(history, "send", "ok") if line["topic"] == topic]
    final = final_records(history)
    for line in acked:
        assert final.get((topic, line["partition"], line["offset"])) == line["value"], line
    return acked


@integration
@pytest.mark.parametrize("workload", [IdempotentProducer, SamsaIdempotentProducer])
def test_idempotent_producer_acks_are_in_the_final_read(
        faults_broker: BrokerProcess, history: History, workload: type[IdempotentProducer],
) -> None:
    topic = f"idempotent-{workload.__name__}"
    create_topics(faults_broker.bootstrap, [TopicSpec(topic, partitions=3)])
    producer = workload(faults_broker.bootstrap, history, "producer", topic, random.Random(1),
                        rate_per_second=200)
    with running(producer):
        eventually(lambda: len(lines(history, "send", "ok")) >= 150)
    final_read(faults_broker.bootstrap, history, [topic])
    assert_one_outcome_per_send(history)
    assert lines(history, "send", "fail") == lines(history, "send", "info") == []
    acked = assert_acks_in_final_read(history, topic)
    assert {line["partition"] for line in acked} == {0, 1, 2}
    finals = lines(history, "final", "ok")
    assert [(line["partition"], line["log_start"]) for line in finals] == [(0, 0), (1, 0), (2, 0)]
    assert sum(line["high_watermark"] for line in finals) == len(acked)
    values = [record[4] for line in finals for record in line["records"]]
    assert len(values) == len(set(values)) == len(acked)  # no duplicates, nothing unasked


def by_offset(line: dict[str, Any]) -> int:
    return int(line["offset"])


@integration
def test_compacted_writer_keeps_the_latest_value_per_key(
        faults_broker: BrokerProcess, history: History, tmp_path: Path) -> None:
    bootstrap = faults_broker.bootstrap
    configs = {**COMPACTED_TOPIC_CONFIGS, "segment.bytes": "1024"}  # many closed segments
    create_topics(bootstrap, [TopicSpec("compacted", configs=configs)])
    # batch.size: a loaded machine lets librdkafka gather more records per batch, and a batch
    # larger than segment.bytes is refused (RECORD_LIST_TOO_LARGE, as Kafka refuses it)
    writer = CompactedWriter(bootstrap, history, "writer", "compacted", random.Random(2),
                             rate_per_second=300, keys=4, tombstone_fraction=0.2,
                             config={"batch.size": 512})
    with running(writer):
        eventually(lambda: len(lines(history, "send", "ok")) >= 300)
    probe = History(tmp_path / "probe.jsonl")  # reads that only wait for the cleaner

    def cleaned() -> bool:
        (records,) = final_read(bootstrap, probe, ["compacted"]).values()
        return len(records) < 200

    eventually(cleaned)  # the final read must then step over the offsets cleaned away
    probe.close()
    final_read(bootstrap, history, ["compacted"], compacted=["compacted"])
    acked = lines(history, "send", "ok")
    assert lines(history, "send", "fail") == lines(history, "send", "info") == []
    assert any(line.get("tombstone") for line in acked) and len(acked) >= 300
    latest_acked = {line["key"]: line["value"] for line in sorted(acked, key=by_offset)}
    (final,) = lines(history, "final", "ok")
    assert final["compacted"] is True and final["high_watermark"] == len(acked)
    latest_read = {key: value for _, _, _, key, value in final["records"]}
    # a tombstone's key may be gone (cleaned) or still end in the tombstone
    assert {k: v for k, v in latest_read.items() if v is not None} == \
        {k: v for k, v in latest_acked.items() if v is not None}


@integration
def test_group_consumers_poll_every_acked_value_and_commit(faults_broker: BrokerProcess,
                                                           history: History) -> None:
    create_topics(faults_broker.bootstrap, [TopicSpec("grouped", partitions=4)])
    rng = random.Random(3)
    producer = IdempotentProducer(faults_broker.bootstrap, history, "producer", "grouped", rng,
                                  rate_per_second=200)
    consumers = [GroupConsumer(faults_broker.bootstrap, history, f"consumer{index}",
                               ["grouped"], rng, group="workers", commit_every=3,
                               offsets_every=4) for index in range(2)]

    def polled() -> set[str]:
        return {r[4] for line in lines(history, "poll", "ok") for r in line["records"]}

    def assigned() -> set[str]:
        return {line["process"] for line in lines(history, "assign", "ok") if line["partitions"]}

    with running(producer, *consumers):
        eventually(lambda: len(lines(history, "send", "ok")) >= 200)
        producer.stop()
        acked = {line["value"] for line in lines(history, "send", "ok")}
        eventually(lambda: acked <= polled())
        eventually(lambda: assigned() == {"consumer0", "consumer1"})
        eventually(lambda: len(lines(history, "offsets", "ok")) >= 2)
    final_read(faults_broker.bootstrap, history, ["grouped"])
    final = final_records(history)
    for line in lines(history, "poll", "ok"):
        assert line["group"] == "workers" and line["isolation"] == "read_committed"
        for topic, partition, offset, _, value in line["records"]:
            assert final[topic, partition, offset] == value
    commits = lines(history, "commit", "ok")
    assert commits and lines(history, "commit", "info") == []
    assert_committed_offsets_only_grow(history)


def assert_committed_offsets_only_grow(history: History) -> None:
    highest: dict[tuple[str, int], int] = {}
    for line in read_history(history.path):
        if line.get("f") == "commit" and line["type"] == "ok":
            for topic, partition, offset in line["offsets"]:
                highest[topic, partition] = max(highest.get((topic, partition), 0), offset)
        elif line.get("f") == "offsets" and line["type"] == "ok":
            for topic, partition, offset in line["offsets"]:
                assert offset >= highest.get((topic, partition), 0), line


@integration
def test_transactions_commit_exactly_once_and_aborts_stay_invisible(
        faults_broker: BrokerProcess, history: History) -> None:
    bootstrap = faults_broker.bootstrap
    create_topics(bootstrap, [TopicSpec("tx-input", partitions=2),
                              TopicSpec("tx-output", partitions=2)])
    rng = random.Random(4)
    producer = IdempotentProducer(bootstrap, history, "producer", "tx-input", rng,
                                  rate_per_second=100)
    transactions = Transactions(bootstrap, history, "transformer", "tx-input", "tx-output", rng,
                                group="transformers", abort_fraction=0.3, rate_per_second=20)
    with running(producer, transactions):
        eventually(lambda: len(lines(history, "txn", "ok")) >= 4
                   and len(lines(history, "txn", "fail")) >= 2)
    final_read(bootstrap, history, ["tx-output"], "read_committed")
    final_read(bootstrap, history, ["tx-output"], "read_uncommitted")

    outcome = {line["txn"]: line["type"] for line in lines(history, "txn")
               if line["type"] != "invoke"}
    assert set(outcome.values()) == {"ok", "fail"}  # healthy: nothing unknown
    sends = {line["value"]: line for line in lines(history, "send", "invoke") if "txn" in line}
    committed_read = set(final_records(history, "read_committed").values())
    uncommitted_read = set(final_records(history, "read_uncommitted").values())
    committed = {v for v, line in sends.items() if outcome.get(line["txn"]) == "ok"}
    aborted = {v for v, line in sends.items() if outcome.get(line["txn"]) == "fail"}
    assert committed_read == committed
    assert aborted and not aborted & committed_read
    assert aborted <= uncommitted_read  # written, then aborted: in the log behind a marker
    for line in lines(history, "send", "ok"):
        if line["value"] in committed:
            assert final_records(history, "read_committed")[
                line["topic"], line["partition"], line["offset"]] == line["value"]
    # exactly once: every input record below the group's committed offsets was transformed
    # by exactly one committed transaction
    inputs = Counter(tuple(sends[value]["input"]) for value in committed)
    assert max(inputs.values()) == 1
    assert set(inputs) == set(input_records_below_committed(bootstrap, "transformers"))


def input_records_below_committed(bootstrap: str, group: str) -> list[tuple[str, int, int]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "isolation.level": "read_committed"})
    try:
        committed = consumer.committed([TopicPartition("tx-input", p) for p in range(2)], 10)
    finally:
        consumer.close()
    return [("tx-input", tp.partition, offset) for tp in committed
            for offset in range(max(tp.offset, 0))]


@integration
def test_final_read_at_read_committed_stops_at_an_open_transaction(
        faults_broker: BrokerProcess, history: History) -> None:
    bootstrap = faults_broker.bootstrap
    create_topics(bootstrap, [TopicSpec("open-txn")])
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": "open-txn", "log_level": 3})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("open-txn", value=b"committed")
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("open-txn", value=b"open")
    producer.flush(30)
    final_read(bootstrap, history, ["open-txn"], "read_committed", deadline_s=20)
    final_read(bootstrap, history, ["open-txn"], "read_uncommitted", deadline_s=20)
    producer.abort_transaction(30)
    committed_read, uncommitted_read = lines(history, "final", "ok")
    # the last stable offset is the open txn's first offset (after the commit marker at 1)
    assert (committed_read["high_watermark"], committed_read["records"]) == (
        2, [["open-txn", 0, 0, None, "committed"]])
    assert uncommitted_read["high_watermark"] == 3
    assert [r[4] for r in uncommitted_read["records"]] == ["committed", "open"]


@integration
def test_final_read_fails_loudly_when_the_end_is_not_reached(faults_broker: BrokerProcess,
                                                             history: History) -> None:
    bootstrap = faults_broker.bootstrap
    create_topics(bootstrap, [TopicSpec("unfinished", partitions=2)])
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce("unfinished", value=b"x", partition=1)
    assert producer.flush(10) == 0
    with pytest.raises(TimeoutError, match=r"unfinished-1 at 0 of 1") as raised:
        final_read(bootstrap, history, ["unfinished"], deadline_s=0.0)
    assert "unfinished-0" not in str(raised.value)  # empty: nothing to reach
    assert lines(history) == []


@integration
def test_create_topics_waits_for_leaders_and_accepts_an_existing_topic(
        faults_broker: BrokerProcess) -> None:
    spec = TopicSpec("created", partitions=5, configs={"min.insync.replicas": "1"})
    create_topics(faults_broker.bootstrap, [spec])
    create_topics(faults_broker.bootstrap, [spec])  # already there: accepted
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": faults_broker.bootstrap})
    topic = admin.list_topics("created", timeout=10).topics["created"]
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert all(partition.leader == 1 for partition in topic.partitions.values())


@contextmanager
def own_broker(tmp_path: Path, **overrides: str) -> Iterator[BrokerProcess]:
    """A broker this test kills and restarts (the module's stays healthy)."""
    broker = BrokerProcess(log_dir=tmp_path / "logs", stderr_path=tmp_path / "broker.log",
                           overrides=overrides).start()
    try:
        yield broker
    finally:
        if broker.alive():
            assert broker.stop() == 0, broker.log()


def kill_and_restart(broker: BrokerProcess, while_down: Callable[[], bool]) -> None:
    """kill -9, wait for ``while_down`` to hold, restart on the same port."""
    assert broker.process is not None
    broker.process.kill()
    assert broker.stop() == -9
    eventually(while_down)
    broker.overrides = {**broker.overrides, "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}"}
    broker.start()


@integration
def test_producers_through_a_broker_kill_give_every_send_one_outcome(
        tmp_path: Path, history: History) -> None:
    with own_broker(tmp_path) as broker:
        create_topics(broker.bootstrap, [TopicSpec("killed", partitions=2)])
        rng = random.Random(5)
        producers = (
            IdempotentProducer(broker.bootstrap, history, "rdkafka", "killed", rng,
                               rate_per_second=100, message_timeout_ms=2000,
                               config={"reconnect.backoff.max.ms": 500}),
            SamsaIdempotentProducer(broker.bootstrap, history, "samsa", "killed", rng,
                                    rate_per_second=100, message_timeout_ms=2000))

        def by_both(type: str, at_least: int) -> bool:
            counts = Counter(line["process"].split("-")[0] for line in lines(history, "send", type))
            return min(counts["rdkafka"], counts["samsa"]) >= at_least

        with running(*producers):
            eventually(lambda: by_both("ok", 50))
            # down for longer than message.timeout.ms / delivery.timeout.ms: unknown outcomes
            kill_and_restart(broker, lambda: by_both("info", 1))
            settled = len(lines(history, "send", "ok"))
            eventually(lambda: len(lines(history, "send", "ok")) >= settled + 200)
        final_read(broker.bootstrap, history, ["killed"])
    assert_one_outcome_per_send(history)
    assert_acks_in_final_read(history, "killed")
    assert lines(history, "send", "fail") == []  # nothing refused: only unknown outcomes


@integration
@pytest.mark.slow  # ~25 s: librdkafka's hang after the restart costs the hung-call grace period
def test_transactions_through_a_broker_kill_are_never_torn(tmp_path: Path,
                                                           history: History) -> None:
    with own_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "0"}) as broker:
        create_topics(broker.bootstrap, [TopicSpec("kin", partitions=2),
                                         TopicSpec("kout", partitions=2)])
        rng = random.Random(6)
        producer = IdempotentProducer(broker.bootstrap, history, "producer", "kin", rng,
                                      rate_per_second=50)
        transactions = Transactions(broker.bootstrap, history, "transformer", "kin", "kout",
                                    rng, group="kgroup", abort_fraction=0.2,
                                    rate_per_second=20, api_timeout_s=3.0,
                                    transaction_timeout_ms=5000)

        def txns_finished(type: str | None = None) -> int:
            return sum(1 for line in lines(history, "txn") if line["type"] != "invoke"
                       and (type is None or line["type"] == type))

        with running(producer, transactions):
            eventually(lambda: txns_finished("ok") >= 3)
            finished = txns_finished()
            # down until a txn failed or became unknown
            kill_and_restart(broker, lambda: txns_finished() > finished)
            committed = txns_finished("ok")
            eventually(lambda: txns_finished("ok") >= committed + 3, 60)
        final_read(broker.bootstrap, history, ["kout"], "read_committed")
    outcome = {line["txn"]: line["type"] for line in lines(history, "txn")
               if line["type"] != "invoke"}
    visible = set(final_records(history, "read_committed").values())
    by_txn: dict[str, set[str]] = {}
    for line in lines(history, "send", "invoke"):
        if "txn" in line:
            by_txn.setdefault(line["txn"], set()).add(line["value"])
    for txn, values in by_txn.items():
        seen = values & visible
        if outcome[txn] == "ok":
            assert seen == values, txn  # committed: all visible
        elif outcome[txn] == "fail":
            assert not seen, txn  # aborted: none visible
        else:
            assert seen in (set(), values), txn  # unknown: all or nothing, never torn
