"""``samsa acls (--add | --remove | --list) ...``: kafka-acls.sh's options and meaning.

- Resources: ``--topic T``, ``--group G``, ``--transactional-id X``, ``--delegation-token D``,
  ``--user-principal U`` (each repeatable), ``--cluster``; ``--resource-pattern-type``
  ``literal`` (default) or ``prefixed``, and for ``--list``/``--remove`` also ``any`` (any
  pattern, the name exactly) or ``match`` (every pattern that applies to the name).
- Entries: ``--allow-principal P`` / ``--deny-principal P`` ("User:alice", "User:*";
  repeatable), ``--allow-host`` / ``--deny-host`` (default ``*`` once a principal is given),
  ``--operation OP`` (Kafka's names: Read, Write, Create, Delete, Alter, Describe,
  ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
  DescribeTokens, All; repeatable; default All). Every principal x operation x host
  combination becomes one ACL on each resource.
- ``--producer`` (Write, Describe, Create on the topics; Write, Describe on the transactional
  ids; with ``--idempotent`` IdempotentWrite on the cluster) and ``--consumer`` (Read,
  Describe on the topics, Read on the groups), as kafka-acls.sh defines them; they take the
  allow options only.
- ``--list [--principal P ...]``: the ACLs of the resources (all ACLs without one), only those
  of the principals if given. ``--remove``: the ACLs given, or every ACL of the resources when
  no principal is given; asks for confirmation on a terminal, and needs ``--force`` otherwise.

Output: an aligned table (one row per ACL), or with ``--json`` ``{"added"|"removed"|"acls":
[{resource_type, name, pattern_type, principal, host, operation, permission_type}, ...]}``
in Kafka's enum names. Exit codes: 0 done, 1 the broker
or the connection failed (one line on stderr), 2 usage. The planning (``plan_acls``) is a
pure function of the parsed options. The options are kafka-acls.sh's (Apache Kafka's own tool
serves as ``kafka-acls.sh`` for the peer suites: ``compat/kafka_home.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from tools.admin_support import open_admin, usage_error
from tools.client_options import add_client_options, emit

__all__ = ["AclPlan", "UsageError", "add_acl_options", "binding_row", "plan_acls", "register",
           "run_acls"]

CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name, as Kafka names it
WILDCARD_HOST = "*"
COLUMNS = ["resource_type", "name", "pattern_type", "principal", "host", "operation",
           "permission_type"]


def _operations(*names: str) -> frozenset[AclOperation]:
    return frozenset(AclOperation[name] for name in names)


# Kafka's AclEntry.supportedOperations (All goes with every type).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: _operations("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER",
                                    "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    ResourceType.GROUP: _operations("READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS",
                                    "ALTER_CONFIGS"),
    ResourceType.CLUSTER: _operations("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                                      "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"),
    ResourceType.TRANSACTIONAL_ID: _operations("DESCRIBE", "WRITE"),
    ResourceType.DELEGATION_TOKEN: _operations("DESCRIBE"),
    ResourceType.USER: _operations("CREATE_TOKENS", "DESCRIBE_TOKENS"),
}
# What --producer (--idempotent) and --consumer stand for, per resource type (kafka-acls.sh).
PRODUCER_OPERATIONS = {ResourceType.TOPIC: _operations("WRITE", "DESCRIBE", "CREATE"),
                       ResourceType.TRANSACTIONAL_ID: _operations("WRITE", "DESCRIBE")}
IDEMPOTENT_OPERATIONS = {ResourceType.CLUSTER: _operations("IDEMPOTENT_WRITE")}
CONSUMER_OPERATIONS = {ResourceType.TOPIC: _operations("READ", "DESCRIBE"),
                       ResourceType.GROUP: _operations("READ")}
RESOURCE_OPTIONS = (("topic", ResourceType.TOPIC), ("consumer_group", ResourceType.GROUP),
                    ("transactional_id", ResourceType.TRANSACTIONAL_ID),
                    ("delegation_token", ResourceType.DELEGATION_TOKEN),
                    ("user_principal", ResourceType.USER))


class UsageError(ValueError):
    """Options that do not make a command (exit code 2)."""


def register(groups: Any) -> None:
    parser = groups.add_parser("acls", help="add, list, remove ACLs (kafka-acls.sh's options)",
                               description="Add, list or remove ACLs, as kafka-acls.sh does.")
    add_acl_options(parser)
    add_client_options(parser)
    parser.set_defaults(handler=run_acls)


def _operation(text: str) -> AclOperation:
    try:
        operation = AclOperation.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise argparse.ArgumentTypeError(f"{text!r} is not an operation one can allow or deny")
    return operation


def _pattern_type(text: str) -> PatternType:
    try:
        pattern_type = PatternType.parse(text)
    except ValueError:
        pattern_type = PatternType.UNKNOWN
    if pattern_type == PatternType.UNKNOWN:
        raise argparse.ArgumentTypeError(
            f"unknown resource pattern type {text!r}: literal, prefixed, match or any")
    return pattern_type


def _principal(text: str) -> str:
    kind, separator, name = text.strip().partition(":")
    if not separator or not kind or not name:
        raise argparse.ArgumentTypeError(
            f"a principal is Type:name, e.g. User:alice or User:*; got {text!r}")
    return f"{kind}:{name}"


def add_acl_options(parser: argparse.ArgumentParser) -> None:
    """kafka-acls.sh's options (all but the connection ones) on ``parser``."""
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    resources = parser.add_argument_group("resources")
    resources.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                           help="a topic ('*': every topic; repeatable)")
    resources.add_argument("--group", dest="consumer_group", action="append", default=[],
                           metavar="GROUP",
                           help="a consumer group ('*': every group; repeatable)")
    resources.add_argument("--cluster", action="store_true", help="the cluster")
    resources.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                           help="a transactional id ('*': every one; repeatable)")
    resources.add_argument("--delegation-token", action="append", default=[], metavar="TOKEN",
                           help="a delegation token (repeatable)")
    resources.add_argument("--user-principal", action="append", default=[], metavar="USER",
                           help="a user principal as a resource (repeatable)")
    resources.add_argument("--resource-pattern-type", type=_pattern_type,
                           default=PatternType.LITERAL, metavar="TYPE",
                           help="literal (default) or prefixed; match or any for --list and "
                                "--remove")
    entries = parser.add_argument_group("entries")
    for verb in ("allow", "deny"):
        entries.add_argument(f"--{verb}-principal", action="append", default=[],
                             type=_principal, metavar="TYPE:NAME",
                             help=f"a principal to {verb}, e.g. User:alice (repeatable)")
        entries.add_argument(f"--{verb}-host", action="append", default=[], metavar="HOST",
                             help=f"a host the {verb}ed principals act from (default *)")
    entries.add_argument("--operation", action="append", default=[], type=_operation,
                         metavar="OP", help="Read, Write, Describe, All, IdempotentWrite, ... "
                                            "(repeatable; default All)")
    entries.add_argument("--principal", action="append", default=[], type=_principal,
                         metavar="TYPE:NAME", help="with --list: only this principal's ACLs")
    entries.add_argument("--producer", action="store_true",
                         help="the ACLs a producer needs on the topics / transactional ids")
    entries.add_argument("--idempotent", action="store_true",
                         help="with --producer: also IdempotentWrite on the cluster")
    entries.add_argument("--consumer", action="store_true",
                         help="the ACLs a consumer needs on the topics and groups")
    parser.add_argument("--force", action="store_true", help="remove without asking")


