"""Helpers for the broker's unit tests: metadata writes go through the broker's controller."""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.broker import Broker
from broker.config import BrokerConfig
from replication.controller.interface import NewTopic, TopicToDelete
from replication.metadata.controller import TopicPlan
from replication.metadata.image import TopicImage


def create_topic(broker: Broker, name: str, **settings: Any) -> TopicPlan:
    """Create a topic through the controller; raises its refusal."""
    return broker.controller.create_topics([NewTopic(name, **settings)])[0].result()


def delete_topic(broker: Broker, name: str) -> TopicImage:
    """Delete a topic through the controller; raises its refusal."""
    return broker.controller.delete_topics([TopicToDelete(name=name)])[0].result()


def with_controller_listeners(config: BrokerConfig, *names: str) -> BrokerConfig:
    """``config`` with ``controller.listener.names`` set to ``names`` (only that: the rest of
    the KRaft settings stay as they are, so a single-node config serves a controller listener)."""
    kraft = dataclasses.replace(config.kraft, controller_listener_names=tuple(n.upper() for n in names))
    return dataclasses.replace(config, kraft=kraft)
