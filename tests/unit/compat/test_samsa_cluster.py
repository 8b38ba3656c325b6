"""The settings of ``--brokers 3``'s nodes (compat/samsa_cluster.py): make cluster's, with what
a harness run must set per node, and the suite's own on top. No process is started here."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from compat import run
from compat.librdkafka_suite import BROKER_SETTINGS, SASL_BROKER_SETTINGS
from compat.samsa_cluster import PER_NODE_KEYS, cluster_template, listener_names, node_settings

VOTERS = "0@127.0.0.1:5000,1@127.0.0.1:5001,2@127.0.0.1:5002"


def test_the_template_is_make_clusters_config_without_the_per_node_keys() -> None:
    template = cluster_template()
    assert len(template) == 3
    assert [node["broker.rack"] for node in template] == ["rack-a", "rack-b", "rack-c"]
    for node in template:
        assert node["process.roles"] == "broker,controller"
        assert node["default.replication.factor"] == "3"
        assert not set(PER_NODE_KEYS) & set(node)


def test_a_nodes_settings_put_its_listeners_and_the_suites_settings_over_the_template(
        tmp_path: object) -> None:
    settings = node_settings(cluster_template()[1], 1, VOTERS, 5001, {"PLAINTEXT": 6001},
                             BROKER_SETTINGS)
    assert settings["node.id"] == "1" and settings["broker.rack"] == "RACK1"  # trivup's racks
    assert settings["replica.selector.class"].endswith("RackAwareReplicaSelector")
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:6001,CONTROLLER://127.0.0.1:5001"
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:6001"
    assert settings["num.partitions"] == "4"  # the suite's
    assert settings["authorizer.class.name"] == BROKER_SETTINGS["authorizer.class.name"]
    config = BrokerConfig.from_properties({**settings, "log.dirs": "/nonexistent"})
    assert config.node_id == 1


def test_a_sasl_suites_nodes_keep_both_client_listeners() -> None:
    names = listener_names(SASL_BROKER_SETTINGS)
    assert names == ["PLAINTEXT", "SASL_PLAINTEXT"]
    settings = node_settings(cluster_template()[0], 0, VOTERS, 5000,
                             {"PLAINTEXT": 6000, "SASL_PLAINTEXT": 6100}, SASL_BROKER_SETTINGS)
    assert settings["listeners"] == ("PLAINTEXT://127.0.0.1:6000,SASL_PLAINTEXT://127.0.0.1:6100,"
                                     "CONTROLLER://127.0.0.1:5000")
    assert "SASL_PLAINTEXT:SASL_PLAINTEXT" in settings["listener.security.protocol.map"]
    BrokerConfig.from_properties({**settings, "log.dirs": "/nonexistent"})
    assert listener_names({}) == ["PLAINTEXT"]


@pytest.mark.parametrize("arguments", [["--brokers", "3", "--fault", "22=53"],
                                       ["--brokers", "2"]])
def test_the_cluster_mode_refuses_what_it_cannot_run(arguments: list[str]) -> None:
    with pytest.raises(SystemExit):
        run._arguments(arguments)
    assert run._arguments(["--brokers", "3"]).brokers == 3
