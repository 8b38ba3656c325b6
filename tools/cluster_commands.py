"""``samsa cluster info``: the cluster id, the controller and the brokers (DescribeCluster).

``samsa cluster start --config-dir DIR [--override key=value ...]``: run every
``node-<N>.properties`` of DIR as a broker process in the foreground (``tools.cluster_launcher``),
their output prefixed with ``[node-<id>]``; Ctrl-C or SIGTERM stops them all (exit code 0 when
every node stopped cleanly, 1 when one failed or exited by itself).
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
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
    start = commands.add_parser("start", help="run a local cluster, one process per node")
    start.add_argument("--config-dir", type=Path, default=Path("conf/cluster"), metavar="DIR",
                       help="a directory of node-<N>.properties files (default: conf/cluster)")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key on every node, over its file (repeatable)")
    start.set_defaults(handler=run_start)


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


def run_start(args: argparse.Namespace) -> int:
    from tools.cluster_launcher import ClusterLauncher, ClusterStartError

    launcher = ClusterLauncher(args.config_dir, args.override)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()
        launcher.wake()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        launcher.start(stop)
    except ClusterStartError as error:
        launcher.say(f"not started: {error}")
        return 1
    exited = launcher.wait(stop)
    if exited is not None:
        launcher.say(f"node {exited.node_id} exited with code {exited.process.returncode}: "
                     "stopping the cluster")
    else:
        launcher.say("stopping the cluster")
    codes = launcher.stop()
    launcher.say("stopped: " + ", ".join(f"node {node} exit code {code}"
                                         for node, code in codes.items()))
    return 0 if exited is None and not any(codes.values()) else 1
