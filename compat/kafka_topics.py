"""A stand-in for Kafka's ``bin/kafka-topics.sh``, for peer suites that shell out to it.

librdkafka's tests call ``$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server B ARGS`` to create,
grow and delete topics (``test_kafka_topics``); this harness does not install Kafka's Java tools,
so ``librdkafka_suite`` points ``KAFKA_PATH`` at a directory whose ``bin/kafka-topics.sh`` runs
this module, which does the same through ``samsa.AdminClient``. Only what those tests use:
``--create`` (``--topic``, ``--partitions``, ``--replication-factor``, ``--config k=v``),
``--alter --partitions N``, ``--delete``, ``--list``, and ``--command-config FILE`` (client
properties, e.g. ``security.protocol=SASL_PLAINTEXT``, ``sasl.mechanism``, ``sasl.jaas.config``, as
kafka-python's SASL fixture passes; read by ``tools.client_options``). Exit 0 on success, 1 on
error, like the original.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from samsa.admin import AdminClient, NewTopic
from tools.client_options import client_config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-topics.sh")
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--command-config", type=Path)
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("--create", "--alter", "--delete", "--list"):
        action.add_argument(name, action="store_true")
    parser.add_argument("--topic")
    parser.add_argument("--partitions", type=int, default=-1)
    parser.add_argument("--replication-factor", type=int, default=-1)
    parser.add_argument("--config", action="append", default=[])
    parser.set_defaults(client_settings=[])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configs = dict(setting.split("=", 1) for setting in args.config)
    try:
        with AdminClient(client_config(args, **{"client.id": "kafka-topics-stand-in"})) as admin:
            if args.create:
                admin.create_topics([NewTopic(args.topic, args.partitions,
                                              args.replication_factor, configs)])
                print(f"Created topic {args.topic}.")
            elif args.alter:
                admin.create_partitions({args.topic: args.partitions})
            elif args.delete:
                admin.delete_topics([args.topic])
            else:
                print("\n".join(admin.list_topics()))
    except Exception as error:  # what kafka-topics.sh does: one line, exit 1
        print(f"Error while executing topic command : {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
