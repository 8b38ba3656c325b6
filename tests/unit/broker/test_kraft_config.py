"""KRaft configuration: Kafka's keys, defaults and cross-key rules, each refusal naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig, ConfigError, Listener
from broker.kraft_config import (
    BootstrapServer,
    KRaftSettings,
    QuorumVoter,
    parse_voters,
)

ROOT = Path(__file__).resolve().parents[3]
VOTERS = "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
COMBINED = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19192",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": VOTERS,
}
BROKER_ONLY = {
    "process.roles": "broker",
    "node.id": "4",
    "listeners": "PLAINTEXT://127.0.0.1:19095",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": VOTERS,
}
CONTROLLER_ONLY = {
    "process.roles": "controller",
    "node.id": "2",
    "listeners": "CONTROLLER://127.0.0.1:19193",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": VOTERS,
}


def kraft(properties: dict[str, str]) -> KRaftSettings:
    return BrokerConfig.from_properties(properties).kraft


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        ("process_roles", frozenset()),
        ("controller_listener_names", ()),
        ("inter_broker_listener_name", "PLAINTEXT"),
        ("broker_rack", None),
        ("quorum.voters", ()),
        ("quorum.bootstrap_servers", ()),
        ("quorum.election_timeout_ms", 1000),
        ("quorum.fetch_timeout_ms", 2000),
        ("quorum.election_backoff_max_ms", 1000),
        ("quorum.request_timeout_ms", 2000),
        ("quorum.retry_backoff_ms", 20),
        ("quorum.append_linger_ms", 25),
        ("initial_broker_registration_timeout_ms", 60000),
        ("broker_heartbeat_interval_ms", 2000),
        ("broker_session_timeout_ms", 9000),
        ("auto_leader_rebalance_enable", True),
        ("leader_imbalance_check_interval_seconds", 300),
        ("leader_imbalance_per_broker_percentage", 10),
        ("offsets_topic_replication_factor", 3),
        ("transaction_state_log_replication_factor", 3),
        ("transaction_state_log_min_isr", 2),
        ("replica.replica_lag_time_max_ms", 30000),
        ("replica.replica_socket_timeout_ms", 30000),
        ("replica.replica_fetch_max_bytes", 1048576),
        ("replica.replica_fetch_wait_max_ms", 500),
        ("replica.replica_fetch_min_bytes", 1),
        ("replica.replica_fetch_backoff_ms", 1000),
        ("replica.replica_fetch_response_max_bytes", 10485760),
        ("replica.num_replica_fetchers", 1),
        ("replica.replica_selector_class", ""),
    ],
)
def test_defaults_are_kafkas(attribute: str, expected: object) -> None:
    value: object = kraft({})
    for part in attribute.split("."):
        value = getattr(value, part)
    assert value == expected


def test_no_process_roles_is_the_single_node_of_today() -> None:
    config = BrokerConfig.from_properties({})
    assert not config.kraft.is_kraft
    assert config.kraft.is_broker and config.kraft.is_controller
    assert config.node_id == 1  # Samsa's default: a single node needs no node.id
    assert config.log_config.unclean_leader_election_enable is False
    assert (config.default_replication_factor, config.log_config.min_insync_replicas) == (1, 1)


def test_the_shipped_server_properties_still_parse_the_same() -> None:
    config = BrokerConfig.load(ROOT / "conf" / "server.properties")
    assert not config.kraft.is_kraft
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.advertised_listeners == config.listeners


def test_combined_node() -> None:
    config = BrokerConfig.from_properties({**COMBINED, "broker.rack": "rack-a"})
    settings = config.kraft
    assert settings.is_kraft and settings.is_combined
    assert settings.quorum.voters == (QuorumVoter(1, "127.0.0.1", 19192),
                                      QuorumVoter(2, "127.0.0.1", 19193),
                                      QuorumVoter(3, "127.0.0.1", 19194))
    assert settings.controller_listeners == (Listener("CONTROLLER", "127.0.0.1", 19192),)
    assert settings.advertised_controller_listeners == settings.controller_listeners
    assert settings.broker_rack == "rack-a"
    # Both listeners are bound; Metadata advertises only the broker one.
    assert [listener.name for listener in config.listeners] == ["PLAINTEXT", "CONTROLLER"]
    assert config.advertised_listeners == (Listener("PLAINTEXT", "127.0.0.1", 19092),)


def test_the_controller_endpoint_of_each_node() -> None:
    settings = kraft(COMBINED)
    assert settings.controller_endpoint(2) == ("127.0.0.1", 19193)
    assert settings.controller_endpoint(9) is None
    assert settings.is_controller_listener("CONTROLLER")
    assert settings.is_controller_listener("controller")
    assert not settings.is_controller_listener("PLAINTEXT")


def test_a_dynamic_quorum_node_finds_itself_through_its_advertised_listener() -> None:
    properties = {**COMBINED, "controller.quorum.voters": "",
                  "controller.quorum.bootstrap.servers": "127.0.0.1:19192, [::1]:19193",
                  "advertised.listeners": "PLAINTEXT://a.example:1,CONTROLLER://c.example:2"}
    settings = kraft(properties)
    assert settings.quorum.bootstrap_servers == (BootstrapServer("127.0.0.1", 19192),
                                                 BootstrapServer("::1", 19193))
    assert settings.advertised_controller_listeners == (Listener("CONTROLLER", "c.example", 2),)
    assert settings.controller_endpoint(1) == ("c.example", 2)


def test_broker_only_and_controller_only_nodes() -> None:
    broker = BrokerConfig.from_properties(BROKER_ONLY)
    assert broker.kraft.is_broker and not broker.kraft.is_controller
    assert broker.kraft.controller_listeners == ()
    assert broker.kraft.controller_endpoint(1) == ("127.0.0.1", 19192)
    controller = BrokerConfig.from_properties(CONTROLLER_ONLY)
    assert controller.kraft.is_controller and not controller.kraft.is_broker
    assert controller.advertised_listeners == ()


def test_the_default_protocol_map_gives_the_controller_listener_plaintext() -> None:
    config = BrokerConfig.from_properties(COMBINED)
    assert config.listeners[1].security_protocol == "PLAINTEXT"
    explicit = {**COMBINED, "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                    'required user_a="b";'}
    assert BrokerConfig.from_properties(explicit).listeners[1].security_protocol == "SASL_PLAINTEXT"


def test_inter_broker_listener_name() -> None:
    properties = {**COMBINED, "listeners": COMBINED["listeners"] + ",INTERNAL://127.0.0.1:19292",
                  "listener.security.protocol.map":
                  "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT",
                  "inter.broker.listener.name": "internal"}
    assert kraft(properties).inter_broker_listener_name == "INTERNAL"
    single = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "PLAIN",
              "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  'required user_a="b";'}
    # A SASL-only single node has no PLAINTEXT listener and still starts, as today.
    assert kraft(single).inter_broker_listener_name == "PLAINTEXT"


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("process.roles", "broker,zookeeper", "Unknown process role 'zookeeper'"),
        ("process.roles", "broker,broker", "Duplicate role names found in `process.roles`"),
        ("controller.quorum.voters", "1@h", "Failed to parse host name from entry 1@h for"),
        ("controller.quorum.voters", "h:1", "Each entry should be in the form `{id}@{host}:{port}`"),
        ("controller.quorum.voters", "x@h:1", "Failed to parse voter ID as an integer from x"),
        ("controller.quorum.voters", "1@h!:1", "Failed to parse host name from entry 1@h!:1"),
        ("controller.quorum.voters", "1@h:99999", "Failed to parse host port"),
        ("controller.quorum.voters", "1@0.0.0.0:1", "Host string (0.0.0.0) is not routeable"),
        ("controller.quorum.voters", "1@a:1,1@b:2", "voter id 1 is listed twice"),
        ("controller.quorum.bootstrap.servers", "h", "Failed to parse host name from h for"),
        ("controller.quorum.bootstrap.servers", "h:70000", "Failed to parse host port from h:70000"),
        ("controller.quorum.bootstrap.servers", "h?:1", "Failed to parse host name from h?:1"),
        ("controller.listener.names", "A,a", "listed twice"),
        ("security.inter.broker.protocol", "TLS", "Invalid security protocol `TLS`"),
        ("controller.quorum.election.timeout.ms", "0", "must be between 1"),
        ("controller.quorum.fetch.timeout.ms", "x", "not an integer"),
        ("controller.quorum.election.backoff.max.ms", "-1", "must be between 0"),
        ("controller.quorum.request.timeout.ms", "0", "must be between 1"),
        ("controller.quorum.retry.backoff.ms", "-1", "must be between 0"),
        ("controller.quorum.append.linger.ms", "-1", "must be between 0"),
        ("initial.broker.registration.timeout.ms", "0", "must be between 1"),
        ("broker.heartbeat.interval.ms", "0", "must be between 1"),
        ("broker.session.timeout.ms", "soon", "not an integer"),
        ("auto.leader.rebalance.enable", "yes", "must be true or false"),
        ("leader.imbalance.check.interval.seconds", "0", "must be between 1"),
        ("leader.imbalance.per.broker.percentage", "101", "must be between 0 and 100"),
        ("offsets.topic.replication.factor", "0", "must be between 1 and 32767"),
        ("transaction.state.log.replication.factor", "0", "must be between 1 and 32767"),
        ("transaction.state.log.min.isr", "0", "must be between 1"),
        ("unclean.leader.election.enable", "maybe", "true or false"),
        ("default.replication.factor", "0", "must be between 1"),
        ("min.insync.replicas", "0", "min.insync.replicas"),
        ("replica.fetch.min.bytes", "0", "must be between 1"),
        ("num.replica.fetchers", "0", "must be between 1"),
        ("node.id", "-1", "must be between 0"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({key: value})
    assert caught.value.key == key
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def _without(properties: dict[str, str], key: str) -> dict[str, str]:
    return {k: v for k, v in properties.items() if k != key}


CROSS_KEY_RULES = [
    # (properties, the key named, Kafka's reason)
    (_without(COMBINED, "node.id"), "node.id",
     "Missing configuration `node.id` which is required when `process.roles` is defined"),
    ({**COMBINED, "controller.quorum.voters": ""}, "controller.quorum.voters",
     "either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers"),
    ({**COMBINED, "node.id": "7"}, "controller.quorum.voters",
     "the node id 7 must be included in the set of voters "
     "controller.quorum.voters=Set(1, 2, 3)"),
    ({**COMBINED, "listeners": "PLAINTEXT://127.0.0.1:19092"}, "controller.listener.names",
     "controller.listener.names must contain at least one value appearing in the 'listeners' "
     "configuration when running the KRaft controller role"),
    ({**COMBINED, "controller.listener.names": "CONTROLLER,OTHER"}, "controller.listener.names",
     "must only contain values appearing in the 'listeners' configuration"),
    (_without(COMBINED, "controller.listener.names"), "listener.security.protocol.map",
     "no security protocol is defined for listener CONTROLLER"),
    ({**COMBINED, "controller.listener.names": "CONTROLLER,PLAINTEXT"}, "listeners",
     "There must be at least one broker advertised listener. Perhaps all listeners appear in "
     "controller.listener.names?"),
    ({**COMBINED, "advertised.listeners": "PLAINTEXT://0.0.0.0:19092"}, "advertised.listeners",
     "cannot use the nonroutable meta-address 0.0.0.0"),
    ({**COMBINED, "advertised.listeners": "PLAINTEXT://h:1,CONTROLLER://0.0.0.0:2"},
     "advertised.listeners", "cannot use the nonroutable meta-address 0.0.0.0"),
    ({**COMBINED, "inter.broker.listener.name": "CONTROLLER"}, "inter.broker.listener.name",
     "inter.broker.listener.name must be a listener name defined in advertised.listeners. The "
     "valid options based on currently configured listeners are PLAINTEXT"),
    ({**COMBINED, "inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name",
     "Listener with name NOPE defined in inter.broker.listener.name not found in "
     "listener.security.protocol.map."),
    ({**COMBINED, "inter.broker.listener.name": "PLAINTEXT",
      "security.inter.broker.protocol": "PLAINTEXT"}, "inter.broker.listener.name",
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
    ({**COMBINED, "security.inter.broker.protocol": "SASL_PLAINTEXT"},
     "security.inter.broker.protocol", "must be a listener name defined in advertised.listeners"),
    ({**BROKER_ONLY, "node.id": "2"}, "controller.quorum.voters",
     "If process.roles contains just the 'broker' role, the node id 2 must not be included in "
     "the set of voters"),
    (_without(BROKER_ONLY, "controller.listener.names"), "controller.listener.names",
     "must contain at least one value when running KRaft with just the broker role"),
    ({**BROKER_ONLY, "listeners": "PLAINTEXT://h:1,CONTROLLER://h:2"}, "controller.listener.names",
     "must not contain a value appearing in the 'listeners' configuration when running KRaft "
     "with just the broker role"),
    ({**BROKER_ONLY, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"},
     "listener.security.protocol.map",
     "Controller listener with name CONTROLLER defined in controller.listener.names not found "
     "in listener.security.protocol.map"),
    ({**BROKER_ONLY,
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"},
     "listener.security.protocol.map", "Samsa's node client has no SASL"),
    ({**CONTROLLER_ONLY, "listeners": "CONTROLLER://h:1,PLAINTEXT://h:2"}, "listeners",
     "The listeners config must only contain KRaft controller listeners from "
     "controller.listener.names when process.roles=controller"),
    ({"controller.listener.names": "CONTROLLER"}, "controller.listener.names",
     "controller.listener.names must be empty when not running in KRaft mode"),
    ({"inter.broker.listener.name": "PLAINTEXT", "listeners": "INTERNAL://h:1",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"},
     "inter.broker.listener.name", "must be a listener name defined in advertised.listeners"),
    ({"replica.fetch.wait.max.ms": "40000"}, "replica.fetch.wait.max.ms",
     "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms"),
    ({"replica.fetch.wait.max.ms": "600", "replica.lag.time.max.ms": "500"},
     "replica.fetch.wait.max.ms",
     "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms"),
    ({"replica.selector.class": "com.example.NearestReplicaSelector"}, "replica.selector.class",
     "the only replica selector Samsa has is "
     "org.apache.kafka.common.replica.RackAwareReplicaSelector"),
]


@pytest.mark.parametrize(("properties", "key", "reason"), CROSS_KEY_RULES)
def test_cross_key_rules_name_the_key(properties: dict[str, str], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties(properties)
    assert caught.value.key == key
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_several_controller_listeners_on_a_broker_warn(caplog: pytest.LogCaptureFixture) -> None:
    properties = {**BROKER_ONLY, "controller.listener.names": "CONTROLLER,BACKUP"}
    assert kraft(properties).controller_listener_names == ("CONTROLLER", "BACKUP")
    assert "only the first will be used" in caplog.text


@pytest.mark.parametrize("index", [1, 2, 3])
def test_the_example_cluster_configs(index: int) -> None:
    config = BrokerConfig.load(ROOT / "conf" / "cluster" / f"node-{index}.properties")
    settings = config.kraft
    assert settings.is_combined and settings.node_id == config.node_id == index
    assert [voter.node_id for voter in settings.quorum.voters] == [1, 2, 3]
    assert settings.controller_endpoint(index) == ("127.0.0.1", 19191 + index)
    assert config.advertised_listeners == (Listener("PLAINTEXT", "127.0.0.1", 19091 + index),)
    assert settings.broker_rack == f"rack-{'abc'[index - 1]}"
    assert config.default_replication_factor == 3
    assert config.log_config.min_insync_replicas == 2
    assert settings.offsets_topic_replication_factor == 3
    assert settings.transaction_state_log_replication_factor == 3
    assert settings.transaction_state_log_min_isr == 2
    assert config.log_dirs == (Path(f"./data/cluster/node-{index}"),)


hosts = st.from_regex(r"[a-z][a-z0-9.\-]{0,20}", fullmatch=True)
voter_lists = st.lists(
    st.builds(QuorumVoter, st.integers(0, 2**31 - 1), hosts, st.integers(0, 65535)),
    max_size=5, unique_by=lambda voter: voter.node_id,
)


@settings(max_examples=50)
@given(voter_lists, st.sampled_from([",", ", ", " , "]))
def test_voters_round_trip_through_their_text(voters: list[QuorumVoter], separator: str) -> None:
    assert parse_voters("controller.quorum.voters", separator.join(map(str, voters))) == tuple(voters)


def test_the_rack_aware_replica_selector_is_accepted() -> None:
    selector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    config = BrokerConfig.from_properties({"replica.selector.class": f" {selector} "})
    assert config.kraft.replica.replica_selector_class == selector
