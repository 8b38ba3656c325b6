"""Real Samsa brokers for tests, and the pytest plugin that serves them as fixtures.

    from samsa.testing import Broker, Cluster

    with Broker(tmp_path) as broker:            # one node, data under tmp_path
        broker.create_topic("orders", partitions=3)
        ...                                     # any Kafka client at broker.bootstrap

``pip install samsa`` registers ``samsa.testing.plugin`` with pytest (entry point ``pytest11``):
the fixtures ``samsa_broker`` and ``samsa_cluster`` (see that module). Brokers are real
processes on 127.0.0.1 (see ``samsa.testing.nodes``); nothing here imports the broker's code.
"""

from __future__ import annotations

from samsa.testing.nodes import (
    SINGLE_NODE_DEFAULTS,
    Broker,
    BrokerStartError,
    BrokerStopError,
    Cluster,
    create_topic,
    produce,
    read,
    running_broker,
    wait_until,
)
from samsa.testing.ports import free_ports

__all__ = [
    "SINGLE_NODE_DEFAULTS",
    "Broker",
    "BrokerStartError",
    "BrokerStopError",
    "Cluster",
    "create_topic",
    "free_ports",
    "produce",
    "read",
    "running_broker",
    "wait_until",
]
