"""Consume-transform-produce in transactions: a read_committed group member on an input topic
and a transactional librdkafka producer writing one output record per input record, with the
consumed offsets sent to the transaction (exactly once: the output and the group's progress
commit or abort together).

History written (see ``tests.faults.history``), all with ``process`` (one per workload: the
transactional id is ``process``, and a re-made producer keeps it, fencing the old one):

- ``assign`` ok (partitions) on a rebalance and after every rewind (a seek back to the group's
  committed offsets once a transaction aborted or its outcome is unknown);
- ``poll`` ok (records, group, isolation = read_committed) for the input records of each txn;
- ``txn`` invoke (txn = ``"{process}-t{n}"``), then ok (committed), fail (aborted: chosen for
  ``abort_fraction`` of the txns, or after an abortable error) or info (unknown: a fatal error
  or a commit that kept timing out);
- ``send`` invoke per output record (txn, topic, key = the input's key, value unique, input =
  [topic, partition, offset] of the record it was made from) and its
  outcome from the delivery report: ok (partition, offset), fail / info as for the idempotent
  producer. A send's ``ok`` says the record was written, not that it is visible: the txn's
  outcome decides that.

Recovery (librdkafka's documented rules): an error with ``txn_requires_abort()`` → abort the
txn (``fail``); ``fatal()`` → the txn is ``info``, the producer is replaced and
``init_transactions`` fences the old one; a retriable error from ``commit_transaction`` → the
commit is retried (the only way to learn its outcome) up to ``commit_retries`` times; a
call that hangs past its timeout (see ``_step``) counts as fatal.
Everything runs on the workload's thread (librdkafka serves the delivery reports there).
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.faults.history import History
from tests.faults.workload_base import (
    Pacer,
    Pending,
    Workload,
    is_definite_failure,
    new_rng,
    rdkafka_config,
    record_of,
)
from tests.faults.workload_consumers import log_assign

__all__ = ["Transactions"]

log = logging.getLogger("tests.faults.workloads")

ISOLATION = "read_committed"
HUNG_CALL_GRACE_S = 10.0


class TransactionFailed(Exception):
    """A txn step failed: ``error`` is librdkafka's, ``step`` the call that raised it."""

    def __init__(self, step: str, error: KafkaError) -> None:
        super().__init__(f"{step}: {error}")
        self.step = step
        self.error = error


