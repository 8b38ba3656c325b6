"""Samsa's share-group client against Apache Kafka 4.3.1, the oracle (share groups are on by
default there: the ``share.version`` feature is 1 from metadata version 4.2-IV0): two
``ShareConsumer`` members share a topic's records, RELEASE redelivers, unsubscribing releases,
explicit mode's rules, the group as ``AdminClient`` and ``samsa share-groups`` show it, and a
Samsa member sharing a group with Kafka's own share consumer — that one on a Samsa broker too.

Kafka's share group heartbeat interval (``group.share.heartbeat.interval.ms``, 5 s by
default) is set to 1 s, its minimum here, so that members are assigned partitions quickly.
The scenarios are in ``tests.integration.share_scenarios``; the same run against Samsa in
``tests/integration/test_samsa_share_consumer.py``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from compat.apache_kafka import TOOLS, ApacheKafka, java_command, run_tool
from samsa import ShareConsumer
from tests.integration import share_scenarios
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.conftest import TEST_HEAP
from tests.integration.kafka.tools import samsa_broker, table

# One Kafka JVM for the module (about 15 s to start): beyond the integration budget.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

FAST_SHARE_GROUPS = {"group.share.heartbeat.interval.ms": "1000",
                     "group.share.min.heartbeat.interval.ms": "1000"}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    node = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"), configs=FAST_SHARE_GROUPS,
                       heap=TEST_HEAP).start()
    yield node
    node.stop()


def test_two_members_share_every_record_once(kafka: ApacheKafka) -> None:
    share_scenarios.two_members_share_every_record_once(kafka.bootstrap, "shared", "two-members")


def test_release_redelivers_with_delivery_count_2(kafka: ApacheKafka) -> None:
    share_scenarios.release_redelivers_with_delivery_count_2(kafka.bootstrap, "released", "release")


def test_unsubscribe_releases_what_was_acquired(kafka: ApacheKafka) -> None:
    share_scenarios.unsubscribe_releases_what_was_acquired(kafka.bootstrap, "left", "left")


def test_explicit_mode_rules(kafka: ApacheKafka) -> None:
    share_scenarios.explicit_mode_rules(kafka.bootstrap, "explicit", "explicit")


def test_admin_and_cli_describe_the_group(kafka: ApacheKafka) -> None:
    share_scenarios.admin_and_cli_describe_the_group(kafka.bootstrap, "described", "described")


def test_samsa_and_kafkas_own_share_consumer_share_one_group(kafka: ApacheKafka) -> None:
    samsa_and_kafkas_own_share_consumer_share_one_group(kafka.bootstrap, "mixed", "mixed")


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with samsa_broker(tmp_path_factory.mktemp("samsa"),
                      **{"group.share.heartbeat.interval.ms": "1000"}) as broker:
        yield broker


def test_samsa_and_kafkas_own_share_consumer_share_one_group_on_samsa(samsa: BrokerProcess) -> None:
    samsa_and_kafkas_own_share_consumer_share_one_group(samsa.bootstrap, "mixed", "mixed")


def samsa_and_kafkas_own_share_consumer_share_one_group(bootstrap: str, topic: str,
                                                       group: str) -> None:
    """A Samsa ShareConsumer and Kafka's console share consumer (KafkaShareConsumer) in one
    group: the records are split between them, none twice; Kafka's kafka-share-groups and
    ``samsa share-groups`` both list the two members."""
    share_scenarios.prepare(bootstrap, topic, group, partitions=2)
    console = subprocess.Popen(
        java_command(TOOLS["kafka-console-share-consumer"], [
            "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
            "--timeout-ms", "15000"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                           fetch_max_wait_ms=200) as samsa:
            share_scenarios.wait_for_members(bootstrap, group, [samsa], count=2)
            # records first: the console consumer exits after 15 s without any
            produced = share_scenarios.produce(bootstrap, topic, 200, 2)
            members = table(run_tool("kafka-share-groups", "--bootstrap-server", bootstrap,
                                     "--describe", "--group", group, "--members",
                                     check=True).stdout)
            assert samsa.member_id in [row["CONSUMER-ID"] for row in members] and len(members) == 2
            ours = share_scenarios.cli(bootstrap, "--describe", "--group", group, "--members")
            assert {m["consumer_id"] for m in ours["members"]} == {r["CONSUMER-ID"] for r in members}
            values: list[bytes] = []
            while console.poll() is None:  # it exits 15 s after its last record
                values.extend(record.value for record in samsa.poll(0.2))
            assert all(error is None for error in samsa.commit_sync().values())
    finally:
        if console.poll() is None:
            console.kill()
        output, errors = console.communicate(timeout=30)
    theirs = [line.encode() for line in output.splitlines() if line.startswith("value-")]
    assert values and theirs, (len(values), len(theirs), errors[-2000:])
    assert sorted(values + theirs) == sorted(f"value-{i}".encode() for i in range(len(produced)))
