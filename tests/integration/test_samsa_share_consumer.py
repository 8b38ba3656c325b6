"""Samsa's share-group client against a Samsa broker: the scenarios of
``tests.integration.share_scenarios`` that pass against Apache Kafka 4.3.1
(tests/integration/kafka/test_share_consumer.py): two ``ShareConsumer`` members share a topic's
records, RELEASE redelivers with delivery count 2, explicit mode's rules, and the group as
``AdminClient`` and ``samsa share-groups`` show it. One broker for the module, its share
groups' heartbeat interval 1 s (Kafka's default, 5 s, would make each join take seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import share_scenarios
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory: Path = tmp_path_factory.mktemp("samsa-share")
    broker = BrokerProcess(log_dir=directory / "logs",
                           overrides={"group.share.heartbeat.interval.ms": "1000"},
                           stderr_path=directory / "broker.log").start()
    try:
        yield broker
    finally:
        if broker.alive():
            code = broker.stop()
            assert code == 0, f"broker exited with {code}\n{broker.log()[-3000:]}"


def test_two_members_share_every_record_once(samsa: BrokerProcess) -> None:
    share_scenarios.two_members_share_every_record_once(samsa.bootstrap, "shared", "two-members")


def test_release_redelivers_with_delivery_count_2(samsa: BrokerProcess) -> None:
    share_scenarios.release_redelivers_with_delivery_count_2(samsa.bootstrap, "released", "release")


def test_unsubscribe_releases_what_was_acquired(samsa: BrokerProcess) -> None:
    share_scenarios.unsubscribe_releases_what_was_acquired(samsa.bootstrap, "left", "left")


def test_explicit_mode_rules(samsa: BrokerProcess) -> None:
    share_scenarios.explicit_mode_rules(samsa.bootstrap, "explicit", "explicit")


def test_admin_and_cli_describe_the_group(samsa: BrokerProcess) -> None:
    share_scenarios.admin_and_cli_describe_the_group(samsa.bootstrap, "described", "described")