class Transactions(Workload):
    """``rate_per_second`` transactions of up to ``max_records`` input records each."""

    def __init__(self, bootstrap: str, history: History, process: str, input_topic: str,
                 output_topic: str, seed: random.Random | int | None = None, *, group: str,
                 abort_fraction: float = 0.2, rate_per_second: float = 5.0,
                 max_records: int = 10, transaction_timeout_ms: int = 30_000,
                 api_timeout_s: float = 30.0, commit_retries: int = 3) -> None:
        super().__init__(history, process)
        self.bootstrap = bootstrap
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.rng = new_rng(seed)
        self.group = group
        self.abort_fraction = abort_fraction
        self.rate_per_second = rate_per_second
        self.max_records = max_records
        self.transaction_timeout_ms = transaction_timeout_ms
        self.api_timeout_s = api_timeout_s
        self.commit_retries = commit_retries
        self.pending = Pending(history)
        self.txns = 0
        self.sent = 0
        self.hung_calls = 0
        self._producer: confluent_kafka.Producer | None = None

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        consumer = confluent_kafka.Consumer(rdkafka_config(self.bootstrap, **{
            "group.id": self.group, "enable.auto.commit": False, "isolation.level": ISOLATION,
            "auto.offset.reset": "earliest"}))
        consumer.subscribe([self.input_topic], on_assign=self._assigned)
        pacer = Pacer(self.rate_per_second, self._stopping)
        try:
            while pacer.wait():
                producer = self._producer or self._open_producer()
                if producer is None:
                    continue  # init_transactions failed: try again on the next beat
                records = self._poll(consumer)
                if records:
                    self._transact(producer, consumer, records)
        finally:
            self._close(consumer)

    def _open_producer(self) -> confluent_kafka.Producer | None:
        producer = confluent_kafka.Producer(rdkafka_config(self.bootstrap, **{
            "transactional.id": self.process, "acks": "all", "linger.ms": 5,
            "transaction.timeout.ms": self.transaction_timeout_ms}))
        try:
            self._step("init_transactions", producer.init_transactions, self.api_timeout_s)
        except TransactionFailed as error:
            log.info("%s: %s", self.process, error)
            return None
        self._producer = producer
        return producer

    def _assigned(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]
                  ) -> None:
        log_assign(self.history, self.process, self.group, partitions)

    def _poll(self, consumer: confluent_kafka.Consumer) -> list[Any]:
        try:
            messages = consumer.consume(num_messages=self.max_records, timeout=0.2)
        except KafkaException as error:
            log.info("%s: consume: %s", self.process, error)
            return []
        messages = [message for message in messages if message.error() is None]
        if messages:
            self.history.ok("poll", process=self.process, group=self.group,
                            isolation=ISOLATION, records=[record_of(m) for m in messages])
        return messages

    # --- one transaction -------------------------------------------------------------------

    def _transact(self, producer: confluent_kafka.Producer,
                  consumer: confluent_kafka.Consumer, messages: list[Any]) -> None:
        self.txns += 1
        txn = f"{self.process}-t{self.txns}"
        self.history.invoke("txn", process=self.process, txn=txn)
        try:
            self._step("begin_transaction", producer.begin_transaction)
            for message in messages:
                self._send(producer, txn, message)
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            self._step("send_offsets_to_transaction", producer.send_offsets_to_transaction,
                       positions, consumer.consumer_group_metadata(), self.api_timeout_s)
            if self.rng.random() < self.abort_fraction:
                # delivered first, so the aborted records are in the log (behind an abort
                # marker) for read_committed readers to skip, not purged in the client
                producer.flush(self.api_timeout_s)
                self._step("abort_transaction", producer.abort_transaction, self.api_timeout_s)
                self._outcome(txn, "fail", error="aborted by the workload")
                self._rewind(consumer)
                return
            self._commit(producer, txn)
        except TransactionFailed as failed:
            self._recover(producer, consumer, txn, failed)
        producer.poll(0)

    def _step(self, step: str, call: Any, *arguments: Any) -> Any:
        """One transactional API call, on a daemon thread of its own, given ``api_timeout_s``
        plus a grace period: librdkafka 2.16 can block in ``send_offsets_to_transaction`` past
        its timeout, forever (a txn that turned abortable while the call waited for the
        coordinator). A hung call is a fatal error: the producer is abandoned to its thread
        and a new one fences it."""
        outcome: list[Any] = []

        def target() -> None:
            try:
                outcome.append((True, call(*arguments)))
            except BaseException as error:  # handed to the workload's thread below
                outcome.append((False, error))

        thread = threading.Thread(target=target, name=f"{self.process} {step}", daemon=True)
        thread.start()
        thread.join(self.api_timeout_s + HUNG_CALL_GRACE_S)
        if not outcome:
            self.hung_calls += 1
            raise TransactionFailed(step, KafkaError(
                KafkaError._TIMED_OUT, f"{step} did not return within "
                f"{self.api_timeout_s + HUNG_CALL_GRACE_S} s", fatal=True))
        returned, value = outcome[0]
        if returned:
            return value
        if isinstance(value, KafkaException):
            raise TransactionFailed(step, value.args[0]) from value
        raise value

    def _send(self, producer: confluent_kafka.Producer, txn: str, message: Any) -> None:
        self.sent += 1
        number = self.sent
        key = record_of(message)[3]
        value = f"{self.process}-{number}"
        self.pending.invoke(number, "send", process=self.process, txn=txn,
                            topic=self.output_topic, key=key, value=value,
                            input=[message.topic(), message.partition(), message.offset()])
        try:
            producer.produce(self.output_topic, key=key, value=value,
                             on_delivery=functools.partial(self._delivered, number))
        except BufferError as error:
            self.pending.complete(number, "fail", error=f"BufferError: {error}")
            raise TransactionFailed("produce", KafkaError(KafkaError._QUEUE_FULL)) from error
        except KafkaException as error:
            self.pending.complete(number, "fail", error=str(error))
            raise TransactionFailed("produce", error.args[0]) from error

    def _delivered(self, number: int, error: KafkaError | None, message: Any) -> None:
        if error is None:
            self.pending.complete(number, "ok", partition=message.partition(),
                                  offset=message.offset())
        else:
            outcome = "fail" if is_definite_failure(error.code()) else "info"
            self.pending.complete(number, outcome, error=str(error))

    def _commit(self, producer: confluent_kafka.Producer, txn: str) -> None:
        for attempt in range(self.commit_retries + 1):
            try:
                self._step("commit_transaction", producer.commit_transaction,
                           self.api_timeout_s)
            except TransactionFailed as failed:
                error = failed.error
                if error.retriable() and not error.txn_requires_abort() and not error.fatal() \
                        and attempt < self.commit_retries:
                    log.info("%s: retrying the commit of %s after %s", self.process, txn, error)
                    continue
                raise
            self._outcome(txn, "ok")
            return

    def _outcome(self, txn: str, type: str, **fields: Any) -> None:
        self.history.write(type, "txn", process=self.process, txn=txn, **fields)

    # --- recovery --------------------------------------------------------------------------

    def _recover(self, producer: confluent_kafka.Producer, consumer: confluent_kafka.Consumer,
                 txn: str, failed: TransactionFailed) -> None:
        log.info("%s: txn %s failed in %s", self.process, txn, failed)
        hung = failed.error.fatal()
        if not hung:
            try:
                self._step("abort_transaction", producer.abort_transaction, self.api_timeout_s)
            except TransactionFailed as error:
                log.info("%s: abort of %s: %s", self.process, txn, error)
                hung = error.error.fatal()
            else:
                self._outcome(txn, "fail", error=str(failed))
                self._rewind(consumer)
                return
        self._outcome(txn, "info", error=str(failed))
        self._drop_producer(producer, f"txn {txn} outcome unknown", flush=not hung)
        self._rewind(consumer)

    def _drop_producer(self, producer: confluent_kafka.Producer, reason: str, *,
                       flush: bool = True) -> None:
        """Give up on a producer: its unresolved sends are ``info``. A producer whose call
        hung is left alone (its thread holds it; purging or flushing it could hang too)."""
        if flush:
            producer.purge(in_queue=True, in_flight=True)
            producer.flush(5)
        self.pending.abandon(reason)
        self._producer = None

    def _rewind(self, consumer: confluent_kafka.Consumer) -> None:
        """Seek back to the group's committed offsets: the records of a txn that did not
        commit (or may not have) are read again by the next one."""
        assignment = consumer.assignment()
        if not assignment:
            return
        try:
            committed = consumer.committed(assignment, timeout=self.api_timeout_s)
            for tp in committed:
                offset = tp.offset if tp.offset >= 0 else confluent_kafka.OFFSET_BEGINNING
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        except KafkaException as error:
            # Without the committed offsets the position is unknown: rejoining the group
            # makes librdkafka fetch them again on the next assignment.
            log.info("%s: rewind: %s; resubscribing", self.process, error)
            consumer.unsubscribe()
            consumer.subscribe([self.input_topic], on_assign=self._assigned)
            return
        log_assign(self.history, self.process, self.group, assignment)

    def _close(self, consumer: confluent_kafka.Consumer) -> None:
        if self._producer is not None:
            self._producer.flush(self.api_timeout_s)
            self._drop_producer(self._producer, "unresolved when the workload stopped")
        self.pending.abandon("unresolved when the workload stopped")
        consumer.close()
