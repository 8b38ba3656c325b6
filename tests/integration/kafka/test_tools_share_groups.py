"""Apache Kafka's ``kafka-share-groups`` (4.3.1, through its main class) against a real Samsa
broker: a share group whose two members joined with raw ShareGroupHeartbeat requests is listed,
described (members and assignments; state, epochs and coordinator), reset to the earliest
offsets once its members left (AlterShareGroupOffsets), shown with those start offsets
(DescribeShareGroupOffsets); an Empty group is deleted and the listing shows what is left.
Seven JVM runs: marked slow."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.tools import create_topics, kafka, samsa_broker, table
from tests.integration.test_share_groups import heartbeat

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC, GROUP = "chores", "workers"


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with samsa_broker(tmp_path_factory.mktemp("samsa")) as broker:
        yield broker


def share_groups(samsa: BrokerProcess, *args: str) -> str:
    return kafka("kafka-share-groups", "--bootstrap-server", samsa.bootstrap, *args)


def test_list_describe_reset_and_delete_a_share_group(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, (TOPIC, 2))
    broker = SimpleNamespace(host=samsa.host, port=samsa.port)
    assert heartbeat(broker, GROUP, "member-1", 0, [TOPIC]).error_code == 0
    assert heartbeat(broker, GROUP, "member-2", 0, [TOPIC]).error_code == 0
    assert heartbeat(broker, GROUP, "member-1", 1).member_epoch == 2

    assert GROUP in share_groups(samsa, "--list").split()
    members = table(share_groups(samsa, "--describe", "--group", GROUP, "--members", "--verbose"))
    assert sorted((row["CONSUMER-ID"], row["#PARTITIONS"]) for row in members) == \
        [("member-1", "1"), ("member-2", "1")]
    assert sorted(row["ASSIGNMENT"] for row in members) == [f"{TOPIC}:0", f"{TOPIC}:1"]
    (state,) = table(share_groups(samsa, "--describe", "--group", GROUP, "--state", "--verbose"))
    assert (state["STATE"], state["GROUP-EPOCH"], state["#MEMBERS"]) == ("Stable", "2", "2")

    for member, epoch in (("member-1", 2), ("member-2", 2)):
        assert heartbeat(broker, GROUP, member, -1).error_code == 0, epoch
    reset = table(share_groups(samsa, "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
                               "--to-earliest", "--execute"))
    assert sorted((row["PARTITION"], row["NEW-OFFSET"]) for row in reset) == [("0", "0"), ("1", "0")]
    offsets = table(share_groups(samsa, "--describe", "--group", GROUP))
    assert sorted((row["PARTITION"], row["START-OFFSET"]) for row in offsets) == [("0", "0"), ("1", "0")]

    # (a group whose partitions have state is deleted the same way; that needs the share
    # coordinator's records of __share_group_state, so here a group that never had state)
    assert heartbeat(broker, "idle", "member-3", 0, [TOPIC]).error_code == 0
    assert heartbeat(broker, "idle", "member-3", -1).error_code == 0
    assert "was successful" in share_groups(samsa, "--delete", "--group", "idle")
    assert share_groups(samsa, "--list").split() == [GROUP]
