"""Samsa's share-group client against Apache Kafka 4.3.1, the oracle (share groups are on by
default there: the ``share.version`` feature is 1 from metadata version 4.2-IV0): two
``ShareConsumer`` members share a topic's records, RELEASE redelivers, explicit mode's rules,
and the group as ``AdminClient`` and ``samsa share-groups`` show it.

Kafka's share group heartbeat interval (``group.share.heartbeat.interval.ms``, 5 s by
default) is set to 1 s, its minimum here, so that members are assigned partitions quickly.
The scenarios are in ``tests.integration.share_scenarios``; the same run against Samsa in
``tests/integration/test_samsa_share_consumer.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat.apache_kafka import ApacheKafka
from tests.integration import share_scenarios
from tests.integration.kafka.conftest import TEST_HEAP

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