# --- planning (pure) -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AclPlan:
    """What a command does: ``entries`` per resource filter (empty: every entry)."""

    action: str  # "add", "remove", "list"
    entries: dict[ResourcePatternFilter, frozenset[AccessControlEntry]] = field(
        default_factory=dict)
    principals: tuple[str, ...] = ()

    def bindings(self) -> list[AclBinding]:
        return sorted((AclBinding(ResourcePattern(f.resource_type, f.name or "",
                                                  f.pattern_type), entry)
                       for f, entries in self.entries.items() for entry in entries), key=_order)

    def filters(self) -> list[AclBindingFilter]:
        """The delete/describe filters: one per entry, or one per resource without entries."""
        found: list[AclBindingFilter] = []
        for pattern_filter, entries in self.entries.items():
            if not entries:
                found.append(AclBindingFilter(pattern_filter, AccessControlEntryFilter()))
            found += [AclBindingFilter(pattern_filter, e.to_filter())
                      for e in sorted(entries, key=str)]
        return found


def _resource_filters(args: argparse.Namespace, required: bool) -> list[ResourcePatternFilter]:
    pattern_type: PatternType = args.resource_pattern_type
    found = [ResourcePatternFilter(kind, name.strip(), pattern_type)
             for option, kind in RESOURCE_OPTIONS for name in getattr(args, option)]
    if args.cluster or args.idempotent:
        found.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME,
                                           PatternType.LITERAL))
    if required and not found:
        raise UsageError("give at least one resource: --topic, --group, --cluster, "
                         "--transactional-id, --delegation-token or --user-principal")
    return list(dict.fromkeys(found))


def _entries(args: argparse.Namespace, operations: Iterable[AclOperation]
             ) -> frozenset[AccessControlEntry]:
    found = set()
    for permission, verb in ((AclPermissionType.ALLOW, "allow"), (AclPermissionType.DENY, "deny")):
        principals = getattr(args, f"{verb}_principal")
        hosts = [h.strip() for h in getattr(args, f"{verb}_host")] or [WILDCARD_HOST]
        found |= {AccessControlEntry(p, h, o, permission)
                  for p in principals for o in operations for h in hosts}
    return frozenset(found)


def _role_entries(args: argparse.Namespace, filters: list[ResourcePatternFilter]
                  ) -> dict[ResourcePatternFilter, frozenset[AccessControlEntry]]:
    """What ``--producer`` and ``--consumer`` stand for on each resource."""
    tables = [table for wanted, table in ((args.producer, PRODUCER_OPERATIONS),
                                          (args.producer and args.idempotent,
                                           IDEMPOTENT_OPERATIONS),
                                          (args.consumer, CONSUMER_OPERATIONS)) if wanted]
    entries = {}
    for resource in filters:
        operations = frozenset().union(*(t.get(resource.resource_type, ()) for t in tables))
        if operations:
            entries[resource] = _entries(args, operations)
    return entries


