"""A small application that uses Kafka: orders are published as JSON, totals are read back."""

from __future__ import annotations

import json
from collections.abc import Iterable

from confluent_kafka import Consumer, Producer


def publish(bootstrap: str, topic: str, orders: Iterable[dict[str, object]]) -> int:
    """Publish each order keyed by its customer (acks=all); how many were delivered."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    delivered = []
    for order in orders:
        producer.produce(topic, json.dumps(order).encode(), key=str(order["customer"]).encode(),
                         on_delivery=lambda error, _message: delivered.append(error is None))
    producer.flush(30)
    return sum(delivered)


def totals(bootstrap: str, topic: str, group: str, expected: int) -> dict[str, float]:
    """Read ``expected`` orders with a consumer group; the amount per customer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    amounts: dict[str, float] = {}
    seen = 0
    try:
        while seen < expected:
            message = consumer.poll(10)
            if message is None:
                raise TimeoutError(f"only {seen} of {expected} orders arrived")
            if message.error():
                raise RuntimeError(message.error())
            order = json.loads(message.value())
            amounts[order["customer"]] = amounts.get(order["customer"], 0.0) + order["amount"]
            seen += 1
    finally:
        consumer.close()
    return amounts
