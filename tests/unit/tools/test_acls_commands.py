"""``samsa acls``: options (kafka-acls.sh's) -> plan, pure (no broker, no socket)."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from samsa.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tools.acls_commands import AclPlan, UsageError, binding_row, plan_acls, run_acls
from tools.cli import build_parser, main

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", *argv])


def plan(*argv: str) -> AclPlan:
    return plan_acls(parse(*argv))


def binding(kind: ResourceType, name: str, principal: str, operation: AclOperation,
            permission: AclPermissionType, host: str = "*",
            pattern_type: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


def test_librdkafkas_deny_command_makes_one_acl() -> None:
    argv = ["--bootstrap-server", "127.0.0.1:9092", "--add", "--deny-principal", "User:*",
            "--operation", "All", "--deny-host", "*", "--topic", "t1"]
    planned = plan(*argv)
    assert planned.action == "add"
    assert planned.bindings() == [binding(TOPIC, "t1", "User:*", AclOperation.ALL, DENY)]


def test_every_principal_operation_and_host_combination_on_every_resource() -> None:
    found = plan("--add", "--allow-principal", "User:a", "--allow-principal", "User:b",
                 "--operation", "Read", "--operation", "describe", "--allow-host", "h1",
                 "--allow-host", "h2", "--topic", "t", "--group", "g").bindings()
    assert len(found) == 2 * 2 * 2 * 2
    assert binding(GROUP, "g", "User:b", AclOperation.DESCRIBE, ALLOW, "h2") in found


def test_hosts_default_to_the_wildcard_and_the_operation_to_all() -> None:
    assert plan("--add", "--allow-principal", "User:a", "--deny-principal", "User:b",
                "--cluster").bindings() == [
        binding(CLUSTER, "kafka-cluster", "User:a", AclOperation.ALL, ALLOW),
        binding(CLUSTER, "kafka-cluster", "User:b", AclOperation.ALL, DENY)]


def test_producer_and_consumer_roles_as_kafka_acls_defines_them() -> None:
    found = plan("--add", "--allow-principal", "User:app", "--producer", "--consumer",
                 "--idempotent", "--topic", "t", "--group", "g", "--transactional-id", "x"
                 ).bindings()
    by_resource: dict[tuple[ResourceType, str], set[AclOperation]] = {}
    for b in found:
        by_resource.setdefault((b.pattern.resource_type, b.pattern.name), set()).add(
            b.entry.operation)
    o = AclOperation
    assert by_resource == {
        (TOPIC, "t"): {o.WRITE, o.DESCRIBE, o.CREATE, o.READ},
        (GROUP, "g"): {o.READ},
        (ResourceType.TRANSACTIONAL_ID, "x"): {o.WRITE, o.DESCRIBE},
        (CLUSTER, "kafka-cluster"): {o.IDEMPOTENT_WRITE}}
    assert {b.entry.permission_type for b in found} == {ALLOW}


def test_prefixed_pattern() -> None:
    [added] = plan("--add", "--allow-principal", "User:a", "--operation", "Write",
                   "--topic", "logs-", "--resource-pattern-type", "prefixed").bindings()
    assert added.pattern.pattern_type == PatternType.PREFIXED


def test_remove_without_principals_deletes_every_acl_of_the_resources() -> None:
    planned = plan("--remove", "--force", "--topic", "t", "--resource-pattern-type", "match")
    assert planned.filters() == [AclBindingFilter(
        ResourcePatternFilter(TOPIC, "t", PatternType.MATCH), AccessControlEntryFilter())]


def test_remove_with_principals_deletes_exactly_those_acls() -> None:
    planned = plan("--remove", "--force", "--allow-principal", "User:*", "--operation",
                   "Describe", "--topic", "t")
    assert planned.filters() == [
        binding(TOPIC, "t", "User:*", AclOperation.DESCRIBE, ALLOW).to_filter()]


def test_list_filters_and_principals() -> None:
    assert plan("--list").filters() == []
    listed = plan("--list", "--topic", "t", "--principal", "User:a")
    assert listed.principals == ("User:a",)
    assert listed.filters() == [AclBindingFilter(ResourcePatternFilter(TOPIC, "t",
                                                                       PatternType.LITERAL))]


@pytest.mark.parametrize(("argv", "message"), [
    (["--add", "--topic", "t"], "--allow-principal or --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "at least one resource"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type",
      "match"], "literal or prefixed"),
    (["--add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"],
     "TOPIC supports only the operations"),
    (["--add", "--allow-principal", "User:a", "--producer"], "with --producer give a --topic"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"],
     "with --consumer give a --topic and a --group"),
    (["--add", "--deny-principal", "User:a", "--producer", "--topic", "t"], "take no"),
    (["--add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"], "--producer"),
    (["--remove", "--principal", "User:a", "--topic", "t"], "--list only"),
    (["--list", "--allow-principal", "User:a"], "--list takes resources"),
])
def test_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan(*argv)


@pytest.mark.parametrize("argv", [
    ["--add", "--allow-principal", "alice", "--topic", "t"],
    ["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
    ["--list", "--resource-pattern-type", "regex"],
    ["--add", "--list"],
    ["--topic", "t"],
])
def test_bad_values_are_argparse_usage_errors(argv: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == 2


def test_usage_error_exits_2_naming_the_problem(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acls", "--add", "--topic", "t"]) == 2
    assert "samsa acls: error: give --allow-principal" in capsys.readouterr().err


def test_remove_without_force_off_a_terminal_is_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert run_acls(parse("--remove", "--topic", "t")) == 2
    assert "add --force" in capsys.readouterr().err


def test_binding_row_uses_kafkas_enum_names() -> None:
    row = binding_row(binding(TOPIC, "t", "User:a", AclOperation.IDEMPOTENT_WRITE, DENY))
    assert json.loads(json.dumps(row)) == {
        "resource_type": "TOPIC", "name": "t", "pattern_type": "LITERAL",
        "principal": "User:a", "host": "*", "operation": "IDEMPOTENT_WRITE",
        "permission_type": "DENY"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_remove_on_a_terminal_asks_and_a_no_removes_nothing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    assert run_acls(parse("--remove", "--topic", "t")) == 0
    err = capsys.readouterr().err
    assert "Remove the ACLs these filters match?" in err and "TOPIC 't'" in err
    assert "Nothing removed." in err