def _check_options(args: argparse.Namespace, action: str) -> None:
    role = args.producer or args.consumer
    if action == "list" and (role or args.allow_principal or args.deny_principal
                             or args.allow_host or args.deny_host):
        raise UsageError("--list takes resources and --principal only")
    if role and (args.operation or args.deny_principal or args.deny_host):
        raise UsageError("--producer and --consumer take no --operation, --deny-principal "
                         "or --deny-host")
    if args.principal and action != "list":
        raise UsageError("--principal is for --list only")
    if args.producer and not args.topic:
        raise UsageError("with --producer give a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("--idempotent goes with --producer")
    if args.consumer and (not args.topic or not args.consumer_group or (
            not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("with --consumer give a --topic and a --group, and no --cluster or "
                         "--transactional-id")
    pattern_type: PatternType = args.resource_pattern_type
    if action == "add" and pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(f"--resource-pattern-type {pattern_type.name.lower()} is for --list "
                         "and --remove; ACLs are added as literal or prefixed")


def _check_operations(entries: dict[ResourcePatternFilter, frozenset[AccessControlEntry]]
                      ) -> None:
    for resource, acls in entries.items():
        valid = SUPPORTED_OPERATIONS.get(resource.resource_type, frozenset()) | {AclOperation.ALL}
        wrong = sorted({a.operation for a in acls} - valid)
        if wrong:
            names = ", ".join(o.kafka_name for o in sorted(valid))
            raise UsageError(f"{resource.resource_type.name} supports only the operations "
                             f"{names}; not {', '.join(o.kafka_name for o in wrong)}")


def plan_acls(args: argparse.Namespace) -> AclPlan:
    """The command the parsed options describe (``UsageError`` when they describe none)."""
    action = "add" if args.add else "remove" if args.remove else "list"
    _check_options(args, action)
    filters = _resource_filters(args, required=action != "list")
    if action == "list":
        return AclPlan(action, dict.fromkeys(filters, frozenset()),
                       tuple(dict.fromkeys(args.principal)))
    if args.producer or args.consumer:
        entries = _role_entries(args, filters)
    else:
        entries = dict.fromkeys(filters, _entries(args, args.operation or [AclOperation.ALL]))
    _check_operations(entries)
    if action == "add" and not all(entries.values()):
        raise UsageError("give --allow-principal or --deny-principal to add ACLs")
    return AclPlan(action, entries)


# --- running ---------------------------------------------------------------------------------

def _order(binding: AclBinding) -> tuple[Any, ...]:
    p, e = binding.pattern, binding.entry
    return (p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation,
            e.permission_type)


def binding_row(binding: AclBinding) -> dict[str, str]:
    """One ACL as a table row and a JSON object (Kafka's enum names)."""
    p, e = binding.pattern, binding.entry
    return {"resource_type": p.resource_type.name, "name": p.name,
            "pattern_type": p.pattern_type.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permission_type": e.permission_type.name}


def _confirmed(args: argparse.Namespace, plan: AclPlan) -> bool:
    if args.force:
        return True
    if not sys.stdin.isatty():
        raise UsageError("--remove asks for confirmation, and stdin is not a terminal: "
                         "add --force")
    described = "\n".join(f"  {f}" for f in plan.filters())
    print(f"Remove the ACLs these filters match?\n{described}\n(y/n) ", end="",
          file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _emit_bindings(args: argparse.Namespace, key: str, bindings: Sequence[AclBinding]) -> None:
    rows = [binding_row(b) for b in sorted(dict.fromkeys(bindings), key=_order)]
    if args.json:
        print(json.dumps({key: rows}, indent=2))
    elif rows:
        emit(args, rows, COLUMNS)
    else:
        print("No ACLs found." if key == "acls" else f"No ACLs {key}.")


def run_acls(args: argparse.Namespace) -> int:
    try:
        plan = plan_acls(args)
        if plan.action == "remove" and not _confirmed(args, plan):
            print("Nothing removed.", file=sys.stderr)
            return 0  # as kafka-acls.sh: declining is not a failure
    except UsageError as error:
        return usage_error(args, str(error))
    with open_admin(args) as admin:
        if plan.action == "add":
            admin.create_acls(plan.bindings())
            _emit_bindings(args, "added", plan.bindings())
        elif plan.action == "remove":
            deleted = admin.delete_acls(plan.filters())
            _emit_bindings(args, "removed", [b for found in deleted.values() for b in found])
        else:
            found = [b for f in plan.filters() or [AclBindingFilter.ANY]
                     for b in admin.describe_acls(f)]
            if plan.principals:
                found = [b for b in found if b.entry.principal in plan.principals]
            _emit_bindings(args, "acls", found)
    return 0
