"""The reviewed skip table (compat/skips.py): every reason is re-checked against the facts of the
run, so an entry stops applying as soon as its condition no longer holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compat import skips
from compat.samsa_broker import gather_facts
from compat.skips import (
    AssumesOneBroker,
    Facts,
    NeedsApi,
    NeedsBrokers,
    NeedsJavaTools,
    NeedsKafkaVersion,
    NeedsReplicatedData,
    NeedsSecurity,
    OlderKafkaOnly,
    QuickMode,
    Reason,
    RemovedInKafka,
    Skip,
)

FACTS = Facts(api_versions={0: (3, 11), 18: (0, 4)}, kafka_version=(4, 0),
              security_protocols=frozenset({"PLAINTEXT", "SASL_PLAINTEXT"}),
              sasl_mechanisms=frozenset({"PLAIN", "SCRAM-SHA-512"}))


@pytest.mark.parametrize(("reason", "holds", "no_longer"), [
    (NeedsApi(45, 46), FACTS, replace(FACTS, api_versions={45: (0, 0), 46: (0, 0)})),
    (RemovedInKafka("message format v1", "4.0"), FACTS,
     replace(FACTS, message_format_v1=True)),
    (NeedsSecurity("listener", "SSL"), FACTS,
     replace(FACTS, security_protocols=frozenset({"SSL"}))),
    (NeedsSecurity("SASL mechanism", "OAUTHBEARER"), FACTS,
     replace(FACTS, sasl_mechanisms=frozenset({"OAUTHBEARER"}))),
    (NeedsBrokers(3, "racks"), FACTS, replace(FACTS, brokers=3)),
    (AssumesOneBroker("one poll"), replace(FACTS, brokers=3), FACTS),
    (NeedsReplicatedData("follower fetching"), replace(FACTS, brokers=3),
     replace(FACTS, brokers=3, replicates_data=True)),
    (NeedsJavaTools("a Java producer"), FACTS, replace(FACTS, java_tools=True)),
    (QuickMode(), replace(FACTS, quick_mode=True), FACTS),
    (NeedsKafkaVersion((4, 1), "v1"), FACTS, replace(FACTS, kafka_version=(4, 1))),
    (OlderKafkaOnly((0, 10, 1), "old"), FACTS, replace(FACTS, kafka_version=(0, 10))),
])
def test_each_reason_applies_only_while_its_condition_holds(
        reason: Reason, holds: Facts, no_longer: Facts) -> None:
    assert reason.applies(holds)
    assert not reason.applies(no_longer)
    assert reason.describe()


def test_a_needs_api_skip_is_dropped_once_the_api_is_advertised() -> None:
    table = (Skip(skips.KAFKA_PYTHON, "admin::test_reassign", NeedsApi(45)),
             Skip(skips.LIBRDKAFKA, "0001_other_suite", NeedsApi(45)))
    assert skips.applicable(skips.KAFKA_PYTHON, FACTS, table) == {
        "admin::test_reassign": "needs AlterPartitionReassignments (key 45), not advertised in "
                                "ApiVersions"}
    advertised = replace(FACTS, api_versions={**FACTS.api_versions, 45: (0, 0)})
    assert skips.applicable(skips.KAFKA_PYTHON, advertised, table) == {}
    assert skips.entries(skips.KAFKA_PYTHON, table) == ["admin::test_reassign"]


def test_the_table_names_each_need_of_a_test_once_for_a_known_suite() -> None:
    keys = [(entry.suite, entry.test, type(entry.reason)) for entry in skips.TOLERATED_SKIPS]
    assert len(keys) == len(set(keys))
    assert {suite for suite, _, _ in keys} == {skips.KAFKA_PYTHON, skips.LIBRDKAFKA}
    assert skips.entries(skips.LIBRDKAFKA).count("0101_fetch_from_follower") == 1


def test_a_test_with_several_needs_is_skipped_for_those_that_hold_now() -> None:
    def reason(facts: Facts) -> str | None:
        return skips.applicable(skips.LIBRDKAFKA, facts).get("0101_fetch_from_follower")

    one_node = reason(FACTS)
    assert one_node is not None and "needs 3 brokers" in one_node
    assert "replicated to the followers" in one_node
    cluster = reason(replace(FACTS, brokers=3))
    assert cluster == NeedsReplicatedData("rack-aware fetching from a follower, KIP-392"
                                          ).describe()
    assert reason(replace(FACTS, brokers=3, replicates_data=True)) is None


def test_a_cluster_changes_only_the_entries_about_brokers() -> None:
    one_node = {suite: skips.applicable(suite, FACTS)
                for suite in (skips.KAFKA_PYTHON, skips.LIBRDKAFKA)}
    cluster = {suite: skips.applicable(suite, replace(FACTS, brokers=3))
               for suite in (skips.KAFKA_PYTHON, skips.LIBRDKAFKA)}
    changed = {test for suite in one_node for test in one_node[suite].keys() | cluster[suite].keys()
               if one_node[suite].get(test) != cluster[suite].get(test)}
    assert changed == {"0101_fetch_from_follower", "test_admin_integration::test_delete_records",
                       "test_admin_integration::test_alter_replica_log_dirs"}
    assert "test_admin_integration::test_delete_records" not in one_node[skips.KAFKA_PYTHON]


def test_partition_reassignment_is_no_longer_skipped() -> None:
    """The controller serves AlterPartitionReassignments / ListPartitionReassignments (44655fc
    dropped their entries): kafka-python's two reassignment tests run."""
    names = skips.entries(skips.KAFKA_PYTHON)
    assert "test_admin_integration::test_alter_partition_reassignments" not in names
    assert "test_admin_integration::test_list_partition_reassignments" not in names


def test_the_facts_come_from_the_brokers_own_config_validation() -> None:
    facts = gather_facts({0: (3, 11), 1: (4, 17), 2: (1, 10)}, quick_mode=True)
    assert facts.security_protocols == {"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"}
    assert {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} <= facts.sasl_mechanisms
    assert "OAUTHBEARER" not in facts.sasl_mechanisms
    assert facts.quick_mode and not facts.java_tools
    assert facts.kafka_version < (4, 1)
