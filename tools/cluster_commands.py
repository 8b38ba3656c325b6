"""``samsa cluster info``: the cluster id, the controller and the brokers (DescribeCluster)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from tools.admin_support import open_admin
from tools.client_options import add_client_options, print_table

if TYPE_CHECKING:
    from samsa.admin import ClusterDescription

__all__ = ["cluster_document", "register"]


def register(groups: Any) -> None:
    cluster = groups.add_parser("cluster", help="describe the cluster")
    commands = cluster.add_subparsers(dest="command", metavar="COMMAND", required=True)
    info = commands.add_parser("info", help="cluster id, controller, brokers")
    add_client_options(info)
    info.set_defaults(handler=run_info)


def cluster_document(description: ClusterDescription) -> dict[str, Any]:
    return {
        "cluster_id": description.cluster_id,
        "controller_id": description.controller_id,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in description.brokers],
    }


def run_info(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        document = cluster_document(admin.describe_cluster())
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    print(f"Cluster ID: {document['cluster_id']}")
    print(f"Controller: {document['controller_id']}")
    print()
    print_table(document["brokers"], ["node_id", "host", "port", "rack"])
    return 0
