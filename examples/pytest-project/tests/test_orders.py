"""The application's tests against a real Samsa broker (samsa.testing's fixtures)."""

from __future__ import annotations

import orders

ORDERS = [{"customer": "ada", "amount": 12.5}, {"customer": "bob", "amount": 3.0},
          {"customer": "ada", "amount": 7.5}]


def test_totals_per_customer(samsa_broker):
    samsa_broker.create_topic("orders", partitions=3)
    assert orders.publish(samsa_broker.bootstrap, "orders", ORDERS) == 3
    assert orders.totals(samsa_broker.bootstrap, "orders", "billing", 3) == {"ada": 20.0,
                                                                             "bob": 3.0}


def test_records_read_back_through_the_fixture(samsa_broker):
    samsa_broker.create_topic("audit")
    orders.publish(samsa_broker.bootstrap, "audit", ORDERS[:1])
    [record] = samsa_broker.read("audit")
    assert record.key == b"ada"


def test_orders_survive_the_loss_of_the_leader(samsa_cluster_factory):
    cluster = samsa_cluster_factory(3)
    cluster.create_topic("orders", partitions=1)
    assert orders.publish(cluster.bootstrap, "orders", ORDERS[:2]) == 2
    cluster.kill(cluster.leader("orders"))
    assert orders.publish(cluster.bootstrap, "orders", ORDERS[2:]) == 1
    assert orders.totals(cluster.bootstrap, "orders", "billing", 3) == {"ada": 20.0, "bob": 3.0}
