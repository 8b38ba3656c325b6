"""``samsa topics create|list|describe|delete|alter-config``: kafka-topics.sh's jobs, rpk's manners.

- ``create NAME [--partitions N] [--replication-factor R] [--config k=v ...] [--if-not-exists]``
- ``list [--internal]``: name, partitions, replicas per topic.
- ``describe [NAME ...] [--internal]``: per topic, kafka-topics' header line (id, partition count,
  replication factor, the configs set on the topic) and one row per partition (leader,
  replicas, ISR); every topic when no name is given.
- ``delete NAME... [--if-exists]``
- ``alter-config NAME --set k=v ... --delete k ...`` (IncrementalAlterConfigs).

All take the client options (``--bootstrap-server``, ``-X``, ``--command-config``, ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from samsa._admin_types import ConfigResource, NewTopic
from samsa.errors import TopicAlreadyExistsError
from tools.admin_support import config_changes, key_value, open_admin, usage_error, working
from tools.client_options import add_client_options, emit, print_table

if TYPE_CHECKING:
    from samsa.admin import TopicDescription

__all__ = ["describe_document", "register", "topic_rows"]

TOPIC_CONFIG_SOURCE = "DYNAMIC_TOPIC_CONFIG"


def register(groups: Any) -> None:
    topics = groups.add_parser("topics", help="create, list, describe, delete topics; alter configs")
    commands = topics.add_subparsers(dest="command", metavar="COMMAND", required=True)

    create = commands.add_parser("create", help="create a topic")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--partitions", "-p", type=int, default=-1,
                        help="partition count (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", "-r", type=int, default=-1,
                        help="replicas per partition (default: default.replication.factor)")
    create.add_argument("--config", "-c", type=key_value, action="append", default=[],
                        metavar="KEY=VALUE", help="a topic config (repeatable)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="succeed when the topic exists already")
    create.set_defaults(handler=run_create)

    listing = commands.add_parser("list", help="list topics")
    listing.add_argument("--internal", action="store_true", help="include internal topics")
    listing.set_defaults(handler=run_list)

    describe = commands.add_parser("describe", help="partitions, leaders, replicas, configs")
    describe.add_argument("names", nargs="*", metavar="NAME", help="topics (default: all)")
    describe.add_argument("--internal", action="store_true",
                          help="with no NAME, include internal topics")
    describe.set_defaults(handler=run_describe)

    delete = commands.add_parser("delete", help="delete topics and their data")
    delete.add_argument("names", nargs="+", metavar="NAME")
    delete.add_argument("--if-exists", action="store_true", help="skip topics that do not exist")
    delete.set_defaults(handler=run_delete)

    alter = commands.add_parser("alter-config", help="set or delete configs of a topic")
    alter.add_argument("name", metavar="NAME")
    add_alter_options(alter)
    alter.set_defaults(handler=run_alter_config)

    for parser in (create, listing, describe, delete, alter):
        add_client_options(parser)


def add_alter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="set a config (repeatable)")
    parser.add_argument("--delete", action="append", default=[], metavar="KEY",
                        help="delete a config: back to its default (repeatable)")


def run_create(args: argparse.Namespace) -> int:
    topic = NewTopic(args.name, args.partitions, args.replication_factor, dict(args.config))
    created = True
    with open_admin(args) as admin:
        try:
            admin.create_topics([topic])
        except TopicAlreadyExistsError:
            if not args.if_not_exists:
                raise
            created = False
    if args.json:
        print(json.dumps({"topic": args.name, "created": created}))
    else:
        print(f"Created topic {args.name}." if created else f"Topic {args.name} exists already.")
    return 0


def topic_rows(descriptions: dict[str, TopicDescription]) -> list[dict[str, Any]]:
    """One row per topic: name, partition count, replication factor, internal."""
    return [{"name": d.name, "partitions": len(d.partitions),
             "replicas": len(d.partitions[0].replicas) if d.partitions else 0,
             "internal": d.is_internal}
            for d in descriptions.values()]


def run_list(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        names = admin.list_topics(include_internal=args.internal)
        descriptions = admin.describe_topics(names) if names else {}
    emit(args, topic_rows(descriptions), ["name", "partitions", "replicas"])
    return 0


def describe_document(description: TopicDescription, configs: dict[str, str | None]
                      ) -> dict[str, Any]:
    """A topic as ``describe --json`` prints it."""
    return {
        "name": description.name,
        "topic_id": description.topic_id,
        "internal": description.is_internal,
        "partition_count": len(description.partitions),
        "replication_factor": len(description.partitions[0].replicas)
        if description.partitions else 0,
        "configs": configs,
        "partitions": [{"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                        "replicas": list(p.replicas), "isr": list(p.isr)}
                       for p in description.partitions],
    }


def run_describe(args: argparse.Namespace) -> int:
    with open_admin(args) as admin, working(args, "describing topics"):
        names = args.names or admin.list_topics(include_internal=args.internal)
        descriptions = admin.describe_topics(names) if names else {}
        resources = [ConfigResource("topic", name) for name in descriptions]
        configs = admin.describe_configs(resources) if resources else {}
    documents = [
        describe_document(d, {e.name: e.value for e in configs[ConfigResource("topic", d.name)]
                              .values() if e.source == TOPIC_CONFIG_SOURCE})
        for d in descriptions.values()]
    if args.json:
        print(json.dumps(documents, indent=2))
        return 0
    for number, document in enumerate(documents):
        if number:
            print()
        _print_topic(document)
    return 0


def _print_topic(document: dict[str, Any]) -> None:
    configs = ",".join(f"{k}={v}" for k, v in sorted(document["configs"].items()))
    print(f"Topic: {document['name']}\tTopicId: {document['topic_id']}\t"
          f"PartitionCount: {document['partition_count']}\t"
          f"ReplicationFactor: {document['replication_factor']}\tConfigs: {configs}")
    print_table([{"partition": p["partition"], "leader": p["leader"],
                  "replicas": ",".join(map(str, p["replicas"])),
                  "isr": ",".join(map(str, p["isr"]))} for p in document["partitions"]],
                ["partition", "leader", "replicas", "isr"])


def run_delete(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.names))
    with open_admin(args) as admin:
        skipped = []
        if args.if_exists:
            existing = set(admin.list_topics(include_internal=True))
            skipped = [name for name in names if name not in existing]
            names = [name for name in names if name in existing]
        if names:
            admin.delete_topics(names)
    if args.json:
        print(json.dumps({"deleted": names, "skipped": skipped}))
        return 0
    for name in names:
        print(f"Deleted topic {name}.")
    for name in skipped:
        print(f"Topic {name} does not exist: skipped.", file=sys.stderr)
    return 0


def run_alter_config(args: argparse.Namespace) -> int:
    return alter_configs(args, ConfigResource("topic", args.name))


def alter_configs(args: argparse.Namespace, resource: ConfigResource) -> int:
    """``--set``/``--delete`` applied to ``resource`` (shared with ``samsa configs alter``)."""
    if not args.set and not args.delete:
        return usage_error(args, "give at least one --set KEY=VALUE or --delete KEY")
    try:
        changes = config_changes(args.set, args.delete)
    except ValueError as error:
        return usage_error(args, str(error))
    with open_admin(args) as admin:
        admin.alter_configs(resource, changes)
    if args.json:
        print(json.dumps({"resource": {"type": resource.type, "name": resource.name},
                          "changes": changes}))
    else:
        print(f"Completed updating config for {resource.type} {resource.name}.")
    return 0
