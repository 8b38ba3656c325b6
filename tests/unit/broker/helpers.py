"""Helpers for the broker's unit tests: metadata writes go through the broker's controller."""

from __future__ import annotations

from typing import Any

from broker.broker import Broker
from replication.controller.interface import NewTopic
from replication.metadata.controller import TopicPlan


def create_topic(broker: Broker, name: str, **settings: Any) -> TopicPlan:
    """Create a topic through the controller; raises its refusal."""
    return broker.controller.create_topics([NewTopic(name, **settings)])[0].result()
