"""The fault workloads: real clients driving a Samsa cluster during a fault run, each writing
every operation it invokes and every outcome it learns to a shared ``History``.

    create_topics(bootstrap, [TopicSpec("events", 3, 3, {"min.insync.replicas": "2"})])
    producer = IdempotentProducer(bootstrap, history, "producer", "events", rng).start()
    consumer = GroupConsumer(bootstrap, history, "consumer", ["events"], rng, group="g").start()
    ...  # faults
    producer.stop(); consumer.stop()
    final_read(bootstrap, history, ["events"], "read_uncommitted")

Each workload is a class with ``start()`` (a thread) and ``stop()`` (finishes what is in flight,
writes its outcomes, closes the clients; re-raises a harness bug from the thread). It runs until
stopped, paced to a target rate so that two cores are not saturated. Constructors take the
bootstrap servers, the history, a process name prefix, the topic name(s) and a seed (a
``random.Random``, or an int) for whatever the workload chooses.

The pieces, one module each:

- ``workload_base``: threads, pacing, the fail/info rules for client errors, ``create_topics``;
- ``workload_producers``: ``IdempotentProducer`` (librdkafka), ``SamsaIdempotentProducer``,
  ``CompactedWriter``;
- ``workload_consumers``: ``GroupConsumer`` and ``final_read``;
- ``workload_transactions``: ``Transactions`` (consume-transform-produce).
"""

from __future__ import annotations

from tests.faults.workload_base import TopicSpec, Workload, create_topics
from tests.faults.workload_consumers import GroupConsumer, final_read
from tests.faults.workload_producers import (
    COMPACTED_TOPIC_CONFIGS,
    CompactedWriter,
    IdempotentProducer,
    SamsaIdempotentProducer,
)
from tests.faults.workload_transactions import Transactions

__all__ = [
    "COMPACTED_TOPIC_CONFIGS",
    "CompactedWriter",
    "GroupConsumer",
    "IdempotentProducer",
    "SamsaIdempotentProducer",
    "TopicSpec",
    "Transactions",
    "Workload",
    "create_topics",
    "final_read",
]
