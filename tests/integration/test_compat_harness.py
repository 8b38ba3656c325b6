"""The harness of ``make compat`` tested against a deliberately broken broker.

The real harness (``python -m compat.run``) runs a small selection of a peer suite against a
real Samsa broker, once as it is (it must pass: exit 0) and once broken from outside by
``compat.fault_proxy`` (``--fault API_KEY=ERROR_CODE``: that API answers with that error), where
it must exit 1 and name the failed test. No broker code is changed for it. The kafka-python
sdist is downloaded into ``.cache/compat/`` on first use (pip); librdkafka's case needs its
build (``.cache/compat``, ~8 min the first time) and is marked slow.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compat import skips
from compat.librdkafka_suite import BROKER_SETTINGS
from compat.samsa_broker import SamsaBroker
from compat.samsa_cluster import SamsaCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HARNESS_TIMEOUT_SECONDS = 600
TRANSACTIONAL_PRODUCER = "test_producer_integration.py::test_transactional_producer_messages"
GROUP_CONSUMER = "test_consumer_integration.py::test_kafka_consumer__offset_commit_resume"
INIT_PRODUCER_ID, JOIN_GROUP = 22, 11
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 53, 30


def test_the_facts_the_skip_table_is_checked_against_come_from_the_running_broker(
        tmp_path: Path) -> None:
    broker = SamsaBroker(tmp_path / "broker.log").start()
    try:
        facts = broker.facts(quick_mode=True)
    finally:
        assert broker.stop() == 0
    assert INIT_PRODUCER_ID in facts.api_versions and JOIN_GROUP in facts.api_versions
    assert facts.kafka_version >= (4, 0)
    assert not facts.message_format_v1  # Produce v2 is answered UNSUPPORTED_VERSION
    assert {"SSL", "SASL_SSL"} <= facts.security_protocols and facts.quick_mode  # TLS listeners


@pytest.mark.cluster
def test_a_three_node_cluster_is_formed_and_its_facts_say_followers_hold_the_data(
        tmp_path: Path) -> None:
    """``--brokers 3``'s cluster (three nodes, then the replication probe: a follower holds
    the probe's record), so the skips that need replicated data run."""
    cluster = SamsaCluster(tmp_path, "cluster", dict(BROKER_SETTINGS)).start()
    try:
        assert len(cluster.bootstrap.split(",")) == 3
        facts = cluster.facts(quick_mode=True)
    finally:
        assert cluster.stop() == 0
    assert facts.brokers == 3 and facts.replicates_data
    assert sorted(path.name for path in tmp_path.glob("cluster-node-*.log")) == [
        "cluster-node-0.log", "cluster-node-1.log", "cluster-node-2.log"]
    assert "0101_fetch_from_follower" not in skips.applicable(skips.LIBRDKAFKA, facts)


def harness(results: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compat.run", "--results", str(results),
                           *arguments], cwd=ROOT, capture_output=True, text=True,
                          timeout=HARNESS_TIMEOUT_SECONDS)


@pytest.mark.parametrize(("test", "fault", "error"), [
    (TRANSACTIONAL_PRODUCER, f"{INIT_PRODUCER_ID}={TRANSACTIONAL_ID_AUTHORIZATION_FAILED}",
     "TransactionalIdAuthorizationFailedError"),
    (GROUP_CONSUMER, f"{JOIN_GROUP}={GROUP_AUTHORIZATION_FAILED}",
     "GroupAuthorizationFailedError"),
])
def test_kafka_python_passes_against_samsa_and_fails_when_an_api_is_broken(
        tmp_path: Path, test: str, fault: str, error: str) -> None:
    selection = ["--suite", "kafka-python", "--kafka-python-tests", test]
    healthy = harness(tmp_path / "healthy", *selection)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.rstrip().endswith("compat: 1 passed, 0 failed, 0 skipped")

    broken = harness(tmp_path / "broken", *selection, "--fault", fault)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    name = test.replace(".py", "")
    assert f"  {name}: failed: " in broken.stdout
    assert error in broken.stdout
    assert broken.stdout.rstrip().endswith("compat: 0 passed, 1 failed, 0 skipped")


@pytest.mark.slow
def test_librdkafka_passes_against_samsa_and_fails_when_a_group_api_is_broken(
        tmp_path: Path) -> None:
    """0018_cgrp_term in full mode (quick mode skips its sub-tests): two consumers in a group.
    With JoinGroup refused librdkafka keeps retrying, so the test fails on its own timeout
    (110 s)."""
    selection = ["--suite", "librdkafka", "--mode", "full", "--tests", "0018"]
    healthy = harness(tmp_path / "healthy", *selection)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.rstrip().endswith("compat: 1 passed, 0 failed, 0 skipped")

    broken = harness(tmp_path / "broken", *selection,
                     "--fault", f"{JOIN_GROUP}={GROUP_AUTHORIZATION_FAILED}")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "  0018_cgrp_term: failed: " in broken.stdout
