"""Metadata snapshots end to end: a broker with a tiny snapshot threshold writes
``__cluster_metadata-0/<offset>-<epoch>.checkpoint`` files while confluent-kafka's AdminClient
creates topics, configs, ACLs and SCRAM users; old snapshots and segments go; after a restart
(loading the snapshot) everything is still there."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from replication.metadata.snapshot import parse_snapshot_path, read_snapshot

pytestmark = pytest.mark.integration

TIMEOUT = 15
SETTINGS = {
    "metadata.log.max.snapshot.interval.ms": "0",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "metadata.log.segment.min.bytes": "1024",
    "metadata.log.segment.bytes": "2048",
    "metadata.max.retention.bytes": "1",
}


def wait_for(condition: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def snapshots(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.checkpoint") if parse_snapshot_path(p) is not None)


def create_topics(client: AdminClient, names: list[str]) -> None:
    new = [NewTopic(name, 2, 1, config={"retention.ms": "123456"}) for name in names]
    for future in client.create_topics(new, request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)


def acl(name: str) -> AclBinding:
    """An ACL on a topic that does not exist (one on a listed topic would hide it from
    ANONYMOUS: allow.everyone.if.no.acl.found no longer applies to it)."""
    return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)


def test_snapshots_are_written_cleaned_and_loaded(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**SETTINGS)
    directory = broker.log_dir / "__cluster_metadata-0"
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topics(client, [f"early-{n}" for n in range(30)])
    wait_for(lambda: snapshots(directory))
    for future in client.create_acls([acl("guarded-1"), acl("guarded-2")], request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)
    futures = client.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret")])
    for future in futures.values():
        assert future.result(TIMEOUT) is None
    broker_config = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([broker_config])[broker_config].result(TIMEOUT)
    create_topics(client, [f"late-{n}" for n in range(30)])  # the next snapshots hold all of it

    # Old segments and snapshots go (metadata.max.retention.bytes=1): the first segment is
    # removed and only the latest snapshot stays, with a log start offset at its end offset.
    wait_for(lambda: not (directory / "00000000000000000000.log").exists())
    latest = wait_for(lambda: len(snapshots(directory)) == 1 and snapshots(directory))[0]
    loaded = read_snapshot(latest)
    assert any(getattr(r, "name", None) == "alice" for r in loaded.records)

    broker.restart()
    assert f"loaded metadata: {latest.name}" in broker.log()
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = client.list_topics(timeout=TIMEOUT).topics
    expected = {f"early-{n}" for n in range(30)} | {f"late-{n}" for n in range(30)}
    assert expected <= set(topics)
    assert all(len(topics[name].partitions) == 2 for name in expected)
    resource = ConfigResource("topic", "early-7")
    configs = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["retention.ms"].value == "123456"
    node = ConfigResource("broker", "1")
    assert client.describe_configs([node])[node].result(TIMEOUT)["log.retention.ms"].value == "86400000"
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    found = client.describe_acls(everything, request_timeout=TIMEOUT).result(TIMEOUT)
    assert sorted(binding.name for binding in found) == ["guarded-1", "guarded-2"]
    described = client.describe_user_scram_credentials(["alice"])["alice"].result(TIMEOUT)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]
    create_topics(client, ["after-restart"])  # appends carry on after the loaded snapshot
    assert "after-restart" in client.list_topics(timeout=TIMEOUT).topics


def test_a_snapshot_is_written_after_the_interval_with_new_records(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"metadata.log.max.snapshot.interval.ms": "300"})
    directory = broker.log_dir / "__cluster_metadata-0"
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topics(client, ["timed"])
    path = wait_for(lambda: snapshots(directory))[0]
    assert "300 ms passed" in broker.log()
    assert any(getattr(r, "name", None) == "timed" for r in read_snapshot(path).records)
